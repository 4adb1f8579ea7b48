package io.jcomm.device.internal.nccl;

import java.nio.file.Path;
import org.bytedeco.cuda.cudart.CUevent_st;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.global.cudart;
import org.bytedeco.cuda.global.nccl;
import org.bytedeco.cuda.nccl.ncclComm;
import org.bytedeco.cuda.nccl.ncclConfig_t;
import org.bytedeco.cuda.nccl.ncclUniqueId;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Loader;
import org.bytedeco.javacpp.Pointer;

/**
 * {@link NcclApi} over JavaCPP's {@code org.bytedeco.cuda} bindings (NCCL 2.29, CUDA 13.1).
 *
 * <p><b>Only instantiate after {@link NcclProbe} reported the libraries available</b>: the first
 * touch of {@code org.bytedeco.cuda.global.nccl} loads the native libraries, and if that fails the
 * class stays broken for the life of the JVM.
 *
 * <p>Raw addresses are passed through reusable {@link Pointer} subclasses whose address field is
 * set per call (per thread for the global calls, per communicator under its lock for the data
 * path), so that a call allocates nothing.
 */
public final class JavaCppNcclApi implements NcclApi {

    /** A pointer whose address is set before each call. */
    static final class Ptr extends Pointer {
        Ptr() {
            super((Pointer) null);
        }

        Ptr at(long a) {
            address = a;
            return this;
        }
    }

    static final class StreamPtr extends CUstream_st {
        StreamPtr() {
            super((Pointer) null);
        }

        StreamPtr at(long a) {
            address = a;
            return this;
        }
    }

    static final class EventPtr extends CUevent_st {
        EventPtr() {
            super((Pointer) null);
        }

        EventPtr at(long a) {
            address = a;
            return this;
        }
    }

    /** Per-thread scratch pointers for the global calls. */
    private static final class Scratch {
        final Ptr a = new Ptr();
        final Ptr b = new Ptr();
        final StreamPtr stream = new StreamPtr();
        final EventPtr event = new EventPtr();
    }

    private final ThreadLocal<Scratch> scratch = ThreadLocal.withInitial(Scratch::new);

    private JavaCppNcclApi() {
    }

    /**
     * Loads the given driver, runtime and NCCL files (in that order, so that the JNI libraries'
     * dependencies resolve to exactly these files), then the JavaCPP bindings. Called by
     * {@link NcclProbe} only after its file and version checks passed.
     */
    static NcclApi load(Path libcuda, Path libcudart, Path libnccl) {
        System.load(libcuda.toAbsolutePath().toString());
        System.load(libcudart.toAbsolutePath().toString());
        System.load(libnccl.toAbsolutePath().toString());
        Loader.load(cudart.class);
        Loader.load(nccl.class);
        return new JavaCppNcclApi();
    }

    @Override
    public int getVersion(int[] out) {
        return nccl.ncclGetVersion(out);
    }

    @Override
    public int getUniqueId(byte[] out) {
        try (ncclUniqueId id = new ncclUniqueId()) {
            int r = nccl.ncclGetUniqueId(id);
            if (r == NcclConstants.SUCCESS) {
                id.internal().get(out, 0, NcclConstants.UNIQUE_ID_BYTES);
            }
            return r;
        }
    }

    @Override
    public String getErrorString(int result) {
        return string(nccl.ncclGetErrorString(result));
    }

    @Override
    public int groupStart() {
        return nccl.ncclGroupStart();
    }

    @Override
    public int groupEnd() {
        return nccl.ncclGroupEnd();
    }

    @Override
    public int commInitRank(NcclComm[] out, int nranks, byte[] uniqueId, int rank) {
        try (ncclUniqueId id = new ncclUniqueId()) {
            id.internal().put(uniqueId, 0, NcclConstants.UNIQUE_ID_BYTES);
            ncclComm comm = new ncclComm();
            int r = nccl.ncclCommInitRank(comm, nranks, id, rank);
            if (r == NcclConstants.SUCCESS) {
                out[0] = new Comm(comm);
            }
            return r;
        }
    }

    @Override
    public int cudaGetDeviceCount(int[] out) {
        return cudart.cudaGetDeviceCount(out);
    }

    @Override
    public int cudaSetDevice(int device) {
        return cudart.cudaSetDevice(device);
    }

    @Override
    public int cudaGetDevice(int[] out) {
        return cudart.cudaGetDevice(out);
    }

    @Override
    public int cudaDriverGetVersion(int[] out) {
        return cudart.cudaDriverGetVersion(out);
    }

    @Override
    public String cudaGetErrorString(int error) {
        return string(cudart.cudaGetErrorString(error));
    }

    @Override
    public int cudaStreamQuery(long stream) {
        return cudart.cudaStreamQuery(scratch.get().stream.at(stream));
    }

    @Override
    public int cudaStreamIsCapturing(long stream, int[] out) {
        return cudart.cudaStreamIsCapturing(scratch.get().stream.at(stream), out);
    }

    @Override
    public int cudaMemcpyAsync(long dst, long src, long bytes, long stream) {
        Scratch s = scratch.get();
        return cudart.cudaMemcpyAsync(s.a.at(dst), s.b.at(src), bytes, cudart.cudaMemcpyDefault, s.stream.at(stream));
    }

    @Override
    public int cudaMemcpyHost(long device, java.nio.ByteBuffer host, boolean toDevice) {
        Scratch s = scratch.get();
        org.bytedeco.javacpp.BytePointer h = new org.bytedeco.javacpp.BytePointer(host); // at the buffer's position
        try {
            return toDevice ? cudart.cudaMemcpy(s.a.at(device), h, host.remaining(), cudart.cudaMemcpyHostToDevice)
                    : cudart.cudaMemcpy(h, s.a.at(device), host.remaining(), cudart.cudaMemcpyDeviceToHost);
        } finally {
            h.deallocate(false);
        }
    }

    @Override
    public int cudaMemcpy2DAsync(long dst, long dpitch, long src, long spitch, long width, long height, long stream) {
        Scratch s = scratch.get();
        return cudart.cudaMemcpy2DAsync(s.a.at(dst), dpitch, s.b.at(src), spitch, width, height,
                cudart.cudaMemcpyDefault, s.stream.at(stream));
    }

    @Override
    public int cudaMallocAsync(long[] out, long bytes, long stream) {
        Scratch s = scratch.get();
        Ptr p = s.a.at(0L);
        int r = cudart.cudaMallocAsync(p, bytes, s.stream.at(stream));
        out[0] = p.address();
        return r;
    }

    @Override
    public int cudaFreeAsync(long ptr, long stream) {
        Scratch s = scratch.get();
        return cudart.cudaFreeAsync(s.a.at(ptr), s.stream.at(stream));
    }

    @Override
    public int cudaEventCreate(long[] out) {
        EventPtr e = scratch.get().event.at(0L);
        int r = cudart.cudaEventCreateWithFlags(e, cudart.cudaEventDisableTiming);
        out[0] = e.address();
        return r;
    }

    @Override
    public int cudaEventRecord(long event, long stream) {
        Scratch s = scratch.get();
        return cudart.cudaEventRecord(s.event.at(event), s.stream.at(stream));
    }

    @Override
    public int cudaEventQuery(long event) {
        return cudart.cudaEventQuery(scratch.get().event.at(event));
    }

    @Override
    public int cudaEventDestroy(long event) {
        return cudart.cudaEventDestroy(scratch.get().event.at(event));
    }

    private static String string(BytePointer p) {
        return p == null || p.isNull() ? "" : p.getString();
    }

    /** One {@code ncclComm_t}. The data-path calls share scratch pointers: the caller serialises them (NcclCommunicator's operation lock). */
    private static final class Comm implements NcclComm {
        private final ncclComm comm;
        private final Ptr send = new Ptr();
        private final Ptr recv = new Ptr();
        private final StreamPtr stream = new StreamPtr();

        Comm(ncclComm comm) {
            this.comm = comm;
        }

        @Override
        public int allReduce(long s, long r, long count, int datatype, int op, long st) {
            return nccl.ncclAllReduce(send.at(s), recv.at(r), count, datatype, op, comm, stream.at(st));
        }

        @Override
        public int allGather(long s, long r, long count, int datatype, long st) {
            return nccl.ncclAllGather(send.at(s), recv.at(r), count, datatype, comm, stream.at(st));
        }

        @Override
        public int reduceScatter(long s, long r, long recvCount, int datatype, int op, long st) {
            return nccl.ncclReduceScatter(send.at(s), recv.at(r), recvCount, datatype, op, comm, stream.at(st));
        }

        @Override
        public int broadcast(long s, long r, long count, int datatype, int root, long st) {
            return nccl.ncclBroadcast(send.at(s), recv.at(r), count, datatype, root, comm, stream.at(st));
        }

        @Override
        public int send(long buf, long count, int datatype, int peer, long st) {
            return nccl.ncclSend(send.at(buf), count, datatype, peer, comm, stream.at(st));
        }

        @Override
        public int recv(long buf, long count, int datatype, int peer, long st) {
            return nccl.ncclRecv(recv.at(buf), count, datatype, peer, comm, stream.at(st));
        }

        @Override
        public int getAsyncError(int[] out) {
            return nccl.ncclCommGetAsyncError(comm, out);
        }

        @Override
        public String getLastError() {
            return string(nccl.ncclGetLastError(comm));
        }

        @Override
        public int finalizeComm() {
            return nccl.ncclCommFinalize(comm);
        }

        @Override
        public int destroy() {
            return nccl.ncclCommDestroy(comm);
        }

        @Override
        public int abort() {
            return nccl.ncclCommAbort(comm);
        }

        @Override
        public int shrink(int[] excludeRanks, NcclComm[] out, int flags) {
            ncclComm shrunk = new ncclComm();
            int r = nccl.ncclCommShrink(comm, excludeRanks, excludeRanks.length, shrunk, (ncclConfig_t) null, flags);
            if (r == NcclConstants.SUCCESS) {
                out[0] = new Comm(shrunk);
            }
            return r;
        }
    }
}
