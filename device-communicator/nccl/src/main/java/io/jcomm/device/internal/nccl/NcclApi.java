package io.jcomm.device.internal.nccl;

/**
 * The thin seam between the Java logic of the NCCL communicator and the native NCCL and CUDA runtime
 * calls it makes. Every method maps to one C call and returns its result code unchanged
 * ({@code ncclResult_t} for {@code nccl*}, {@code cudaError_t} for {@code cuda*}); outputs go into
 * the array arguments. Device pointers, streams and events are raw addresses ({@code 0} is the
 * default stream).
 *
 * <p>{@link JavaCppNcclApi} is the real implementation (JavaCPP's {@code org.bytedeco.cuda}); tests
 * use a fake that runs the collectives on host memory with threads as ranks. Keeping all logic
 * (argument and dtype checks, group bracketing, error and abort paths, id exchange) on the Java
 * side of this seam is what makes it testable without a GPU.
 *
 * <p>Like the C API, the calls are thread-compatible: the current device and the group depth are
 * per thread.
 */
public interface NcclApi {

    // ---- NCCL, global ----

    /** {@code ncclGetVersion}: {@code out[0] = major*10000 + minor*100 + patch}. */
    int getVersion(int[] out);

    /** {@code ncclGetUniqueId} into {@code out} ({@link NcclConstants#UNIQUE_ID_BYTES} bytes). */
    int getUniqueId(byte[] out);

    /** {@code ncclGetErrorString}. */
    String getErrorString(int result);

    int groupStart();

    int groupEnd();

    /**
     * {@code ncclCommInitRank} on the calling thread's current device; {@code out[0]} receives the
     * communicator. Blocks until every rank joined.
     */
    int commInitRank(NcclComm[] out, int nranks, byte[] uniqueId, int rank);

    // ---- CUDA runtime ----

    int cudaGetDeviceCount(int[] out);

    int cudaSetDevice(int device);

    /** The calling thread's current device into {@code out[0]}. */
    int cudaGetDevice(int[] out);

    int cudaDriverGetVersion(int[] out);

    String cudaGetErrorString(int error);

    /** {@code cudaSuccess} when the stream is idle, {@code cudaErrorNotReady} while work is pending. */
    int cudaStreamQuery(long stream);

    /** {@code out[0]} receives a {@code cudaStreamCaptureStatus}. */
    int cudaStreamIsCapturing(long stream, int[] out);

    /** Device-to-device (or any, with unified addressing) asynchronous copy. */
    int cudaMemcpyAsync(long dst, long src, long bytes, long stream);

    /**
     * A synchronous copy between device memory at {@code device} and the remaining bytes of the direct
     * host buffer {@code host} ({@code cudaMemcpy}), on the calling thread's current device; does not move
     * the buffer's position.
     */
    int cudaMemcpyHost(long device, java.nio.ByteBuffer host, boolean toDevice);

    int cudaMemcpy2DAsync(long dst, long dpitch, long src, long spitch, long width, long height, long stream);

    /** Stream-ordered allocation (capturable); {@code out[0]} receives the address. */
    int cudaMallocAsync(long[] out, long bytes, long stream);

    int cudaFreeAsync(long ptr, long stream);

    /** An event without timing on the current device; {@code out[0]} receives it. */
    int cudaEventCreate(long[] out);

    int cudaEventRecord(long event, long stream);

    /** {@code cudaSuccess} once the recorded work completed, {@code cudaErrorNotReady} before. */
    int cudaEventQuery(long event);

    int cudaEventDestroy(long event);

    /**
     * One NCCL communicator. The data-path methods are called by one thread at a time;
     * {@link #getAsyncError} and {@link #abort} may be called from the watchdog thread concurrently.
     */
    interface NcclComm {

        int allReduce(long send, long recv, long count, int datatype, int op, long stream);

        /** {@code count} is the per-rank element count. */
        int allGather(long send, long recv, long count, int datatype, long stream);

        /** {@code recvCount} is the per-rank (output) element count. */
        int reduceScatter(long send, long recv, long recvCount, int datatype, int op, long stream);

        int broadcast(long send, long recv, long count, int datatype, int root, long stream);

        int send(long buf, long count, int datatype, int peer, long stream);

        int recv(long buf, long count, int datatype, int peer, long stream);

        /** {@code ncclCommGetAsyncError}: {@code out[0]} receives the pending asynchronous error. */
        int getAsyncError(int[] out);

        /** {@code ncclGetLastError} for this communicator (may be empty). */
        String getLastError();

        /** {@code ncclCommFinalize}: flushes outstanding work (may block on dead peers). */
        int finalizeComm();

        /** {@code ncclCommDestroy}. */
        int destroy();

        /** {@code ncclCommAbort}: frees the communicator, aborting in-flight operations. */
        int abort();

        /**
         * {@code ncclCommShrink(comm, excludeRanks, n, &out[0], NULL, flags)}: a communicator of the ranks
         * not in {@code excludeRanks}; blocks until every one of them took part. Only on a library of
         * {@link NcclConstants#SHRINK_MIN_VERSION_CODE} or later (an older one lacks the symbol). This
         * communicator stays to be aborted or destroyed.
         */
        int shrink(int[] excludeRanks, NcclComm[] out, int flags);
    }
}
