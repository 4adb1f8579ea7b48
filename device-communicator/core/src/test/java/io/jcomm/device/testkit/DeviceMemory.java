package io.jcomm.device.testkit;

import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;

/**
 * How the conformance kit allocates, fills and reads tensors on a communicator's device: host memory
 * for {@code cpu}, a fake device heap for the fake NCCL, a vendor's own memory API for a vendor
 * provider. Used by one rank's thread.
 */
public interface DeviceMemory {

    Device device();

    /** The stream the kit passes to every operation. */
    StreamHandle stream();

    /** A zero-filled tensor on {@link #device()}. */
    Tensor allocate(DType dtype, long... shape);

    /** Copies the bytes of host tensor {@code source} into device tensor {@code target} (same byte size). */
    void write(Tensor target, Tensor source);

    /** A host copy of {@code deviceTensor}'s contents (the caller synchronised the stream first). */
    Tensor read(Tensor deviceTensor);

    /** A device tensor holding a copy of host tensor {@code source}. */
    default Tensor upload(Tensor source) {
        Tensor t = allocate(source.dtype(), source.shape());
        write(t, source);
        return t;
    }

    /** Host memory: tensors are host tensors, the stream is {@link StreamHandle#HOST}. */
    static DeviceMemory host() {
        return new DeviceMemory() {
            @Override
            public Device device() {
                return Device.CPU;
            }

            @Override
            public StreamHandle stream() {
                return StreamHandle.HOST;
            }

            @Override
            public Tensor allocate(DType dtype, long... shape) {
                return Tensor.allocate(dtype, shape);
            }

            @Override
            public void write(Tensor target, Tensor source) {
                target.copyFrom(source);
            }

            @Override
            public Tensor read(Tensor deviceTensor) {
                Tensor t = Tensor.allocate(deviceTensor.dtype(), deviceTensor.shape());
                t.copyFrom(deviceTensor);
                return t;
            }
        };
    }
}
