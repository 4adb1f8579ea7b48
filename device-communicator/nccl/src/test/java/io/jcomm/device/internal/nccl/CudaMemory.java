package io.jcomm.device.internal.nccl;

import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.device.testkit.DeviceMemory;
import java.util.ArrayList;
import java.util.List;
import org.bytedeco.cuda.cudart.CUstream_st;
import org.bytedeco.cuda.global.cudart;
import org.bytedeco.javacpp.BytePointer;
import org.bytedeco.javacpp.Pointer;

/**
 * Real CUDA device memory for the conformance kit on a GPU host (scripts/gpu-check.sh and the
 * multi-GPU integration test), through JavaCPP's cudart. Only use it after {@link NcclProbe}
 * reported NCCL available (that loads the bindings safely). One instance per rank thread; it owns
 * one non-default stream and frees everything on {@link #close()}.
 */
public final class CudaMemory implements DeviceMemory, AutoCloseable {

    private final int index;
    private final CUstream_st stream = new CUstream_st();
    private final List<Pointer> allocations = new ArrayList<>();

    public CudaMemory(int index) {
        this.index = index;
        check(cudart.cudaSetDevice(index), "cudaSetDevice");
        check(cudart.cudaStreamCreate(stream), "cudaStreamCreate");
    }

    private static void check(int r, String call) {
        if (r != cudart.cudaSuccess) {
            throw new IllegalStateException(call + " failed: " + cudart.cudaGetErrorString(r).getString() + " (" + r + ")");
        }
    }

    @Override
    public Device device() {
        return Device.cuda(index);
    }

    @Override
    public StreamHandle stream() {
        return new StreamHandle(device(), stream.address());
    }

    @Override
    public Tensor allocate(DType dtype, long... shape) {
        long bytes = dtype.byteSize();
        for (long s : shape) {
            bytes *= s;
        }
        check(cudart.cudaSetDevice(index), "cudaSetDevice");
        Pointer p = new Pointer();
        check(cudart.cudaMalloc(p, Math.max(1, bytes)), "cudaMalloc");
        check(cudart.cudaMemset(p, 0, Math.max(1, bytes)), "cudaMemset");
        allocations.add(p);
        return Tensor.onDevice(device(), p.address(), dtype, shape, p);
    }

    @Override
    public void write(Tensor target, Tensor source) {
        if (source.byteSize() == 0) {
            return;
        }
        check(cudart.cudaSetDevice(index), "cudaSetDevice");
        Pointer dst = new Pointer() {
            {
                address = target.address();
            }
        };
        check(cudart.cudaMemcpy(dst, new BytePointer(source.buffer()), source.byteSize(), cudart.cudaMemcpyHostToDevice),
                "cudaMemcpy H2D");
    }

    @Override
    public Tensor read(Tensor t) {
        Tensor h = Tensor.allocate(t.dtype(), t.shape());
        if (t.byteSize() == 0) {
            return h;
        }
        check(cudart.cudaSetDevice(index), "cudaSetDevice");
        check(cudart.cudaStreamSynchronize(stream), "cudaStreamSynchronize");
        Pointer src = new Pointer() {
            {
                address = t.address();
            }
        };
        check(cudart.cudaMemcpy(new BytePointer(h.buffer()), src, t.byteSize(), cudart.cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
        return h;
    }

    @Override
    public void close() {
        cudart.cudaSetDevice(index);
        cudart.cudaStreamSynchronize(stream);
        for (Pointer p : allocations) {
            cudart.cudaFree(p);
        }
        allocations.clear();
        cudart.cudaStreamDestroy(stream);
    }
}
