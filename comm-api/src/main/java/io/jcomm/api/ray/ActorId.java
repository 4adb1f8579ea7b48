package io.jcomm.api.ray;

import java.nio.charset.StandardCharsets;

/**
 * A 128-bit actor id written as 32 lower-case hex characters, as Ray prints them. On the wire (the
 * actor-id all-gather of the PP adapter) an id travels as its 32 ASCII characters, one
 * {@code uint8} each, exactly as vLLM encodes it.
 *
 * @param high the first 64 bits (first 16 hex characters)
 * @param low  the last 64 bits
 */
public record ActorId(long high, long low) {

    /** Number of hex characters, and of bytes in the wire form. */
    public static final int HEX_LENGTH = 32;

    /**
     * Parses 32 hex characters (either case).
     *
     * @throws IllegalArgumentException for anything else (a reader of a peer's bytes reports them as
     *                                  its own {@link io.jcomm.api.ProtocolException})
     */
    public static ActorId parse(String hex) {
        if (hex == null || hex.length() != HEX_LENGTH) {
            throw new IllegalArgumentException("actor id must be " + HEX_LENGTH + " hex characters, got "
                    + (hex == null ? "null" : "'" + hex + "'"));
        }
        return new ActorId(parseHalf(hex, 0), parseHalf(hex, 16));
    }

    private static long parseHalf(String hex, int from) {
        long v = 0;
        for (int i = from; i < from + 16; i++) {
            int d = Character.digit(hex.charAt(i), 16);
            if (d < 0) {
                throw new IllegalArgumentException("actor id has a non-hex character: '" + hex + "'");
            }
            v = (v << 4) | d;
        }
        return v;
    }

    /**
     * Decodes the 32 ASCII bytes at {@code offset}.
     *
     * @throws IllegalArgumentException if there are not 32 bytes at {@code offset} or they are not hex
     */
    public static ActorId fromAsciiBytes(byte[] bytes, int offset) {
        if (offset < 0 || bytes.length - offset < HEX_LENGTH) {
            throw new IllegalArgumentException("actor id needs " + HEX_LENGTH + " bytes at offset " + offset);
        }
        return parse(new String(bytes, offset, HEX_LENGTH, StandardCharsets.US_ASCII));
    }

    /** The 32 lower-case hex characters. */
    public String toHex() {
        return String.format("%016x%016x", high, low);
    }

    /** The wire form: 32 ASCII bytes. */
    public byte[] toAsciiBytes() {
        return toHex().getBytes(StandardCharsets.US_ASCII);
    }

    /*
     * equals and hashCode by hand, with the record's own meaning: the generated ones link through
     * java.lang.runtime.ObjectMethods at their first call (tens of milliseconds in a fresh JVM), and
     * every rank maps actor ids once it is ready.
     */

    @Override
    public boolean equals(Object o) {
        return o == this || o instanceof ActorId a && high == a.high && low == a.low;
    }

    @Override
    public int hashCode() {
        return Long.hashCode(high) * 31 + Long.hashCode(low);
    }

    @Override
    public String toString() {
        return toHex();
    }
}
