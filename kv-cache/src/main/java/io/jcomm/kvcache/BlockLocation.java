package io.jcomm.kvcache;

import io.jcomm.api.ProtocolException;
import io.jcomm.transfer.RemoteDescriptor;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Objects;

/**
 * Where the bytes of one KV block are, and how to check them: the instance that published it (a
 * job's rank, say), the registered memory that holds it ({@link RemoteDescriptor}: the transfer agent,
 * its region id and generation, offset and length), the slice of the cache it holds, how many tokens,
 * a CRC32C of each KV head's bytes (what a reader checks after its transfer: the owner may have
 * recycled the block meanwhile), the owning process (pid and start time, checked before an entry is
 * served) and when it was stored.
 *
 * <p>Encoded in a fixed little-endian layout ({@link #encode}, {@link #decode}), never Java
 * serialization; {@link #decode} trusts no byte. Immutable.
 *
 * @param instance       who published it (1 to {@value #MAX_INSTANCE_BYTES} bytes of UTF-8)
 * @param where          the owner's registered range holding the block
 * @param slice          the layers and KV heads it holds
 * @param tokens         tokens in the block (a partial last block has fewer than the block size)
 * @param headChecksums  CRC32C of each head's bytes, {@code slice.heads()} of them (see
 *                       {@link BlockLayout#headChecksums})
 * @param owner          the process that owns the memory
 * @param storedAtMicros when it was stored, microseconds since the epoch
 */
public record BlockLocation(String instance, RemoteDescriptor where, KvSlice slice, int tokens, int[] headChecksums,
                            BlockOwner owner, long storedAtMicros) {

    /** Encoding version written first. */
    public static final byte VERSION = 1;
    /** Longest instance name in bytes. */
    public static final int MAX_INSTANCE_BYTES = 128;
    /** Most KV heads in one located block. */
    public static final int MAX_HEADS = 256;
    /** Largest encoding. */
    public static final int MAX_ENCODED_BYTES = 1 + 2 + MAX_INSTANCE_BYTES + 1 + RemoteDescriptor.MAX_ENCODED_BYTES + 16 + 4
            + 2 + 4 * MAX_HEADS + 24;

    public BlockLocation {
        Objects.requireNonNull(instance, "instance");
        Objects.requireNonNull(where, "where");
        Objects.requireNonNull(slice, "slice");
        Objects.requireNonNull(owner, "owner");
        int ib = instance.getBytes(StandardCharsets.UTF_8).length;
        if (ib < 1 || ib > MAX_INSTANCE_BYTES) {
            throw new IllegalArgumentException("an instance name has 1.." + MAX_INSTANCE_BYTES + " bytes, got " + ib);
        }
        if (tokens < 1 || tokens > 1 << 16) {
            throw new IllegalArgumentException("tokens is 1..65536, got " + tokens);
        }
        if (slice.heads() > MAX_HEADS || headChecksums.length != slice.heads()) {
            throw new IllegalArgumentException(headChecksums.length + " head checksums for " + slice + " (at most "
                    + MAX_HEADS + " heads)");
        }
        headChecksums = headChecksums.clone();
    }

    @Override
    public int[] headChecksums() {
        return headChecksums.clone();
    }

    /** The checksum of head {@code head} (an index of the model's heads, within {@link #slice}). */
    public int headChecksum(int head) {
        return headChecksums[head - slice.headStart()];
    }

    /** The bytes of this location. */
    public byte[] encode() {
        byte[] inst = instance.getBytes(StandardCharsets.UTF_8);
        byte[] desc = where.encode();
        ByteBuffer b = ByteBuffer.allocate(1 + 2 + inst.length + 1 + desc.length + 16 + 4 + 2 + 4 * headChecksums.length + 24)
                .order(ByteOrder.LITTLE_ENDIAN);
        b.put(VERSION).putShort((short) inst.length).put(inst).put((byte) desc.length).put(desc);
        b.putInt(slice.layerStart()).putInt(slice.layerEnd()).putInt(slice.headStart()).putInt(slice.headEnd());
        b.putInt(tokens).putShort((short) headChecksums.length);
        for (int c : headChecksums) {
            b.putInt(c);
        }
        b.putLong(owner.pid()).putLong(owner.startTicks()).putLong(storedAtMicros);
        return b.array();
    }

    /** {@link #decode(ByteBuffer)} of all of {@code bytes}. */
    public static BlockLocation decode(byte[] bytes) {
        if (bytes == null || bytes.length > MAX_ENCODED_BYTES) {
            throw new ProtocolException("a block location has at most " + MAX_ENCODED_BYTES + " bytes");
        }
        ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        BlockLocation l = decode(b);
        if (b.hasRemaining()) {
            throw new ProtocolException("a block location with " + b.remaining() + " trailing bytes");
        }
        return l;
    }

    /**
     * Decodes one location from {@code b}'s position (little-endian), checking every field and length
     * before anything is allocated.
     *
     * @throws ProtocolException when the bytes are not a valid location
     */
    public static BlockLocation decode(ByteBuffer b) {
        try {
            int version = b.get();
            if (version != VERSION) {
                throw new ProtocolException("block location version " + version + ", expected " + VERSION);
            }
            int il = b.getShort() & 0xffff;
            if (il < 1 || il > MAX_INSTANCE_BYTES || il > b.remaining()) {
                throw new ProtocolException("block location with an instance name of " + il + " bytes");
            }
            byte[] inst = new byte[il];
            b.get(inst);
            int dl = b.get() & 0xff;
            if (dl > RemoteDescriptor.MAX_ENCODED_BYTES || dl > b.remaining()) {
                throw new ProtocolException("block location with a descriptor of " + dl + " bytes");
            }
            byte[] desc = new byte[dl];
            b.get(desc);
            RemoteDescriptor where = RemoteDescriptor.decode(desc);
            KvSlice slice;
            int l0 = b.getInt();
            int l1 = b.getInt();
            int h0 = b.getInt();
            int h1 = b.getInt();
            try {
                slice = new KvSlice(l0, l1, h0, h1);
            } catch (IllegalArgumentException e) {
                throw new ProtocolException("block location: " + e.getMessage());
            }
            int tokens = b.getInt();
            int n = b.getShort() & 0xffff;
            if (n != slice.heads() || n > MAX_HEADS || 4L * n > b.remaining()) {
                throw new ProtocolException("block location with " + n + " head checksums for " + slice);
            }
            int[] crc = new int[n];
            for (int i = 0; i < n; i++) {
                crc[i] = b.getInt();
            }
            long pid = b.getLong();
            long start = b.getLong();
            long at = b.getLong();
            if (tokens < 1 || tokens > 1 << 16 || pid <= 0) {
                throw new ProtocolException("block location with " + tokens + " tokens, owner pid " + pid);
            }
            return new BlockLocation(new String(inst, StandardCharsets.UTF_8), where, slice, tokens, crc,
                    new BlockOwner(pid, start), at);
        } catch (BufferUnderflowException e) {
            throw new ProtocolException("truncated block location");
        } catch (IllegalArgumentException e) {
            throw new ProtocolException("block location: " + e.getMessage());
        }
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof BlockLocation l && l.instance.equals(instance) && l.where.equals(where) && l.slice.equals(slice)
                && l.tokens == tokens && Arrays.equals(l.headChecksums, headChecksums) && l.owner.equals(owner)
                && l.storedAtMicros == storedAtMicros;
    }

    @Override
    public int hashCode() {
        return Objects.hash(instance, where, slice, tokens, Arrays.hashCode(headChecksums), owner, storedAtMicros);
    }

    @Override
    public String toString() {
        return "BlockLocation[" + instance + ", " + where.agent() + " region " + where.regionId() + " @" + where.offset() + "+"
                + where.length() + ", " + slice + ", " + tokens + " tokens, owner pid " + owner.pid() + "]";
    }
}
