package io.jcomm.cpu.codec;

import io.jcomm.api.ProtocolException;
import io.jcomm.runtime.Utf8;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;

/**
 * The values that metadata is made of (null, strings, boxed primitives, primitive arrays), written by
 * {@link ForyCodec} without Fory: a first byte names the form, little-endian payload after it. Making
 * Fory loads about a thousand classes (0.6 s of a cold JVM's CPU here); a group whose object
 * collectives carry only these values never does. Every other value is {@link #FORY}, Fory's bytes.
 *
 * <p>Decoding trusts nothing: the payload's length must be exactly what the form needs (a multiple of
 * the element size for arrays), a boolean is 0 or 1, and a string is well-formed UTF-8; anything else
 * is a {@link ProtocolException}. Strings with unpaired surrogates (which UTF-8 cannot carry) go
 * through Fory, so every value comes back equal.
 */
final class Scalars {

    static final byte FORY = 0;
    static final byte NULL = 1;
    static final byte STRING = 2;
    static final byte LONG = 3;
    static final byte INT = 4;
    static final byte DOUBLE = 5;
    static final byte FLOAT = 6;
    static final byte BOOLEAN = 7;
    static final byte SHORT = 8;
    static final byte BYTE = 9;
    static final byte CHAR = 10;
    static final byte BYTES = 11;
    static final byte LONGS = 12;
    static final byte INTS = 13;
    static final byte DOUBLES = 14;
    static final byte FLOATS = 15;

    private Scalars() {
    }

    /** {@code value} in its own form, or null when it needs Fory. */
    static byte[] encode(Object value) {
        if (value == null) {
            return new byte[] {NULL};
        }
        Class<?> c = value.getClass();
        if (c == String.class) {
            String s = (String) value;
            if (!wellFormed(s)) {
                return null;
            }
            byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
            byte[] out = new byte[1 + utf8.length];
            out[0] = STRING;
            System.arraycopy(utf8, 0, out, 1, utf8.length);
            return out;
        }
        if (c == Long.class) {
            return buffer(LONG, 8).putLong((Long) value).array();
        }
        if (c == Integer.class) {
            return buffer(INT, 4).putInt((Integer) value).array();
        }
        if (c == Double.class) {
            return buffer(DOUBLE, 8).putLong(Double.doubleToRawLongBits((Double) value)).array();
        }
        if (c == Float.class) {
            return buffer(FLOAT, 4).putInt(Float.floatToRawIntBits((Float) value)).array();
        }
        if (c == Boolean.class) {
            return new byte[] {BOOLEAN, (byte) ((Boolean) value ? 1 : 0)};
        }
        if (c == Short.class) {
            return buffer(SHORT, 2).putShort((Short) value).array();
        }
        if (c == Byte.class) {
            return new byte[] {BYTE, (Byte) value};
        }
        if (c == Character.class) {
            return buffer(CHAR, 2).putChar((Character) value).array();
        }
        if (c == byte[].class) {
            byte[] a = (byte[]) value;
            byte[] out = new byte[1 + a.length];
            out[0] = BYTES;
            System.arraycopy(a, 0, out, 1, a.length);
            return out;
        }
        if (c == long[].class) {
            long[] a = (long[]) value;
            ByteBuffer b = buffer(LONGS, 8L * a.length);
            b.asLongBuffer().put(a);
            return b.array();
        }
        if (c == int[].class) {
            int[] a = (int[]) value;
            ByteBuffer b = buffer(INTS, 4L * a.length);
            b.asIntBuffer().put(a);
            return b.array();
        }
        if (c == double[].class) {
            double[] a = (double[]) value;
            ByteBuffer b = buffer(DOUBLES, 8L * a.length);
            b.asDoubleBuffer().put(a);
            return b.array();
        }
        if (c == float[].class) {
            float[] a = (float[]) value;
            ByteBuffer b = buffer(FLOATS, 4L * a.length);
            b.asFloatBuffer().put(a);
            return b.array();
        }
        return null;
    }

    /** The value of the form {@code bytes[offset]} names (not {@link #FORY}); the range is checked by the caller. */
    static Object decode(byte[] bytes, int offset, int length) {
        byte form = bytes[offset];
        int n = length - 1;
        ByteBuffer in = ByteBuffer.wrap(bytes, offset + 1, n).slice().order(ByteOrder.LITTLE_ENDIAN);
        switch (form) {
            case NULL:
                exactly(form, n, 0);
                return null;
            case STRING: {
                String s = Utf8.decodeStrict(in);
                if (s == null) {
                    throw new ProtocolException("malformed UTF-8 in a string of " + n + " bytes");
                }
                return s;
            }
            case LONG:
                exactly(form, n, 8);
                return in.getLong();
            case INT:
                exactly(form, n, 4);
                return in.getInt();
            case DOUBLE:
                exactly(form, n, 8);
                return Double.longBitsToDouble(in.getLong());
            case FLOAT:
                exactly(form, n, 4);
                return Float.intBitsToFloat(in.getInt());
            case BOOLEAN:
                exactly(form, n, 1);
                byte b = in.get();
                if (b != 0 && b != 1) {
                    throw new ProtocolException("boolean byte " + b + "; must be 0 or 1");
                }
                return b == 1;
            case SHORT:
                exactly(form, n, 2);
                return in.getShort();
            case BYTE:
                exactly(form, n, 1);
                return in.get();
            case CHAR:
                exactly(form, n, 2);
                return in.getChar();
            case BYTES: {
                byte[] a = new byte[n];
                in.get(a);
                return a;
            }
            case LONGS: {
                long[] a = new long[elements(form, n, 8)];
                in.asLongBuffer().get(a);
                return a;
            }
            case INTS: {
                int[] a = new int[elements(form, n, 4)];
                in.asIntBuffer().get(a);
                return a;
            }
            case DOUBLES: {
                double[] a = new double[elements(form, n, 8)];
                in.asDoubleBuffer().get(a);
                return a;
            }
            case FLOATS: {
                float[] a = new float[elements(form, n, 4)];
                in.asFloatBuffer().get(a);
                return a;
            }
            default:
                throw new ProtocolException("unknown value form " + form);
        }
    }

    private static ByteBuffer buffer(byte form, long payload) {
        if (payload > Integer.MAX_VALUE - 1) {
            throw new IllegalArgumentException("value of " + payload + " bytes is too large to encode");
        }
        return ByteBuffer.allocate(1 + (int) payload).order(ByteOrder.LITTLE_ENDIAN).put(form);
    }

    private static void exactly(byte form, int n, int want) {
        if (n != want) {
            throw new ProtocolException("value form " + form + " needs " + want + " bytes, got " + n);
        }
    }

    private static int elements(byte form, int n, int size) {
        if (n % size != 0) {
            throw new ProtocolException("array form " + form + " of " + n + " bytes is not a multiple of " + size);
        }
        return n / size;
    }

    /** Whether every surrogate in {@code s} is part of a pair (UTF-8 can carry it unchanged). */
    private static boolean wellFormed(String s) {
        for (int i = 0; i < s.length(); i++) {
            char ch = s.charAt(i);
            if (Character.isHighSurrogate(ch)) {
                if (i + 1 >= s.length() || !Character.isLowSurrogate(s.charAt(i + 1))) {
                    return false;
                }
                i++;
            } else if (Character.isLowSurrogate(ch)) {
                return false;
            }
        }
        return true;
    }
}
