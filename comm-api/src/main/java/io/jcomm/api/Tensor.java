package io.jcomm.api;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Objects;

/**
 * A dense, contiguous, row-major tensor: a dtype, a shape, a device and memory.
 *
 * <p>Host ({@code cpu}) tensors live off-heap in a direct {@link ByteBuffer} in little-endian order
 * (the byte order PyTorch, Gloo and NCCL use on every supported platform). They can wrap existing
 * direct memory without copying. A host tensor holds at most {@code Integer.MAX_VALUE} bytes.
 *
 * <p>Device tensors wrap a device address owned elsewhere (by the caller's allocator); this class
 * never frees device memory. An optional {@code owner} reference keeps the owning object reachable
 * for as long as the tensor is.
 *
 * <p>Instances are immutable as values (dtype, shape, device, memory region); the <em>contents</em>
 * of the memory are mutable and not synchronised: a tensor must not be modified while a collective
 * that uses it is in flight.
 */
public final class Tensor {

    /** Alignment of memory allocated by {@link #allocate}, in bytes. */
    public static final int ALIGNMENT = 64;

    private final DType dtype;
    private final long[] shape;
    private final long numel;
    private final Device device;
    private final ByteBuffer host; // little-endian, position 0, limit = byteSize; null for device tensors
    private final long address;    // device address; 0 for host tensors
    private final Object owner;

    private Tensor(DType dtype, long[] shape, Device device, ByteBuffer host, long address, Object owner) {
        this.dtype = Objects.requireNonNull(dtype, "dtype");
        this.shape = shape.clone();
        this.numel = checkedNumel(this.shape);
        this.device = Objects.requireNonNull(device, "device");
        this.host = host;
        this.address = address;
        this.owner = owner;
    }

    private static long checkedNumel(long[] shape) {
        long n = 1;
        for (long d : shape) {
            if (d < 0) {
                throw new IllegalArgumentException("negative dimension in shape " + Arrays.toString(shape));
            }
            n = Math.multiplyExact(n, d);
        }
        return n;
    }

    private static int hostBytes(DType dtype, long[] shape) {
        long bytes = Math.multiplyExact(checkedNumel(shape), (long) dtype.byteSize());
        if (bytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("host tensor of " + bytes + " bytes exceeds the 2 GiB limit");
        }
        return (int) bytes;
    }

    /** Allocates a zero-filled host tensor, aligned to {@link #ALIGNMENT} bytes. */
    public static Tensor allocate(DType dtype, long... shape) {
        int bytes = hostBytes(dtype, shape);
        ByteBuffer raw = ByteBuffer.allocateDirect(bytes + ALIGNMENT);
        int start = (ALIGNMENT - raw.alignmentOffset(0, ALIGNMENT)) % ALIGNMENT;
        return new Tensor(dtype, shape, Device.CPU, raw.slice(start, bytes).order(ByteOrder.LITTLE_ENDIAN), 0L, null);
    }

    /**
     * Wraps the bytes {@code [position, position + numel * elementSize)} of a direct buffer without
     * copying. The buffer's position and limit are not modified.
     *
     * @throws IllegalArgumentException if the buffer is not direct or too small
     */
    public static Tensor wrap(ByteBuffer direct, DType dtype, long... shape) {
        if (!direct.isDirect()) {
            throw new IllegalArgumentException("host tensors must wrap a direct (off-heap) buffer");
        }
        if (direct.isReadOnly()) {
            throw new IllegalArgumentException("cannot wrap a read-only buffer");
        }
        int bytes = hostBytes(dtype, shape);
        if (direct.remaining() < bytes) {
            throw new IllegalArgumentException("buffer has " + direct.remaining() + " bytes, tensor needs " + bytes);
        }
        ByteBuffer view = direct.slice(direct.position(), bytes).order(ByteOrder.LITTLE_ENDIAN);
        return new Tensor(dtype, shape, Device.CPU, view, 0L, null);
    }

    /**
     * Wraps device memory owned elsewhere.
     *
     * @param device  a non-CPU device
     * @param address the device address of element 0
     * @param owner   an object to keep reachable while this tensor is (may be {@code null})
     */
    public static Tensor onDevice(Device device, long address, DType dtype, long[] shape, Object owner) {
        if (device.isCpu()) {
            throw new IllegalArgumentException("use allocate/wrap for host tensors");
        }
        if (address == 0L && checkedNumel(shape) != 0) {
            throw new IllegalArgumentException("null device address for a non-empty tensor");
        }
        return new Tensor(dtype, shape, device, null, address, owner);
    }

    public static Tensor ofFloats(float... values) {
        Tensor t = allocate(DType.F32, values.length);
        t.host.asFloatBuffer().put(values);
        return t;
    }

    public static Tensor ofDoubles(double... values) {
        Tensor t = allocate(DType.F64, values.length);
        t.host.asDoubleBuffer().put(values);
        return t;
    }

    public static Tensor ofInts(int... values) {
        Tensor t = allocate(DType.I32, values.length);
        t.host.asIntBuffer().put(values);
        return t;
    }

    public static Tensor ofLongs(long... values) {
        Tensor t = allocate(DType.I64, values.length);
        t.host.asLongBuffer().put(values);
        return t;
    }

    /** A {@link DType#U8} tensor holding a copy of {@code values}. */
    public static Tensor ofBytes(byte[] values) {
        Tensor t = allocate(DType.U8, values.length);
        t.host.duplicate().put(values);
        return t;
    }

    public DType dtype() {
        return dtype;
    }

    /** A copy of the shape. */
    public long[] shape() {
        return shape.clone();
    }

    public int dim() {
        return shape.length;
    }

    /** Size of dimension {@code d}; negative {@code d} counts from the end. */
    public long size(int d) {
        return shape[normalizeDim(d)];
    }

    /** Maps a possibly negative dimension index to {@code [0, dim())}. */
    public int normalizeDim(int d) {
        int n = shape.length;
        int r = d < 0 ? d + n : d;
        if (r < 0 || r >= n) {
            throw new IllegalArgumentException("dimension " + d + " out of range for shape " + Arrays.toString(shape));
        }
        return r;
    }

    public long numel() {
        return numel;
    }

    public long byteSize() {
        return numel * dtype.byteSize();
    }

    public Device device() {
        return device;
    }

    public boolean isHost() {
        return host != null;
    }

    /**
     * A little-endian view of a host tensor's bytes with position 0 and limit {@link #byteSize()}.
     * Each call returns a new view over the same memory.
     *
     * @throws IllegalStateException for a device tensor
     */
    public ByteBuffer buffer() {
        if (host == null) {
            throw new IllegalStateException("tensor on " + device + " has no host buffer");
        }
        return host.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * The device address of element 0.
     *
     * @throws IllegalStateException for a host tensor (host memory is reached through {@link #buffer()})
     */
    public long address() {
        if (host != null) {
            throw new IllegalStateException("host tensor has no device address; use buffer()");
        }
        return address;
    }

    /** The object that owns device memory, or {@code null}. */
    public Object owner() {
        return owner;
    }

    /** The same memory with another shape of equal element count. */
    public Tensor reshape(long... newShape) {
        if (checkedNumel(newShape) != numel) {
            throw new IllegalArgumentException("cannot reshape " + Arrays.toString(shape) + " to " + Arrays.toString(newShape));
        }
        return new Tensor(dtype, newShape, device, host, address, owner);
    }

    /** A 1-D view of {@code count} elements starting at element {@code start}, sharing memory. */
    public Tensor flatSlice(long start, long count) {
        if (start < 0 || count < 0 || start + count > numel) {
            throw new IndexOutOfBoundsException("slice [" + start + ", " + (start + count) + ") of " + numel + " elements");
        }
        long off = start * dtype.byteSize();
        long len = count * dtype.byteSize();
        if (host != null) {
            ByteBuffer v = host.slice((int) off, (int) len).order(ByteOrder.LITTLE_ENDIAN);
            return new Tensor(dtype, new long[] {count}, device, v, 0L, owner);
        }
        return new Tensor(dtype, new long[] {count}, device, null, address + off, owner);
    }

    /** Rows {@code [start, start + length)} along dimension 0, sharing memory. */
    public Tensor slice0(long start, long length) {
        if (shape.length == 0) {
            throw new IllegalArgumentException("cannot slice a 0-d tensor");
        }
        if (start < 0 || length < 0 || start + length > shape[0]) {
            throw new IndexOutOfBoundsException("rows [" + start + ", " + (start + length) + ") of " + shape[0]);
        }
        long row = numel / Math.max(1, shape[0]);
        long[] s = shape.clone();
        s[0] = length;
        return flatSlice(start * row, length * row).reshape(s);
    }

    // ---- element access (host tensors), for tests, tools and small metadata ----

    private int byteIndex(long i) {
        if (i < 0 || i >= numel) {
            throw new IndexOutOfBoundsException("element " + i + " of " + numel);
        }
        if (host == null) {
            throw new IllegalStateException("element access needs a host tensor, this one is on " + device);
        }
        return (int) (i * dtype.byteSize());
    }

    /** Element {@code i} (flat index) converted to double. */
    public double getDouble(long i) {
        int b = byteIndex(i);
        switch (dtype) {
            case F16: return HalfFloats.f16ToFloat(host.getShort(b));
            case BF16: return HalfFloats.bf16ToFloat(host.getShort(b));
            case F32: return host.getFloat(b);
            case F64: return host.getDouble(b);
            case I8: return host.get(b);
            case U8: return host.get(b) & 0xff;
            case I32: return host.getInt(b);
            case I64: return host.getLong(b);
            case BOOL: return host.get(b) != 0 ? 1 : 0;
            default: throw new AssertionError(dtype);
        }
    }

    /** Element {@code i} (flat index) converted to long (floating types truncate toward zero). */
    public long getLong(long i) {
        int b = byteIndex(i);
        switch (dtype) {
            case I8: return host.get(b);
            case U8: return host.get(b) & 0xff;
            case I32: return host.getInt(b);
            case I64: return host.getLong(b);
            case BOOL: return host.get(b) != 0 ? 1 : 0;
            default: return (long) getDouble(i);
        }
    }

    /** Stores {@code v} converted to this tensor's dtype at flat index {@code i}. */
    public void setDouble(long i, double v) {
        int b = byteIndex(i);
        switch (dtype) {
            case F16: host.putShort(b, HalfFloats.floatToF16((float) v)); break;
            case BF16: host.putShort(b, HalfFloats.floatToBf16((float) v)); break;
            case F32: host.putFloat(b, (float) v); break;
            case F64: host.putDouble(b, v); break;
            case I8: case U8: host.put(b, (byte) (long) v); break;
            case I32: host.putInt(b, (int) (long) v); break;
            case I64: host.putLong(b, (long) v); break;
            case BOOL: host.put(b, (byte) (v != 0 ? 1 : 0)); break;
            default: throw new AssertionError(dtype);
        }
    }

    /** Stores {@code v} converted to this tensor's dtype at flat index {@code i} (exact for I64). */
    public void setLong(long i, long v) {
        int b = byteIndex(i);
        switch (dtype) {
            case I8: case U8: host.put(b, (byte) v); break;
            case I32: host.putInt(b, (int) v); break;
            case I64: host.putLong(b, v); break;
            case BOOL: host.put(b, (byte) (v != 0 ? 1 : 0)); break;
            default: setDouble(i, v);
        }
    }

    /** Sets every element to {@code v}. */
    public void fill(double v) {
        for (long i = 0; i < numel; i++) {
            setDouble(i, v);
        }
    }

    /** Copies all bytes of {@code src} (a host tensor of the same byte size) into this host tensor. */
    public void copyFrom(Tensor src) {
        if (src.byteSize() != byteSize()) {
            throw new IllegalArgumentException("copy of " + src.byteSize() + " bytes into " + byteSize());
        }
        buffer().put(src.buffer());
    }

    /** All elements as doubles (host tensors). */
    public double[] toDoubleArray() {
        double[] out = new double[Math.toIntExact(numel)];
        for (int i = 0; i < out.length; i++) {
            out[i] = getDouble(i);
        }
        return out;
    }

    /** All elements as longs (host tensors). */
    public long[] toLongArray() {
        long[] out = new long[Math.toIntExact(numel)];
        for (int i = 0; i < out.length; i++) {
            out[i] = getLong(i);
        }
        return out;
    }

    /** A copy of the raw bytes (host tensors). */
    public byte[] toByteArray() {
        byte[] out = new byte[Math.toIntExact(byteSize())];
        buffer().get(out);
        return out;
    }

    /** True when both are host tensors with the same dtype, shape and bytes. */
    public boolean contentEquals(Tensor other) {
        return other != null && isHost() && other.isHost() && dtype == other.dtype
                && Arrays.equals(shape, other.shape) && buffer().equals(other.buffer());
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("Tensor(").append(dtype.shortName()).append('[');
        for (int i = 0; i < shape.length; i++) {
            if (i > 0) {
                sb.append(',');
            }
            sb.append(shape[i]);
        }
        return sb.append("] ").append(device).append(')').toString();
    }
}
