package io.jcomm.kvcache;

import io.jcomm.api.ProtocolException;
import java.util.Arrays;
import java.util.HexFormat;

/**
 * The 32-byte name of a KV block or of a token prefix: a SHA-256 digest made by {@link BlockHasher}.
 * Equal prefixes of equal models give equal hashes on every host, so a hash can be looked up anywhere
 * (the host index, the events, a router). Immutable; {@link #equals} compares the bytes.
 */
public final class BlockHash {

    /** Bytes of a hash. */
    public static final int BYTES = 32;

    private final byte[] bytes;
    private final int hash;

    private BlockHash(byte[] bytes) {
        this.bytes = bytes;
        this.hash = Arrays.hashCode(bytes);
    }

    /**
     * The hash with these bytes (copied).
     *
     * @throws ProtocolException unless there are exactly {@value #BYTES}
     */
    public static BlockHash of(byte[] bytes) {
        if (bytes == null || bytes.length != BYTES) {
            throw new ProtocolException("a block hash has " + BYTES + " bytes, got " + (bytes == null ? "null" : bytes.length));
        }
        return new BlockHash(bytes.clone());
    }

    /** {@link #of(byte[])} of {@code BYTES} bytes at {@code offset} of {@code src}. */
    public static BlockHash of(byte[] src, int offset) {
        if (offset < 0 || offset > src.length - BYTES) {
            throw new ProtocolException("a block hash at " + offset + " of " + src.length + " bytes");
        }
        return new BlockHash(Arrays.copyOfRange(src, offset, offset + BYTES));
    }

    /** Takes {@code digest} without copying; only for digests this package made. */
    static BlockHash wrap(byte[] digest) {
        return new BlockHash(digest);
    }

    /** A copy of the bytes. */
    public byte[] bytes() {
        return bytes.clone();
    }

    /** Copies the bytes into {@code dst} at {@code offset}. */
    public void copyTo(byte[] dst, int offset) {
        System.arraycopy(bytes, 0, dst, offset, BYTES);
    }

    byte[] unsafeBytes() {
        return bytes;
    }

    /** The first 8 bytes as a long (little-endian), for logs and sharding. */
    public long prefix64() {
        long v = 0;
        for (int i = 7; i >= 0; i--) {
            v = (v << 8) | (bytes[i] & 0xff);
        }
        return v;
    }

    /** All 64 hex digits. */
    public String hex() {
        return HexFormat.of().formatHex(bytes);
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof BlockHash b && b.hash == hash && Arrays.equals(b.bytes, bytes);
    }

    @Override
    public int hashCode() {
        return hash;
    }

    /** The first 16 hex digits. */
    @Override
    public String toString() {
        return hex().substring(0, 16);
    }
}
