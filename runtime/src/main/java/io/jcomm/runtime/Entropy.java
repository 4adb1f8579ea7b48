package io.jcomm.runtime;

import java.io.FileInputStream;
import java.io.IOException;
import java.security.SecureRandom;

/**
 * Random bytes for names, nonces and keys, read from the kernel's {@code /dev/urandom} (the source
 * the JDK's default {@link SecureRandom} reads on Linux too) without the JDK's security providers:
 * the first {@code SecureRandom} or {@code MessageDigest} of a JVM sets them up, 30-40 ms of a cold
 * JVM's CPU that every rank paid before its groups were ready. Where {@code /dev/urandom} cannot be
 * read (another OS, a sandbox), a {@code SecureRandom} made at that first failure serves instead.
 * Thread safe.
 */
public final class Entropy {

    private static final String URANDOM = "/dev/urandom";

    private Entropy() {
    }

    /** Fills {@code bytes} with random bytes. */
    public static void nextBytes(byte[] bytes) {
        try (FileInputStream in = new FileInputStream(URANDOM)) {
            if (in.readNBytes(bytes, 0, bytes.length) == bytes.length) {
                return;
            }
        } catch (IOException | SecurityException e) {
            // served by the fallback below
        }
        Fallback.RANDOM.nextBytes(bytes);
    }

    /** A random {@code long}. */
    public static long nextLong() {
        byte[] b = new byte[Long.BYTES];
        nextBytes(b);
        long v = 0;
        for (byte x : b) {
            v = v << 8 | (x & 0xff);
        }
        return v;
    }

    /** A random {@code int} in {@code [0, bound)} ({@code bound > 0}; the bias is below 2^-32). */
    public static int nextInt(int bound) {
        if (bound <= 0) {
            throw new IllegalArgumentException("bound must be positive: " + bound);
        }
        return (int) ((nextLong() >>> 1) % bound);
    }

    private static final class Fallback {
        static final SecureRandom RANDOM = new SecureRandom();
    }
}
