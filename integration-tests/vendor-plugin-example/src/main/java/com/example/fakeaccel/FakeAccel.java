package com.example.fakeaccel;

import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.Tensor;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Map;
import java.util.TreeMap;

/**
 * The "vendor runtime" of the invented {@code fakeaccel} accelerator: what {@code libascendcl} is
 * to an Ascend NPU or {@code libcudart} to a GPU. Device memory is host memory handed out at
 * synthetic device addresses that Java code cannot dereference, so the communicator must go
 * through this runtime to move bytes, as it would through a real driver.
 *
 * <p>Like a driver, the runtime is per process ({@link #runtime()}); it is thread safe.
 */
public final class FakeAccel {

    /** The device type string of this accelerator's tensors. */
    public static final String DEVICE_TYPE = "fakeaccel";

    /** System property: number of visible devices (default 8); 0 makes the provider unavailable. */
    public static final String DEVICES_PROP = "fakeaccel.devices";

    private static final FakeAccel RUNTIME = new FakeAccel(Integer.getInteger(DEVICES_PROP, 8));

    private final int deviceCount;
    private final TreeMap<Long, ByteBuffer> heap = new TreeMap<>();
    private long next = 0x00A0_0000_0000L;

    private FakeAccel(int deviceCount) {
        this.deviceCount = deviceCount;
    }

    /** This process's runtime. */
    public static FakeAccel runtime() {
        return RUNTIME;
    }

    public int deviceCount() {
        return deviceCount;
    }

    public static Device device(int index) {
        return new Device(DEVICE_TYPE, index);
    }

    /** Allocates zeroed device memory for a tensor on {@code fakeaccel:index}. */
    public Tensor allocate(int index, DType dtype, long... shape) {
        if (index < 0 || index >= deviceCount) {
            throw new IllegalArgumentException("no fakeaccel device " + index);
        }
        long bytes = dtype.byteSize();
        for (long s : shape) {
            bytes = Math.multiplyExact(bytes, s);
        }
        return Tensor.onDevice(device(index), malloc(bytes), dtype, shape, this);
    }

    /** Device memory of {@code bytes} bytes; never freed in this example. */
    public synchronized long malloc(long bytes) {
        if (bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("allocation of " + bytes + " bytes is too large for fakeaccel");
        }
        long addr = next;
        next += ((Math.max(1, bytes) + 255) / 256) * 256;
        heap.put(addr, ByteBuffer.allocateDirect((int) Math.max(1, bytes)).order(ByteOrder.LITTLE_ENDIAN));
        return addr;
    }

    private synchronized ByteBuffer view(long addr, long bytes) {
        Map.Entry<Long, ByteBuffer> e = heap.floorEntry(addr);
        long off = e == null ? -1 : addr - e.getKey();
        if (e == null || off + bytes > e.getValue().capacity()) {
            throw new IllegalArgumentException(String.format("fakeaccel: invalid device range 0x%x + %d", addr, bytes));
        }
        return e.getValue().slice((int) off, (int) bytes).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** Host to device: copies {@code src}'s remaining bytes to device address {@code dst}. */
    public void copyToDevice(long dst, ByteBuffer src) {
        view(dst, src.remaining()).put(src.duplicate());
    }

    /** Device to host: fills {@code dst}'s remaining bytes from device address {@code src}. */
    public void copyToHost(ByteBuffer dst, long src) {
        dst.duplicate().put(view(src, dst.remaining()));
    }

    /** Device to device, strided ({@code cudaMemcpy2D}-style): {@code height} rows of {@code width} bytes. */
    public void copy2D(long dst, long dpitch, long src, long spitch, long width, long height) {
        for (long r = 0; r < height; r++) {
            view(dst + r * dpitch, width).put(view(src + r * spitch, width));
        }
    }
}
