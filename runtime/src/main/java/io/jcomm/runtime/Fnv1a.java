package io.jcomm.runtime;

/**
 * The 64-bit FNV-1a hash: for names and fingerprints that only have to differ when their inputs
 * differ by accident (cache keys, codec registrations), not for anything an adversary chooses. It
 * needs none of the JDK's security providers, whose set-up costs a cold JVM 30-40 ms of CPU.
 */
public final class Fnv1a {

    /** The hash of no bytes (FNV's 64-bit offset basis). */
    public static final long EMPTY = 0xcbf29ce484222325L;
    private static final long PRIME = 0x100000001b3L;

    private Fnv1a() {
    }

    /** {@code hash} continued over {@code bytes}. */
    public static long update(long hash, byte[] bytes) {
        long h = hash;
        for (byte b : bytes) {
            h ^= b & 0xff;
            h *= PRIME;
        }
        return h;
    }

    /** {@code hash} continued over one byte. */
    public static long update(long hash, byte b) {
        return (hash ^ (b & 0xff)) * PRIME;
    }

    /** {@code hash} as 16 lower-case hex digits. */
    public static String hex(long hash) {
        String s = Long.toHexString(hash);
        return "0".repeat(16 - s.length()) + s;
    }
}
