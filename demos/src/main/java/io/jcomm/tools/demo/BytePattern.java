package io.jcomm.tools.demo;

import java.nio.ByteBuffer;

/**
 * The bytes the two-job transfer demos write and verify: a range starts from a seed that follows from
 * up to three indices (e.g. request, layer and block, or version and tensor) and every later long word
 * adds {@link #GOLDEN}, so that the writer fills and the reader checks a range in one pass of long
 * words, and a byte of another range, another version or another offset is always told apart.
 * Buffers are read and written in their own byte order (the demos use little-endian on both sides).
 */
final class BytePattern {

    /** What every long word adds to the one before it. */
    static final long GOLDEN = 0x9E3779B97F4A7C15L;

    private BytePattern() {
    }

    /** The first long word of the range named by {@code (a, b, c)}. */
    static long seed(long a, long b, long c) {
        long x = a * 0xBF58476D1CE4E5B9L ^ (b + 1) * 0x94D049BB133111EBL ^ (c + 1) * 0xD6E8FEB86659FD93L;
        return x ^ (x >>> 31);
    }

    /** Writes the pattern of {@code seed} into {@code [offset, offset + length)} ({@code length} a multiple of 8). */
    static void fill(ByteBuffer b, long offset, long length, long seed) {
        long v = seed;
        int end = Math.toIntExact(offset + length);
        for (int i = (int) offset; i < end; i += 8) {
            b.putLong(i, v);
            v += GOLDEN;
        }
    }

    /** Bytes of {@code [offset, offset + length)} that differ from {@link #fill}'s. */
    static long wrongBytes(ByteBuffer b, long offset, long length, long seed) {
        long v = seed;
        long wrong = 0;
        int end = Math.toIntExact(offset + length);
        for (int i = (int) offset; i < end; i += 8) {
            long got = b.getLong(i);
            if (got != v) {
                long x = got ^ v;
                for (int k = 0; k < 8; k++) {
                    if (((x >>> (8 * k)) & 0xff) != 0) {
                        wrong++;
                    }
                }
            }
            v += GOLDEN;
        }
        return wrong;
    }
}
