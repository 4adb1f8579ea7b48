package io.jcomm.transfer;

import io.jcomm.api.ProtocolException;
import io.jcomm.transfer.internal.Names;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Objects;
import java.util.Set;

/**
 * Names a byte range of memory another agent registered: what a one-sided {@link TransferAgent#write}
 * or {@link TransferAgent#read} targets. An immutable value that may be sent anywhere
 * ({@link #encode()} / {@link #decode(byte[])}, a fixed little-endian layout, never Java serialization).
 *
 * <p>A descriptor is a claim, not a capability: the owner checks every transfer against what it
 * registered (region id and generation, bounds, permissions) and refuses a mismatch with a
 * {@link TransferRefusedException}, writing nothing.
 *
 * @param agent       the owning agent's name
 * @param regionId    the owner's region id
 * @param generation  the registration's generation; a deregistered region's descriptors go stale
 * @param kind        where the owner's memory lives (decides whether the shm transport can reach it)
 * @param offset      first byte of the range within the region, {@code >= 0}
 * @param length      bytes in the range, {@code >= 0}
 * @param permissions what the owner granted when registering (the owner's own record is what counts)
 */
public record RemoteDescriptor(String agent, int regionId, long generation, MemoryKind kind, long offset, long length,
                               Set<Permission> permissions) {

    /** Encoding version written first. */
    public static final byte VERSION = 1;
    /** Largest encoding ({@link Names#MAX_LENGTH} one-byte characters). */
    public static final int MAX_ENCODED_BYTES = 1 + 1 + 1 + 1 + Names.MAX_LENGTH + 4 + 8 + 8 + 8;

    public RemoteDescriptor {
        String problem = Names.problem(agent);
        if (problem != null) {
            throw new IllegalArgumentException(problem);
        }
        Objects.requireNonNull(kind, "kind");
        if (offset < 0 || length < 0 || offset + length < 0) {
            throw new IllegalArgumentException("offset " + offset + " and length " + length + " must be >= 0 and not overflow");
        }
        permissions = Set.copyOf(permissions);
    }

    /**
     * The sub-range {@code [offset, offset + length)} of this range (offset relative to this range).
     *
     * @throws IllegalArgumentException when it does not lie within this range
     */
    public RemoteDescriptor slice(long offset, long length) {
        if (offset < 0 || length < 0 || offset > this.length - length) {
            throw new IllegalArgumentException("slice [" + offset + ", +" + length + ") outside a range of " + this.length + " bytes");
        }
        return new RemoteDescriptor(agent, regionId, generation, kind, this.offset + offset, length, permissions);
    }

    /** The bytes of this descriptor (at most {@link #MAX_ENCODED_BYTES}). */
    public byte[] encode() {
        byte[] name = agent.getBytes(StandardCharsets.US_ASCII);
        ByteBuffer b = ByteBuffer.allocate(4 + name.length + 4 + 8 + 8 + 8).order(ByteOrder.LITTLE_ENDIAN);
        b.put(VERSION).put((byte) kind.code()).put((byte) Permission.bits(permissions)).put((byte) name.length).put(name);
        b.putInt(regionId).putLong(generation).putLong(offset).putLong(length);
        return b.array();
    }

    /**
     * Decodes {@link #encode()}'s bytes, trusting none of them: every field is checked (version,
     * kind, permission bits, name length and characters, non-negative offset and length without
     * overflow, no trailing bytes) before anything is built.
     *
     * @throws ProtocolException when the bytes are not a valid descriptor
     */
    public static RemoteDescriptor decode(byte[] bytes) {
        if (bytes == null || bytes.length < 4 || bytes.length > MAX_ENCODED_BYTES) {
            throw new ProtocolException("a remote descriptor has 4.." + MAX_ENCODED_BYTES + " bytes, got "
                    + (bytes == null ? "null" : bytes.length));
        }
        ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        int version = b.get();
        if (version != VERSION) {
            throw new ProtocolException("remote descriptor version " + version + ", expected " + VERSION);
        }
        MemoryKind kind = MemoryKind.ofCode(b.get());
        if (kind == null) {
            throw new ProtocolException("remote descriptor names an unknown memory kind");
        }
        int perms = b.get();
        if ((perms & ~Permission.ALL_BITS) != 0) {
            throw new ProtocolException("remote descriptor carries unknown permission bits " + perms);
        }
        int nameLength = b.get() & 0xff;
        if (nameLength == 0 || nameLength > Names.MAX_LENGTH || bytes.length != 4 + nameLength + 28) {
            throw new ProtocolException("remote descriptor of " + bytes.length + " bytes with an agent name of "
                    + nameLength + " bytes (expected " + (4 + nameLength + 28) + " bytes, a name of 1.." + Names.MAX_LENGTH + ")");
        }
        byte[] name = new byte[nameLength];
        b.get(name);
        String agent = new String(name, StandardCharsets.US_ASCII);
        String problem = Names.problem(agent);
        if (problem != null) {
            throw new ProtocolException("remote descriptor: " + problem);
        }
        int regionId = b.getInt();
        long generation = b.getLong();
        long offset = b.getLong();
        long length = b.getLong();
        if (regionId < 0 || offset < 0 || length < 0 || offset + length < 0) {
            throw new ProtocolException("remote descriptor with region " + regionId + ", offset " + offset
                    + ", length " + length + " (must be >= 0 and not overflow)");
        }
        return new RemoteDescriptor(agent, regionId, generation, kind, offset, length, Permission.of(perms));
    }
}
