package com.example.fakeaccel;

import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.device.testkit.DeviceMemory;

/** The conformance kit's view of fakeaccel device memory, through the vendor runtime. */
public final class FakeAccelMemory implements DeviceMemory {

    private final int index;
    private final FakeAccel rt = FakeAccel.runtime();

    public FakeAccelMemory(int index) {
        this.index = index;
    }

    @Override
    public Device device() {
        return FakeAccel.device(index);
    }

    @Override
    public StreamHandle stream() {
        return new StreamHandle(device(), 1L);
    }

    @Override
    public Tensor allocate(DType dtype, long... shape) {
        return rt.allocate(index, dtype, shape);
    }

    @Override
    public void write(Tensor target, Tensor source) {
        rt.copyToDevice(target.address(), source.buffer());
    }

    @Override
    public Tensor read(Tensor t) {
        Tensor h = Tensor.allocate(t.dtype(), t.shape());
        rt.copyToHost(h.buffer(), t.address());
        return h;
    }
}
