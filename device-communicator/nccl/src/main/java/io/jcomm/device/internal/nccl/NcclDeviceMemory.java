package io.jcomm.device.internal.nccl;

import io.jcomm.api.BackendException;
import io.jcomm.api.OpContext;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.DeviceMemory;
import java.nio.ByteBuffer;

/**
 * Copies between CUDA device memory and direct host buffers with {@code cudaMemcpy} on the tensor's
 * device (what {@link io.jcomm.device.NcclDeviceCommunicatorProvider#deviceMemory()} offers). Host
 * buffers are pageable, so each copy is synchronous; a CUDA error is a {@link BackendException} with
 * CUDA's own error string.
 */
public final class NcclDeviceMemory implements DeviceMemory {

    private final NcclApi api;

    public NcclDeviceMemory(NcclApi api) {
        this.api = api;
    }

    @Override
    public void copyToHost(Tensor device, long offset, ByteBuffer dst) {
        copy(device, offset, dst, false);
    }

    @Override
    public void copyFromHost(ByteBuffer src, Tensor device, long offset) {
        copy(device, offset, src, true);
    }

    private void copy(Tensor device, long offset, ByteBuffer host, boolean toDevice) {
        DeviceMemory.checkRange(device, offset, host);
        if (!"cuda".equals(device.device().type())) {
            throw new IllegalArgumentException("cuda memory copies move cuda tensors, not " + device);
        }
        if (!host.hasRemaining()) {
            return;
        }
        String op = toDevice ? "copyFromHost" : "copyToHost";
        int r = api.cudaSetDevice(device.device().index());
        if (r == 0) {
            r = api.cudaMemcpyHost(device.address() + offset, host, toDevice);
        }
        if (r != 0) {
            throw new BackendException(OpContext.of(device.device().toString(), -1, op), "cudaMemcpy of " + host.remaining()
                    + " bytes " + (toDevice ? "to " : "from ") + device.device() + " failed: " + api.cudaGetErrorString(r)
                    + " (" + r + ")");
        }
        host.position(host.limit());
    }
}
