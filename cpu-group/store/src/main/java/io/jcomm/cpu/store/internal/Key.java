package io.jcomm.cpu.store.internal;

import io.netty.buffer.ByteBuf;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * A store key: raw bytes (torch keys are arbitrary byte strings) with a seeded hash. Comparable, so
 * that {@link java.util.HashMap} degrades to a tree instead of a list under colliding keys.
 *
 * <p>The server keeps one mutable <em>probe</em> key that it reloads from the receive buffer for
 * every lookup (no allocation); a key is copied only when the map or a waiter retains it.
 */
public final class Key implements Comparable<Key> {

    private byte[] bytes;
    private int length;
    private int hash;
    private final int seed;

    private Key(byte[] bytes, int length, int hash, int seed) {
        this.bytes = bytes;
        this.length = length;
        this.hash = hash;
        this.seed = seed;
    }

    /** A mutable probe with room for {@code capacity} bytes (grown on demand up to what is loaded). */
    public static Key probe(int seed, int capacity) {
        return new Key(new byte[Math.max(16, capacity)], 0, 0, seed);
    }

    /** Loads {@code len} bytes at {@code index} of {@code buf} (length already bounded by the caller). */
    public Key load(ByteBuf buf, int index, int len) {
        if (bytes.length < len) {
            bytes = new byte[Math.max(len, bytes.length * 2)];
        }
        buf.getBytes(index, bytes, 0, len);
        length = len;
        hash = hash(seed, bytes, len);
        return this;
    }

    /** Loads a key from a byte array. */
    public Key load(byte[] src) {
        if (bytes.length < src.length) {
            bytes = new byte[Math.max(src.length, bytes.length * 2)];
        }
        System.arraycopy(src, 0, bytes, 0, src.length);
        length = src.length;
        hash = hash(seed, bytes, length);
        return this;
    }

    /** An immutable copy for retention. */
    public Key copy() {
        return new Key(Arrays.copyOf(bytes, length), length, hash, seed);
    }

    public int length() {
        return length;
    }

    /** The backing array; bytes {@code [0, length())} are the key. Not to be modified. */
    byte[] array() {
        return bytes;
    }

    public boolean contentEquals(byte[] other) {
        return Arrays.equals(bytes, 0, length, other, 0, other.length);
    }

    /** Writes the bytes into {@code out}. */
    public void writeTo(ByteBuf out) {
        out.writeBytes(bytes, 0, length);
    }

    private static int hash(int seed, byte[] b, int len) {
        int h = seed;
        for (int i = 0; i < len; i++) {
            h = 31 * h + b[i];
        }
        // murmur3 finaliser: spreads the polynomial hash over all bits
        h ^= h >>> 16;
        h *= 0x85ebca6b;
        h ^= h >>> 13;
        h *= 0xc2b2ae35;
        h ^= h >>> 16;
        return h;
    }

    @Override
    public int hashCode() {
        return hash;
    }

    @Override
    public boolean equals(Object o) {
        if (this == o) {
            return true;
        }
        if (!(o instanceof Key)) {
            return false;
        }
        Key k = (Key) o;
        return k.hash == hash && Arrays.equals(bytes, 0, length, k.bytes, 0, k.length);
    }

    @Override
    public int compareTo(Key o) {
        return Arrays.compareUnsigned(bytes, 0, length, o.bytes, 0, o.length);
    }

    /** Printable form for logs and errors (non-printable bytes escaped, long keys shortened). */
    @Override
    public String toString() {
        return printable(bytes, length);
    }

    public static String printable(byte[] b, int len) {
        StringBuilder sb = new StringBuilder();
        int n = Math.min(len, 120);
        String s = new String(b, 0, n, StandardCharsets.UTF_8);
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < 0x20 || c == 0x7f) {
                sb.append(String.format("\\x%02x", (int) c));
            } else {
                sb.append(c);
            }
        }
        if (len > n) {
            sb.append("...(").append(len).append(" bytes)");
        }
        return sb.toString();
    }
}
