package io.jcomm.transfer;

import io.jcomm.api.Availability;
import io.jcomm.api.BackendException;
import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.OpContext;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.api.device.DeviceCommunicatorProvider;
import io.jcomm.api.device.DeviceMemory;
import java.nio.ByteBuffer;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A device provider for tests (device type {@value #TYPE}) whose "device memory" is a direct buffer
 * held as the tensor's owner: it has no communicator, only the {@link DeviceMemory} copies, which count
 * their calls and can be made to fail.
 */
public final class FakeDeviceProvider implements DeviceCommunicatorProvider {

    static final String TYPE = "fakedev";
    static final AtomicInteger COPIES = new AtomicInteger();
    /** The next this many copies fail. */
    static final AtomicInteger FAIL_NEXT = new AtomicInteger();
    private static final AtomicLong ADDRESSES = new AtomicLong(0x1000);

    /** A fake device tensor of {@code bytes} bytes; its memory is {@code memory(t)}. */
    static Tensor allocate(int bytes) {
        return Tensor.onDevice(Device.of(TYPE, 0), ADDRESSES.getAndAdd(bytes + 4096L), DType.U8, new long[] {bytes},
                ByteBuffer.allocateDirect(bytes));
    }

    /** The bytes of a fake device tensor. */
    static ByteBuffer memory(Tensor t) {
        return ((ByteBuffer) t.owner()).duplicate().clear();
    }

    private static final DeviceMemory MEMORY = new DeviceMemory() {
        @Override
        public void copyToHost(Tensor device, long offset, ByteBuffer dst) {
            DeviceMemory.checkRange(device, offset, dst);
            count(device, "copyToHost");
            ByteBuffer m = memory(device);
            m.position((int) offset).limit((int) offset + dst.remaining());
            dst.put(m);
        }

        @Override
        public void copyFromHost(ByteBuffer src, Tensor device, long offset) {
            DeviceMemory.checkRange(device, offset, src);
            count(device, "copyFromHost");
            ByteBuffer m = memory(device);
            m.position((int) offset);
            m.put(src);
        }

        private void count(Tensor device, String op) {
            COPIES.incrementAndGet();
            if (FAIL_NEXT.getAndUpdate(n -> Math.max(0, n - 1)) > 0) {
                throw new BackendException(OpContext.of("fakedev", -1, op), "injected device copy failure on " + device.device());
            }
        }
    };

    @Override
    public String name() {
        return TYPE;
    }

    @Override
    public String deviceType() {
        return TYPE;
    }

    @Override
    public int priority() {
        return 1;
    }

    @Override
    public Availability availability() {
        return Availability.available("a test fake");
    }

    @Override
    public DeviceCommunicator create(DeviceCommunicatorContext context) {
        throw new BackendException(OpContext.of(context.cpuGroup().name(), context.cpuGroup().rank(), "create"),
                "the fake device provider has no communicator");
    }

    @Override
    public Optional<DeviceMemory> deviceMemory() {
        return Optional.of(MEMORY);
    }
}
