package io.jcomm.api;

/**
 * Conversions between IEEE-754 binary16 / bfloat16 bit patterns and {@code float}. Rounding is
 * round-to-nearest-even, as in PyTorch; NaN stays NaN and infinities are preserved.
 */
public final class HalfFloats {

    private HalfFloats() {
    }

    /** Widens a binary16 bit pattern to float (exact). */
    public static float f16ToFloat(short bits) {
        int h = bits & 0xffff;
        int sign = (h & 0x8000) << 16;
        int exp = (h >>> 10) & 0x1f;
        int mant = h & 0x3ff;
        if (exp == 0x1f) {
            return Float.intBitsToFloat(sign | 0x7f800000 | (mant << 13));
        }
        if (exp == 0) {
            if (mant == 0) {
                return Float.intBitsToFloat(sign);
            }
            // subnormal: value = mant * 2^-24
            float v = mant * 0x1p-24f;
            return sign != 0 ? -v : v;
        }
        return Float.intBitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
    }

    /** Narrows a float to a binary16 bit pattern, rounding to nearest even. */
    public static short floatToF16(float value) {
        int f = Float.floatToRawIntBits(value);
        int sign = (f >>> 16) & 0x8000;
        int exp = (f >>> 23) & 0xff;
        int mant = f & 0x7fffff;
        if (exp == 0xff) { // inf or NaN
            return (short) (sign | 0x7c00 | (mant != 0 ? 0x200 | (mant >>> 13) : 0));
        }
        int e = exp - 127 + 15;
        if (e >= 0x1f) { // overflow -> inf
            return (short) (sign | 0x7c00);
        }
        if (e <= 0) { // subnormal or zero in half
            if (e < -10) {
                return (short) sign;
            }
            int m = mant | 0x800000;
            int shift = 14 - e;
            int half = m >>> shift;
            int rem = m & ((1 << shift) - 1);
            int mid = 1 << (shift - 1);
            if (rem > mid || (rem == mid && (half & 1) != 0)) {
                half++;
            }
            return (short) (sign | half);
        }
        int half = (e << 10) | (mant >>> 13);
        int rem = mant & 0x1fff;
        if (rem > 0x1000 || (rem == 0x1000 && (half & 1) != 0)) {
            half++; // may carry into exponent, which is the correct rounding (up to inf)
        }
        return (short) (sign | half);
    }

    /** Widens a bfloat16 bit pattern to float (exact). */
    public static float bf16ToFloat(short bits) {
        return Float.intBitsToFloat((bits & 0xffff) << 16);
    }

    /** Narrows a float to a bfloat16 bit pattern, rounding to nearest even. */
    public static short floatToBf16(float value) {
        int f = Float.floatToRawIntBits(value);
        if ((f & 0x7f800000) == 0x7f800000 && (f & 0x7fffff) != 0) {
            return (short) ((f >>> 16) | 0x40); // quiet NaN
        }
        int lsb = (f >>> 16) & 1;
        int rounded = f + 0x7fff + lsb;
        return (short) (rounded >>> 16);
    }
}
