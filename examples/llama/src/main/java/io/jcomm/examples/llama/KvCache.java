package io.jcomm.examples.llama;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/**
 * One sequence's keys and values on one rank: for each local layer, a key plane and a value plane of
 * {@code capacity} positions x {@link ShardPlan#kvRowFloats()} floats (the local KV heads), in
 * little-endian bytes of a buffer the caller gives: plain direct memory, or a region registered with
 * a {@code TransferAgent}, so that a prefill job can write a prompt's blocks straight into a decode
 * job's cache.
 *
 * <p>Layout: {@code ((layer * 2 + plane) * capacity + position) * rowFloats}, plane 0 keys, 1 values.
 * A block of {@code n} positions of one plane is contiguous ({@link #byteOffset}, {@link #rowBytes}).
 * Not thread safe.
 */
final class KvCache {

    static final int KEYS = 0;
    static final int VALUES = 1;

    private final FloatBuffer data;
    private final int layers;
    private final int capacity;
    private final int rowFloats;

    /**
     * @param memory    at least {@link #bytes} bytes from its position (a view of them is kept)
     * @param layers    local layers
     * @param capacity  positions
     * @param rowFloats floats of one position of one plane
     */
    KvCache(ByteBuffer memory, int layers, int capacity, int rowFloats) {
        long need = bytes(layers, capacity, rowFloats);
        if (memory.remaining() < need) {
            throw new IllegalArgumentException("a KV cache of " + layers + " layers x " + capacity + " positions x "
                    + rowFloats + " floats needs " + need + " bytes, the buffer has " + memory.remaining());
        }
        this.data = memory.slice().order(ByteOrder.LITTLE_ENDIAN).limit((int) need).slice()
                .order(ByteOrder.LITTLE_ENDIAN).asFloatBuffer();
        this.layers = layers;
        this.capacity = capacity;
        this.rowFloats = rowFloats;
    }

    /** A cache over new direct memory. */
    static KvCache allocate(ShardPlan plan, int capacity) {
        long bytes = bytes(plan.localLayers(), capacity, plan.kvRowFloats());
        return new KvCache(ByteBuffer.allocateDirect((int) bytes), plan.localLayers(), capacity, plan.kvRowFloats());
    }

    /**
     * Bytes of a cache of these dimensions.
     *
     * @throws IllegalArgumentException beyond 2 GiB (one buffer, one registered region)
     */
    static long bytes(int layers, int capacity, int rowFloats) {
        if (layers < 1 || capacity < 1 || rowFloats < 1) {
            throw new IllegalArgumentException("layers, capacity and row must be positive");
        }
        long b = 2L * layers * capacity * rowFloats * Float.BYTES;
        if (b > Integer.MAX_VALUE - 64) {
            throw new IllegalArgumentException("a KV cache of " + b + " bytes is beyond one buffer (2 GiB)");
        }
        return b;
    }

    int capacity() {
        return capacity;
    }

    int layers() {
        return layers;
    }

    int rowFloats() {
        return rowFloats;
    }

    /** Bytes of one position of one plane. */
    long rowBytes() {
        return (long) rowFloats * Float.BYTES;
    }

    /** Byte offset of {@code position} of {@code plane} of {@code layer} (local) within the cache. */
    long byteOffset(int layer, int plane, int position) {
        return index(layer, plane, position) * (long) Float.BYTES;
    }

    private int index(int layer, int plane, int position) {
        if (layer < 0 || layer >= layers || (plane != KEYS && plane != VALUES) || position < 0 || position > capacity) {
            throw new IndexOutOfBoundsException("layer " + layer + " plane " + plane + " position " + position + " of a cache of "
                    + layers + " layers x " + capacity + " positions");
        }
        return ((layer * 2 + plane) * capacity + position) * rowFloats;
    }

    /** Stores one position's row of {@code plane} from {@code src[srcOffset..]}. */
    void put(int layer, int plane, int position, float[] src, int srcOffset) {
        if (position >= capacity) {
            throw new IllegalStateException("position " + position + " is beyond the KV cache's " + capacity + " positions");
        }
        data.put(index(layer, plane, position), src, srcOffset, rowFloats);
    }

    /** Copies positions {@code [0, count)} of {@code plane} into {@code dst} ({@code count x rowFloats}). */
    void read(int layer, int plane, int count, float[] dst) {
        data.get(index(layer, plane, 0), dst, 0, count * rowFloats);
    }
}
