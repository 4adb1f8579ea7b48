package io.jcomm.cpu.gloo.internal;

import io.jcomm.cpu.internal.OpCodes;
import java.lang.annotation.Native;
import java.nio.ByteBuffer;

/**
 * The JNI entry points of {@code libjcommgloo.so} (source: {@code cpu-group/gloo/src/main/native/gloo_jni.cpp}).
 *
 * <p>Contract for callers (all enforced by {@link io.jcomm.cpu.gloo.GlooBackend}): the library was
 * loaded by {@link GlooLibrary}; handles come from {@link #create} and are used only while a
 * {@link NativeHandle} lease is held; buffers are direct and at least as large as the sizes
 * passed; ranks are in range; at most one operation runs on a handle at a time ({@link #abort}
 * may run concurrently). Every failure is thrown as a {@link GlooNativeException}, except a Java
 * exception raised by the {@link GlooStoreBridge} during {@link #connect}, which is re-thrown
 * unchanged. Sizes of collectives are in bytes unless named {@code numel}; {@code dtype} and
 * {@code op} are {@link io.jcomm.api.DType#code()} and {@link io.jcomm.api.ReduceOp#code()};
 * {@code tag} is the unsigned 32-bit collective tag (or the user's tag for send/recv).
 */
public final class GlooNative {

    // ---- constants the C++ glue takes from this class's JNI header (javac -h emits @Native constants as
    // #define io_jcomm_cpu_gloo_internal_GlooNative_<NAME>), so that Java and C++ share one declaration ----

    /** Failure kinds of {@link GlooNativeException}. */
    @Native static final int KIND_IO = GlooNativeException.KIND_IO;
    @Native static final int KIND_TIMEOUT = GlooNativeException.KIND_TIMEOUT;
    @Native static final int KIND_ENFORCE = GlooNativeException.KIND_ENFORCE;
    @Native static final int KIND_MISMATCH = GlooNativeException.KIND_MISMATCH;
    @Native static final int KIND_CLOSED = GlooNativeException.KIND_CLOSED;
    @Native static final int KIND_OTHER = GlooNativeException.KIND_OTHER;
    @Native static final int KIND_ARGUMENT = GlooNativeException.KIND_ARGUMENT;

    /** Operation codes of the argument check (the same as the tcp backend's: {@link OpCodes}). */
    @Native static final int OP_BARRIER = OpCodes.BARRIER;
    @Native static final int OP_BROADCAST = OpCodes.BROADCAST;
    @Native static final int OP_ALLREDUCE = OpCodes.ALLREDUCE;
    @Native static final int OP_ALLGATHER = OpCodes.ALLGATHER;
    @Native static final int OP_ALLGATHERV = OpCodes.ALLGATHERV;
    @Native static final int OP_GATHER = OpCodes.GATHER;
    @Native static final int OP_SCATTER = OpCodes.SCATTER;
    @Native static final int OP_REDUCESCATTER = OpCodes.REDUCESCATTER;
    @Native static final int OP_ALLTOALL = OpCodes.ALLTOALL;
    @Native static final int OP_ALLTOALLV = OpCodes.ALLTOALLV;

    /**
     * {@link io.jcomm.api.DType#code()} and {@link io.jcomm.api.ReduceOp#code()} of the types and
     * reductions the glue handles (enum fields are not compile-time constants: {@code GlooNativeConstantsTest}
     * checks these against them).
     */
    @Native static final int DT_F16 = 1;
    @Native static final int DT_BF16 = 2;
    @Native static final int DT_F32 = 3;
    @Native static final int DT_F64 = 4;
    @Native static final int DT_I8 = 5;
    @Native static final int DT_U8 = 6;
    @Native static final int DT_I32 = 7;
    @Native static final int DT_I64 = 8;
    @Native static final int DT_BOOL = 9;
    @Native static final int REDOP_SUM = 1;
    @Native static final int REDOP_PROD = 2;
    @Native static final int REDOP_MIN = 3;
    @Native static final int REDOP_MAX = 4;
    @Native static final int REDOP_AVG = 5;

    private GlooNative() {
    }

    /** A description of the linked library. */
    public static native String probe();

    /**
     * Allocates an unconnected communicator with {@code devices} contexts; with {@code torchHalf},
     * F16 reductions run in half precision like PyTorch's gloo (else widened to float).
     */
    public static native long create(int rank, int size, int devices, boolean torchHalf);

    /**
     * Creates tcp device {@code dev} (on {@code iface} if non-null, else {@code hostname}) and
     * connects its full mesh through {@code store} (gloo keys {@code rank_<r>}, {@code <r>}). With
     * {@code goodbye}, a receive for each peer's goodbye is posted (see {@link #abort}). The device's
     * event-loop thread gets nice value {@code loopNice} (0: unchanged).
     */
    public static native void connect(long handle, int dev, String hostname, String iface, GlooStoreBridge store,
                                      long timeoutMillis, boolean goodbye, int loopNice);

    /** The device's description, e.g. {@code [127.0.0.1]:0}. */
    public static native String describe(long handle, int dev);

    /**
     * Shuts down every connection of the communicator: operations in progress fail (as if every
     * peer had died) and peers see the connections close. With {@code goodbye}, first sends every
     * peer a goodbye (bounded, 200 ms), so that they report a clean close ({@code KIND_CLOSED})
     * rather than a peer failure. Safe while an operation runs.
     */
    public static native void abort(long handle, boolean goodbye);

    /** Frees the communicator. No call may use the handle afterwards. */
    public static native void destroy(long handle);

    public static native void barrier(long handle, int dev, int tag, long timeoutMillis, boolean check);

    public static native void broadcast(long handle, int dev, int tag, long timeoutMillis, boolean check,
                                 ByteBuffer buf, long bytes, int dtype, int root);

    public static native void allReduce(long handle, int dev, int tag, long timeoutMillis, boolean check,
                                 ByteBuffer buf, long numel, int dtype, int op);

    public static native void reduceScatter(long handle, int dev, int tag, long timeoutMillis, boolean check,
                                     ByteBuffer in, ByteBuffer out, long outNumel, int dtype, int op);

    public static native void allGather(long handle, int dev, int tag, long timeoutMillis, boolean check,
                                 ByteBuffer in, ByteBuffer out, long inBytes, int dtype);

    public static native void allGatherV(long handle, int dev, int tag, long timeoutMillis, boolean check,
                                  ByteBuffer in, ByteBuffer out, long[] byteCounts, int dtype);

    /** Equal splits: {@code bytes} in and out, a multiple of the group size. */
    public static native void allToAll(long handle, int dev, int tag, long timeoutMillis, boolean check,
                                ByteBuffer in, ByteBuffer out, long bytes, int dtype);

    /**
     * Per-rank byte counts (one per rank each). With {@code check}, every rank verifies every pair's
     * counts (groups of up to 64 ranks) and all fail with a mismatch alike.
     */
    public static native void allToAllV(long handle, int dev, int tag, long timeoutMillis, boolean check,
                                 ByteBuffer in, ByteBuffer out, long[] inByteCounts, long[] outByteCounts,
                                 int dtype);

    /** {@code out} is null except on {@code root}. */
    public static native void gather(long handle, int dev, int tag, long timeoutMillis, boolean check,
                              ByteBuffer in, ByteBuffer out, long inBytes, int dtype, int root);

    /** {@code in} is null except on {@code root}. */
    public static native void scatter(long handle, int dev, int tag, long timeoutMillis, boolean check,
                               ByteBuffer in, ByteBuffer out, long outBytes, int dtype, int root);

    /**
     * Copies the payload, posts it to {@code dst} and returns: a background thread waits until the
     * receiver takes it (by the deadline). A failure is reported by the next call of any kind.
     */
    public static native void send(long handle, int dev, int tag, long timeoutMillis, boolean check,
                            ByteBuffer buf, long bytes, int dst);

    /**
     * Waits up to {@code timeoutMillis} until every buffered send was received.
     *
     * @return true if none is left and none failed
     */
    public static native boolean flush(long handle, long timeoutMillis);

    public static native void recv(long handle, int dev, int tag, long timeoutMillis, boolean check,
                            ByteBuffer buf, long bytes, int src);
}
