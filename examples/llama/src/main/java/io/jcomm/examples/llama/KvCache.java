package io.jcomm.examples.llama;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.FloatBuffer;

/**
 * One sequence's keys and values on one rank: for each local layer, a key plane and a value plane,
 * each holding, for each local KV head, {@code capacity} positions x {@code headDim} floats (vLLM's
 * "HND" layout), in little-endian bytes of a buffer the caller gives: plain direct memory, or a region
 * registered with a {@code TransferAgent}, so that a prefill job can write a prompt's blocks straight
 * into a decode job's cache, and a rank can read the blocks of a cached prefix into it.
 *
 * <p>Layout: {@code (((layer * 2 + plane) * heads + head) * capacity + position) * headDim}, plane 0
 * keys, 1 values. A run of {@code n} positions of one head of one plane is contiguous
 * ({@link #byteOffset}, {@link #headRowBytes}): what another tensor-parallel split reads or writes
 * head by head. Not thread safe.
 */
final class KvCache {

    static final int KEYS = 0;
    static final int VALUES = 1;

    private final ByteBuffer memory;
    private final FloatBuffer data;
    private final int layers;
    private final int capacity;
    private final int heads;
    private final int headDim;
    private final int rowFloats;

    /**
     * @param memory   at least {@link #bytes} bytes from its position (a view of them is kept)
     * @param layers   local layers
     * @param capacity positions
     * @param heads    local KV heads
     * @param headDim  floats of one head of one position
     */
    KvCache(ByteBuffer memory, int layers, int capacity, int heads, int headDim) {
        long need = bytes(layers, capacity, heads * headDim);
        if (memory.remaining() < need) {
            throw new IllegalArgumentException("a KV cache of " + layers + " layers x " + capacity + " positions x "
                    + heads + " x " + headDim + " floats needs " + need + " bytes, the buffer has " + memory.remaining());
        }
        this.memory = memory.slice().order(ByteOrder.LITTLE_ENDIAN).limit((int) need).slice().order(ByteOrder.LITTLE_ENDIAN);
        this.data = this.memory.asFloatBuffer();
        this.layers = layers;
        this.capacity = capacity;
        this.heads = heads;
        this.headDim = headDim;
        this.rowFloats = heads * headDim;
    }

    /** A cache over new direct memory. */
    static KvCache allocate(ShardPlan plan, int capacity) {
        long bytes = bytes(plan.localLayers(), capacity, plan.kvRowFloats());
        return new KvCache(ByteBuffer.allocateDirect((int) bytes), plan.localLayers(), capacity, plan.localKvHeads(),
                plan.config().headDim());
    }

    /** A cache of {@code plan}'s shape over {@code memory}. */
    static KvCache over(ByteBuffer memory, ShardPlan plan, int capacity) {
        return new KvCache(memory, plan.localLayers(), capacity, plan.localKvHeads(), plan.config().headDim());
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

    /** The cache's bytes (a view; position 0 is the cache's first byte). */
    ByteBuffer memory() {
        return memory.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    }

    int capacity() {
        return capacity;
    }

    int layers() {
        return layers;
    }

    int heads() {
        return heads;
    }

    int headDim() {
        return headDim;
    }

    int rowFloats() {
        return rowFloats;
    }

    /** Bytes of {@code n} positions of one head of one plane. */
    long headRowBytes(int n) {
        return (long) n * headDim * Float.BYTES;
    }

    /** Byte offset of {@code position} of {@code head} (local) of {@code plane} of {@code layer} (local). */
    long byteOffset(int layer, int plane, int head, int position) {
        return index(layer, plane, head, position) * (long) Float.BYTES;
    }

    private int index(int layer, int plane, int head, int position) {
        if (layer < 0 || layer >= layers || (plane != KEYS && plane != VALUES) || head < 0 || head >= heads || position < 0
                || position > capacity) {
            throw new IndexOutOfBoundsException("layer " + layer + " plane " + plane + " head " + head + " position " + position
                    + " of a cache of " + layers + " layers x " + heads + " heads x " + capacity + " positions");
        }
        return (((layer * 2 + plane) * heads + head) * capacity + position) * headDim;
    }

    /** Stores one position's row of {@code plane} (every local head, {@code heads x headDim}) from {@code src[srcOffset..]}. */
    void put(int layer, int plane, int position, float[] src, int srcOffset) {
        if (position >= capacity) {
            throw new IllegalStateException("position " + position + " is beyond the KV cache's " + capacity + " positions");
        }
        for (int h = 0; h < heads; h++) {
            data.put(index(layer, plane, h, position), src, srcOffset + h * headDim, headDim);
        }
    }

    /** Copies positions {@code [0, count)} of {@code plane} into {@code dst}, position-major ({@code count x rowFloats}). */
    void read(int layer, int plane, int count, float[] dst) {
        if (heads == 1) {
            data.get(index(layer, plane, 0, 0), dst, 0, count * headDim);
            return;
        }
        for (int h = 0; h < heads; h++) {
            int base = index(layer, plane, h, 0);
            for (int j = 0; j < count; j++) {
                data.get(base + j * headDim, dst, j * rowFloats + h * headDim, headDim);
            }
        }
    }
}
