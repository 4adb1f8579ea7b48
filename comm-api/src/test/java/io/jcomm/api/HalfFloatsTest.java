package io.jcomm.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class HalfFloatsTest {

    @Test
    void everyF16BitPatternRoundTrips() {
        for (int b = 0; b < 0x10000; b++) {
            short bits = (short) b;
            float f = HalfFloats.f16ToFloat(bits);
            short back = HalfFloats.floatToF16(f);
            if (Float.isNaN(f)) {
                assertTrue(Float.isNaN(HalfFloats.f16ToFloat(back)));
            } else {
                assertEquals(bits, back, "pattern " + Integer.toHexString(b));
            }
        }
    }

    @Test
    void knownF16Values() {
        assertEquals(1.0f, HalfFloats.f16ToFloat((short) 0x3c00));
        assertEquals(-2.0f, HalfFloats.f16ToFloat((short) 0xc000));
        assertEquals(65504f, HalfFloats.f16ToFloat((short) 0x7bff));
        assertEquals(0x1p-24f, HalfFloats.f16ToFloat((short) 0x0001));
        assertEquals((short) 0x7c00, HalfFloats.floatToF16(1e6f)); // overflow -> inf
        assertEquals((short) 0x3c00, HalfFloats.floatToF16(1.0001f)); // rounds to 1
        // 1 + 2^-11 is exactly between 1 and the next half (1 + 2^-10): ties to even -> 1
        assertEquals((short) 0x3c00, HalfFloats.floatToF16(1f + 0x1p-11f));
        assertEquals((short) 0x3c02, HalfFloats.floatToF16(1f + 3 * 0x1p-11f));
    }

    @Test
    void bf16RoundsToNearestEven() {
        assertEquals(1.0f, HalfFloats.bf16ToFloat(HalfFloats.floatToBf16(1.0f)));
        assertEquals((short) 0x3f80, HalfFloats.floatToBf16(Float.intBitsToFloat(0x3f808000))); // tie -> even
        assertEquals((short) 0x3f82, HalfFloats.floatToBf16(Float.intBitsToFloat(0x3f818000))); // tie -> even (up)
        assertTrue(Float.isNaN(HalfFloats.bf16ToFloat(HalfFloats.floatToBf16(Float.NaN))));
        for (int b = 0; b < 0x10000; b++) {
            float f = HalfFloats.bf16ToFloat((short) b);
            if (!Float.isNaN(f)) {
                assertEquals((short) b, HalfFloats.floatToBf16(f));
            }
        }
    }
}
