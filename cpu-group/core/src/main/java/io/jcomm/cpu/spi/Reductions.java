package io.jcomm.cpu.spi;

import io.jcomm.api.DType;
import io.jcomm.api.HalfFloats;
import io.jcomm.api.ReduceOp;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.DoubleBuffer;
import java.nio.FloatBuffer;
import java.nio.IntBuffer;
import java.nio.LongBuffer;
import java.nio.ShortBuffer;

/**
 * Element-wise reduction kernels shared by the CPU backends: every {@link DType} times every
 * {@link ReduceOp}, on little-endian buffers (direct or heap).
 *
 * <h2>Semantics</h2>
 * <ul>
 *   <li>{@link #reduceInto} computes {@code acc[i] = acc[i] op in[i]}; {@link ReduceOp#AVG}
 *       accumulates as {@link ReduceOp#SUM}, and the caller finishes with {@link #divide} by the
 *       group size once every contribution has been added.</li>
 *   <li>{@code F16}/{@code BF16}: each step widens both operands to {@code float}, computes in
 *       {@code float} and rounds the result back (round to nearest even).</li>
 *   <li>Integer types wrap around on overflow (two's complement, like PyTorch); {@code U8} compares
 *       unsigned; division truncates toward zero.</li>
 *   <li>{@code BOOL} is logical: {@code SUM}/{@code MAX} are OR, {@code PROD}/{@code MIN} are AND;
 *       {@code AVG} is not defined for {@code BOOL} ({@link #supports} is false).</li>
 *   <li>Floating-point {@code MIN}/{@code MAX} propagate NaN ({@link Math#min(float, float)}).</li>
 * </ul>
 *
 * <p>The kernels allocate nothing beyond two typed views per call, dispatch on (type, op) once per
 * call, and run monomorphic loops over bulk views, which the JIT compiles to tight loops. Pass direct
 * buffers on hot paths: a heap buffer works, but its view class makes the loops' call sites
 * polymorphic for the rest of the process. Thread safe (stateless).
 */
public final class Reductions {

    private Reductions() {
    }

    /** Whether {@code op} is defined for {@code dtype} (everything except {@code BOOL} with {@code AVG}). */
    public static boolean supports(DType dtype, ReduceOp op) {
        return !(dtype == DType.BOOL && op == ReduceOp.AVG);
    }

    private static ByteBuffer le(ByteBuffer b) {
        return b.order() == ByteOrder.LITTLE_ENDIAN ? b : b.duplicate().order(ByteOrder.LITTLE_ENDIAN);
    }

    private static void check(ByteBuffer b, int count, DType t, String what) {
        if (count < 0 || (long) count * t.byteSize() > b.remaining()) {
            throw new IllegalArgumentException(what + " has " + b.remaining() + " bytes, need " + count + " x "
                    + t.byteSize());
        }
    }

    /**
     * {@code acc[i] = acc[i] op in[i]} for {@code i < count}, element 0 at each buffer's position.
     * Positions and limits are not changed. {@code AVG} adds (see {@link #divide}).
     *
     * @throws IllegalArgumentException if a buffer is too small or the pair is unsupported
     */
    public static void reduceInto(DType dtype, ReduceOp op, ByteBuffer acc, ByteBuffer in, int count) {
        check(acc, count, dtype, "accumulator");
        check(in, count, dtype, "input");
        if (!supports(dtype, op)) {
            throw new IllegalArgumentException(op + " is not defined for " + dtype);
        }
        if (count == 0) {
            return;
        }
        acc = le(acc);
        in = le(in);
        switch (dtype) {
            case F32: f32(op, acc.asFloatBuffer(), in.asFloatBuffer(), count); break;
            case F64: f64(op, acc.asDoubleBuffer(), in.asDoubleBuffer(), count); break;
            case I32: i32(op, acc.asIntBuffer(), in.asIntBuffer(), count); break;
            case I64: i64(op, acc.asLongBuffer(), in.asLongBuffer(), count); break;
            case F16: f16(op, acc.asShortBuffer(), in.asShortBuffer(), count); break;
            case BF16: bf16(op, acc.asShortBuffer(), in.asShortBuffer(), count); break;
            case I8: i8(op, acc, in, count); break;
            case U8: u8(op, acc, in, count); break;
            case BOOL: bool(op, acc, in, count); break;
            default: throw new AssertionError(dtype);
        }
    }

    /**
     * {@code out[i] = a[i] op b[i]}: {@code out} receives a copy of {@code a}, then {@code b} is
     * reduced into it. {@code out} must not overlap {@code a} or {@code b} (use {@link #reduceInto}).
     */
    public static void reduce(DType dtype, ReduceOp op, ByteBuffer out, ByteBuffer a, ByteBuffer b, int count) {
        check(out, count, dtype, "output");
        check(a, count, dtype, "input a");
        int bytes = count * dtype.byteSize();
        if (bytes > 0) {
            out.duplicate().put(a.duplicate().limit(a.position() + bytes));
        }
        reduceInto(dtype, op, out, b, count);
    }

    /** Elements per block of {@link #reduceMany}: the output block stays in the first-level cache. */
    private static final int BLOCK_BYTES = 8 << 10;

    /**
     * {@code out[i] = ins[0][i] op ins[1][i] op ... op ins[k-1][i]}, folded left in input order (so
     * every rank that reduces the same inputs in the same order gets identical bits). Works block by
     * block so that {@code out} is written to memory once. {@code out} must not overlap any input.
     */
    public static void reduceMany(DType dtype, ReduceOp op, ByteBuffer out, ByteBuffer[] ins, int count) {
        check(out, count, dtype, "output");
        for (ByteBuffer in : ins) {
            check(in, count, dtype, "input");
        }
        if (ins.length == 0) {
            throw new IllegalArgumentException("no inputs");
        }
        if (count >= ARRAYS_MIN_ELEMS && foldThroughArrays(dtype, op, out, ins, -1, count, null)) {
            return;
        }
        int es = dtype.byteSize();
        int blockElems = Math.max(1, BLOCK_BYTES / es);
        for (int from = 0; from < count; from += blockElems) {
            int n = Math.min(blockElems, count - from);
            ByteBuffer o = out.duplicate();
            o.position(out.position() + from * es);
            ByteBuffer first = ins[0].duplicate();
            first.position(ins[0].position() + from * es).limit(first.position() + n * es);
            o.duplicate().put(first);
            for (int j = 1; j < ins.length; j++) {
                ByteBuffer in = ins[j].duplicate();
                in.position(ins[j].position() + from * es);
                reduceInto(dtype, op, o, in, n);
            }
        }
    }

    /**
     * Like {@link #reduceMany}, but the input at position {@code self} is {@code inout}'s own original
     * content ({@code ins[self]} is ignored): {@code inout[i] = ins[0][i] op ... op inout[i] op ...}
     * in input order, updated in place. Each finished block is also copied to {@code alsoTo} when it
     * is not null (while it is still in cache), which saves a separate pass.
     */
    public static void reduceManyInPlace(DType dtype, ReduceOp op, ByteBuffer inout, ByteBuffer[] ins, int self,
                                         int count, ByteBuffer alsoTo) {
        check(inout, count, dtype, "accumulator");
        if (alsoTo != null) {
            check(alsoTo, count, dtype, "copy target");
        }
        for (int j = 0; j < ins.length; j++) {
            if (j != self) {
                check(ins[j], count, dtype, "input");
            }
        }
        if (self < 0 || self >= ins.length) {
            throw new IllegalArgumentException("self " + self + " out of range");
        }
        if (count >= ARRAYS_MIN_ELEMS && foldThroughArrays(dtype, op, inout, ins, self, count, alsoTo)) {
            return;
        }
        int es = dtype.byteSize();
        int blockElems = Math.max(1, BLOCK_BYTES / es);
        // direct like every other buffer the kernels see: the loops stay monomorphic (a heap buffer's
        // view class next to the direct one would make the JIT's call sites polymorphic)
        ByteBuffer own = ByteBuffer.allocateDirect(blockElems * es).order(ByteOrder.LITTLE_ENDIAN);
        for (int from = 0; from < count; from += blockElems) {
            int n = Math.min(blockElems, count - from);
            int bytes = n * es;
            ByteBuffer o = inout.duplicate();
            o.position(inout.position() + from * es).limit(inout.position() + from * es + bytes);
            own.clear();
            own.put(o.duplicate()).flip();
            ByteBuffer first = self == 0 ? own.duplicate() : ins[0].duplicate();
            if (self != 0) {
                first.position(ins[0].position() + from * es).limit(first.position() + bytes);
            }
            o.duplicate().put(first);
            for (int j = 1; j < ins.length; j++) {
                ByteBuffer in;
                if (j == self) {
                    in = own.duplicate();
                } else {
                    in = ins[j].duplicate();
                    in.position(ins[j].position() + from * es);
                }
                reduceInto(dtype, op, o, in, n);
            }
            if (alsoTo != null) {
                ByteBuffer a = alsoTo.duplicate();
                a.position(alsoTo.position() + from * es);
                a.put(o.duplicate());
            }
        }
    }

    /**
     * Divides {@code count} elements at {@code acc}'s position by {@code divisor} in place (the end of
     * {@link ReduceOp#AVG}): floating types divide in their compute type and round; integers truncate
     * toward zero ({@code U8} as unsigned).
     */
    public static void divide(DType dtype, ByteBuffer acc, int count, int divisor) {
        check(acc, count, dtype, "accumulator");
        if (divisor == 0) {
            throw new IllegalArgumentException("division by zero");
        }
        if (count == 0 || divisor == 1) {
            return;
        }
        acc = le(acc);
        int p = acc.position();
        switch (dtype) {
            case F32: {
                FloatBuffer a = acc.asFloatBuffer();
                float d = divisor;
                for (int i = 0; i < count; i++) {
                    a.put(i, a.get(i) / d);
                }
                break;
            }
            case F64: {
                DoubleBuffer a = acc.asDoubleBuffer();
                double d = divisor;
                for (int i = 0; i < count; i++) {
                    a.put(i, a.get(i) / d);
                }
                break;
            }
            case I32: {
                IntBuffer a = acc.asIntBuffer();
                for (int i = 0; i < count; i++) {
                    a.put(i, a.get(i) / divisor);
                }
                break;
            }
            case I64: {
                LongBuffer a = acc.asLongBuffer();
                for (int i = 0; i < count; i++) {
                    a.put(i, a.get(i) / divisor);
                }
                break;
            }
            case F16: {
                ShortBuffer a = acc.asShortBuffer();
                float d = divisor;
                for (int i = 0; i < count; i++) {
                    a.put(i, HalfFloats.floatToF16(HalfFloats.f16ToFloat(a.get(i)) / d));
                }
                break;
            }
            case BF16: {
                ShortBuffer a = acc.asShortBuffer();
                float d = divisor;
                for (int i = 0; i < count; i++) {
                    a.put(i, HalfFloats.floatToBf16(HalfFloats.bf16ToFloat(a.get(i)) / d));
                }
                break;
            }
            case I8:
                for (int i = p; i < p + count; i++) {
                    acc.put(i, (byte) (acc.get(i) / divisor));
                }
                break;
            case U8:
                for (int i = p; i < p + count; i++) {
                    acc.put(i, (byte) ((acc.get(i) & 0xff) / divisor));
                }
                break;
            case BOOL:
                throw new IllegalArgumentException("AVG is not defined for BOOL");
            default:
                throw new AssertionError(dtype);
        }
    }

    /**
     * From this many elements the 32- and 64-bit kernels work through per-thread arrays: bulk copies in and
     * out, and a loop over arrays, which the JIT vectorises (a loop over buffer views it does not): 64 KiB of
     * f32 sums in 2.5 us instead of 5 (docs/PERFORMANCE.md).
     */
    private static final int ARRAYS_MIN_ELEMS = 256;
    /** Elements per block of those kernels (8 KiB of f32: both arrays stay in the first-level cache). */
    private static final int BLOCK_ELEMS = 2048;

    /** Per-thread blocks of the array kernels, made on first use per type (16 KiB per type and thread). */
    private static final ThreadLocal<Scratch> SCRATCH = ThreadLocal.withInitial(Scratch::new);

    private static final class Scratch {
        private float[] f32x;
        private float[] f32y;
        private double[] f64x;
        private double[] f64y;
        private int[] i32x;
        private int[] i32y;
        private long[] i64x;
        private long[] i64y;

        float[] f32x() {
            return f32x != null ? f32x : (f32x = new float[BLOCK_ELEMS]);
        }

        float[] f32y() {
            return f32y != null ? f32y : (f32y = new float[BLOCK_ELEMS]);
        }

        double[] f64x() {
            return f64x != null ? f64x : (f64x = new double[BLOCK_ELEMS]);
        }

        double[] f64y() {
            return f64y != null ? f64y : (f64y = new double[BLOCK_ELEMS]);
        }

        int[] i32x() {
            return i32x != null ? i32x : (i32x = new int[BLOCK_ELEMS]);
        }

        int[] i32y() {
            return i32y != null ? i32y : (i32y = new int[BLOCK_ELEMS]);
        }

        long[] i64x() {
            return i64x != null ? i64x : (i64x = new long[BLOCK_ELEMS]);
        }

        long[] i64y() {
            return i64y != null ? i64y : (i64y = new long[BLOCK_ELEMS]);
        }
    }
    private static void f32Blocked(ReduceOp op, FloatBuffer a, FloatBuffer b, int n) {
        Scratch sc = SCRATCH.get();
        float[] x = sc.f32x();
        float[] y = sc.f32y();
        for (int from = 0; from < n; from += BLOCK_ELEMS) {
            int m = Math.min(BLOCK_ELEMS, n - from);
            a.get(from, x, 0, m);
            b.get(from, y, 0, m);
            f32Arrays(op, x, y, m);
            a.put(from, x, 0, m);
        }
    }

    private static void f32Arrays(ReduceOp op, float[] x, float[] y, int m) {
        switch (op) {
            case SUM: case AVG:
                for (int i = 0; i < m; i++) {
                    x[i] += y[i];
                }
                break;
            case PROD:
                for (int i = 0; i < m; i++) {
                    x[i] *= y[i];
                }
                break;
            case MIN:
                for (int i = 0; i < m; i++) {
                    x[i] = Math.min(x[i], y[i]);
                }
                break;
            case MAX:
                for (int i = 0; i < m; i++) {
                    x[i] = Math.max(x[i], y[i]);
                }
                break;
            default: throw new AssertionError(op);
        }
    }

    private static void f64Blocked(ReduceOp op, DoubleBuffer a, DoubleBuffer b, int n) {
        Scratch sc = SCRATCH.get();
        double[] x = sc.f64x();
        double[] y = sc.f64y();
        for (int from = 0; from < n; from += BLOCK_ELEMS) {
            int m = Math.min(BLOCK_ELEMS, n - from);
            a.get(from, x, 0, m);
            b.get(from, y, 0, m);
            f64Arrays(op, x, y, m);
            a.put(from, x, 0, m);
        }
    }

    private static void f64Arrays(ReduceOp op, double[] x, double[] y, int m) {
        switch (op) {
            case SUM: case AVG:
                for (int i = 0; i < m; i++) {
                    x[i] += y[i];
                }
                break;
            case PROD:
                for (int i = 0; i < m; i++) {
                    x[i] *= y[i];
                }
                break;
            case MIN:
                for (int i = 0; i < m; i++) {
                    x[i] = Math.min(x[i], y[i]);
                }
                break;
            case MAX:
                for (int i = 0; i < m; i++) {
                    x[i] = Math.max(x[i], y[i]);
                }
                break;
            default: throw new AssertionError(op);
        }
    }

    private static void i32Blocked(ReduceOp op, IntBuffer a, IntBuffer b, int n) {
        Scratch sc = SCRATCH.get();
        int[] x = sc.i32x();
        int[] y = sc.i32y();
        for (int from = 0; from < n; from += BLOCK_ELEMS) {
            int m = Math.min(BLOCK_ELEMS, n - from);
            a.get(from, x, 0, m);
            b.get(from, y, 0, m);
            i32Arrays(op, x, y, m);
            a.put(from, x, 0, m);
        }
    }

    private static void i32Arrays(ReduceOp op, int[] x, int[] y, int m) {
        switch (op) {
            case SUM: case AVG:
                for (int i = 0; i < m; i++) {
                    x[i] += y[i];
                }
                break;
            case PROD:
                for (int i = 0; i < m; i++) {
                    x[i] *= y[i];
                }
                break;
            case MIN:
                for (int i = 0; i < m; i++) {
                    x[i] = Math.min(x[i], y[i]);
                }
                break;
            case MAX:
                for (int i = 0; i < m; i++) {
                    x[i] = Math.max(x[i], y[i]);
                }
                break;
            default: throw new AssertionError(op);
        }
    }

    private static void i64Blocked(ReduceOp op, LongBuffer a, LongBuffer b, int n) {
        Scratch sc = SCRATCH.get();
        long[] x = sc.i64x();
        long[] y = sc.i64y();
        for (int from = 0; from < n; from += BLOCK_ELEMS) {
            int m = Math.min(BLOCK_ELEMS, n - from);
            a.get(from, x, 0, m);
            b.get(from, y, 0, m);
            i64Arrays(op, x, y, m);
            a.put(from, x, 0, m);
        }
    }

    private static void i64Arrays(ReduceOp op, long[] x, long[] y, int m) {
        switch (op) {
            case SUM: case AVG:
                for (int i = 0; i < m; i++) {
                    x[i] += y[i];
                }
                break;
            case PROD:
                for (int i = 0; i < m; i++) {
                    x[i] *= y[i];
                }
                break;
            case MIN:
                for (int i = 0; i < m; i++) {
                    x[i] = Math.min(x[i], y[i]);
                }
                break;
            case MAX:
                for (int i = 0; i < m; i++) {
                    x[i] = Math.max(x[i], y[i]);
                }
                break;
            default: throw new AssertionError(op);
        }
    }

    /**
     * {@link #reduceMany} ({@code self} = -1) and {@link #reduceManyInPlace} of the 32- and 64-bit types
     * through per-thread arrays: each block of every input is loaded once, the inputs folded in order, and
     * the block stored once into {@code out} (and {@code alsoTo}). The input at {@code self} is {@code out}'s
     * own block, read before the block is stored. False for the other types.
     */
    private static boolean foldThroughArrays(DType dtype, ReduceOp op, ByteBuffer out, ByteBuffer[] ins, int self,
                                             int count, ByteBuffer alsoTo) {
        switch (dtype) {
            case F32: f32Fold(op, out, ins, self, count, alsoTo); return true;
            case F64: f64Fold(op, out, ins, self, count, alsoTo); return true;
            case I32: i32Fold(op, out, ins, self, count, alsoTo); return true;
            case I64: i64Fold(op, out, ins, self, count, alsoTo); return true;
            default: return false;
        }
    }

    private static void f32Fold(ReduceOp op, ByteBuffer out, ByteBuffer[] ins, int self, int n, ByteBuffer alsoTo) {
        Scratch sc = SCRATCH.get();
        float[] x = sc.f32x();
        float[] y = sc.f32y();
        FloatBuffer acc = le(out).asFloatBuffer();
        FloatBuffer also = alsoTo == null ? null : le(alsoTo).asFloatBuffer();
        FloatBuffer[] in = new FloatBuffer[ins.length];
        for (int j = 0; j < ins.length; j++) {
            in[j] = j == self ? acc : le(ins[j]).asFloatBuffer();
        }
        for (int from = 0; from < n; from += BLOCK_ELEMS) {
            int m = Math.min(BLOCK_ELEMS, n - from);
            in[0].get(from, x, 0, m);
            for (int j = 1; j < in.length; j++) {
                in[j].get(from, y, 0, m); // the accumulator's block is written only below: still its own input
                f32Arrays(op, x, y, m);
            }
            acc.put(from, x, 0, m);
            if (also != null) {
                also.put(from, x, 0, m);
            }
        }
    }

    private static void f64Fold(ReduceOp op, ByteBuffer out, ByteBuffer[] ins, int self, int n, ByteBuffer alsoTo) {
        Scratch sc = SCRATCH.get();
        double[] x = sc.f64x();
        double[] y = sc.f64y();
        DoubleBuffer acc = le(out).asDoubleBuffer();
        DoubleBuffer also = alsoTo == null ? null : le(alsoTo).asDoubleBuffer();
        DoubleBuffer[] in = new DoubleBuffer[ins.length];
        for (int j = 0; j < ins.length; j++) {
            in[j] = j == self ? acc : le(ins[j]).asDoubleBuffer();
        }
        for (int from = 0; from < n; from += BLOCK_ELEMS) {
            int m = Math.min(BLOCK_ELEMS, n - from);
            in[0].get(from, x, 0, m);
            for (int j = 1; j < in.length; j++) {
                in[j].get(from, y, 0, m); // the accumulator's block is written only below: still its own input
                f64Arrays(op, x, y, m);
            }
            acc.put(from, x, 0, m);
            if (also != null) {
                also.put(from, x, 0, m);
            }
        }
    }

    private static void i32Fold(ReduceOp op, ByteBuffer out, ByteBuffer[] ins, int self, int n, ByteBuffer alsoTo) {
        Scratch sc = SCRATCH.get();
        int[] x = sc.i32x();
        int[] y = sc.i32y();
        IntBuffer acc = le(out).asIntBuffer();
        IntBuffer also = alsoTo == null ? null : le(alsoTo).asIntBuffer();
        IntBuffer[] in = new IntBuffer[ins.length];
        for (int j = 0; j < ins.length; j++) {
            in[j] = j == self ? acc : le(ins[j]).asIntBuffer();
        }
        for (int from = 0; from < n; from += BLOCK_ELEMS) {
            int m = Math.min(BLOCK_ELEMS, n - from);
            in[0].get(from, x, 0, m);
            for (int j = 1; j < in.length; j++) {
                in[j].get(from, y, 0, m); // the accumulator's block is written only below: still its own input
                i32Arrays(op, x, y, m);
            }
            acc.put(from, x, 0, m);
            if (also != null) {
                also.put(from, x, 0, m);
            }
        }
    }

    private static void i64Fold(ReduceOp op, ByteBuffer out, ByteBuffer[] ins, int self, int n, ByteBuffer alsoTo) {
        Scratch sc = SCRATCH.get();
        long[] x = sc.i64x();
        long[] y = sc.i64y();
        LongBuffer acc = le(out).asLongBuffer();
        LongBuffer also = alsoTo == null ? null : le(alsoTo).asLongBuffer();
        LongBuffer[] in = new LongBuffer[ins.length];
        for (int j = 0; j < ins.length; j++) {
            in[j] = j == self ? acc : le(ins[j]).asLongBuffer();
        }
        for (int from = 0; from < n; from += BLOCK_ELEMS) {
            int m = Math.min(BLOCK_ELEMS, n - from);
            in[0].get(from, x, 0, m);
            for (int j = 1; j < in.length; j++) {
                in[j].get(from, y, 0, m); // the accumulator's block is written only below: still its own input
                i64Arrays(op, x, y, m);
            }
            acc.put(from, x, 0, m);
            if (also != null) {
                also.put(from, x, 0, m);
            }
        }
    }

    private static void f32(ReduceOp op, FloatBuffer a, FloatBuffer b, int n) {
        if (n >= ARRAYS_MIN_ELEMS) {
            f32Blocked(op, a, b, n);
            return;
        }
        switch (op) {
            case SUM: case AVG:
                for (int i = 0; i < n; i++) {
                    a.put(i, a.get(i) + b.get(i));
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    a.put(i, a.get(i) * b.get(i));
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    a.put(i, Math.min(a.get(i), b.get(i)));
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    a.put(i, Math.max(a.get(i), b.get(i)));
                }
                break;
            default: throw new AssertionError(op);
        }
    }

    private static void f64(ReduceOp op, DoubleBuffer a, DoubleBuffer b, int n) {
        if (n >= ARRAYS_MIN_ELEMS) {
            f64Blocked(op, a, b, n);
            return;
        }
        switch (op) {
            case SUM: case AVG:
                for (int i = 0; i < n; i++) {
                    a.put(i, a.get(i) + b.get(i));
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    a.put(i, a.get(i) * b.get(i));
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    a.put(i, Math.min(a.get(i), b.get(i)));
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    a.put(i, Math.max(a.get(i), b.get(i)));
                }
                break;
            default: throw new AssertionError(op);
        }
    }

    private static void i32(ReduceOp op, IntBuffer a, IntBuffer b, int n) {
        if (n >= ARRAYS_MIN_ELEMS) {
            i32Blocked(op, a, b, n);
            return;
        }
        switch (op) {
            case SUM: case AVG:
                for (int i = 0; i < n; i++) {
                    a.put(i, a.get(i) + b.get(i));
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    a.put(i, a.get(i) * b.get(i));
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    a.put(i, Math.min(a.get(i), b.get(i)));
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    a.put(i, Math.max(a.get(i), b.get(i)));
                }
                break;
            default: throw new AssertionError(op);
        }
    }

    private static void i64(ReduceOp op, LongBuffer a, LongBuffer b, int n) {
        if (n >= ARRAYS_MIN_ELEMS) {
            i64Blocked(op, a, b, n);
            return;
        }
        switch (op) {
            case SUM: case AVG:
                for (int i = 0; i < n; i++) {
                    a.put(i, a.get(i) + b.get(i));
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    a.put(i, a.get(i) * b.get(i));
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    a.put(i, Math.min(a.get(i), b.get(i)));
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    a.put(i, Math.max(a.get(i), b.get(i)));
                }
                break;
            default: throw new AssertionError(op);
        }
    }

    private static void f16(ReduceOp op, ShortBuffer a, ShortBuffer b, int n) {
        switch (op) {
            case SUM: case AVG:
                for (int i = 0; i < n; i++) {
                    a.put(i, HalfFloats.floatToF16(HalfFloats.f16ToFloat(a.get(i)) + HalfFloats.f16ToFloat(b.get(i))));
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    a.put(i, HalfFloats.floatToF16(HalfFloats.f16ToFloat(a.get(i)) * HalfFloats.f16ToFloat(b.get(i))));
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    a.put(i, HalfFloats.floatToF16(Math.min(HalfFloats.f16ToFloat(a.get(i)), HalfFloats.f16ToFloat(b.get(i)))));
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    a.put(i, HalfFloats.floatToF16(Math.max(HalfFloats.f16ToFloat(a.get(i)), HalfFloats.f16ToFloat(b.get(i)))));
                }
                break;
            default: throw new AssertionError(op);
        }
    }

    private static void bf16(ReduceOp op, ShortBuffer a, ShortBuffer b, int n) {
        switch (op) {
            case SUM: case AVG:
                for (int i = 0; i < n; i++) {
                    a.put(i, HalfFloats.floatToBf16(HalfFloats.bf16ToFloat(a.get(i)) + HalfFloats.bf16ToFloat(b.get(i))));
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    a.put(i, HalfFloats.floatToBf16(HalfFloats.bf16ToFloat(a.get(i)) * HalfFloats.bf16ToFloat(b.get(i))));
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    a.put(i, HalfFloats.floatToBf16(Math.min(HalfFloats.bf16ToFloat(a.get(i)), HalfFloats.bf16ToFloat(b.get(i)))));
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    a.put(i, HalfFloats.floatToBf16(Math.max(HalfFloats.bf16ToFloat(a.get(i)), HalfFloats.bf16ToFloat(b.get(i)))));
                }
                break;
            default: throw new AssertionError(op);
        }
    }

    private static void i8(ReduceOp op, ByteBuffer a, ByteBuffer b, int n) {
        int pa = a.position();
        int pb = b.position();
        switch (op) {
            case SUM: case AVG:
                for (int i = 0; i < n; i++) {
                    a.put(pa + i, (byte) (a.get(pa + i) + b.get(pb + i)));
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    a.put(pa + i, (byte) (a.get(pa + i) * b.get(pb + i)));
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    a.put(pa + i, (byte) Math.min(a.get(pa + i), b.get(pb + i)));
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    a.put(pa + i, (byte) Math.max(a.get(pa + i), b.get(pb + i)));
                }
                break;
            default: throw new AssertionError(op);
        }
    }

    private static void u8(ReduceOp op, ByteBuffer a, ByteBuffer b, int n) {
        int pa = a.position();
        int pb = b.position();
        switch (op) {
            case SUM: case AVG:
                for (int i = 0; i < n; i++) {
                    a.put(pa + i, (byte) (a.get(pa + i) + b.get(pb + i)));
                }
                break;
            case PROD:
                for (int i = 0; i < n; i++) {
                    a.put(pa + i, (byte) (a.get(pa + i) * b.get(pb + i)));
                }
                break;
            case MIN:
                for (int i = 0; i < n; i++) {
                    a.put(pa + i, (byte) Math.min(a.get(pa + i) & 0xff, b.get(pb + i) & 0xff));
                }
                break;
            case MAX:
                for (int i = 0; i < n; i++) {
                    a.put(pa + i, (byte) Math.max(a.get(pa + i) & 0xff, b.get(pb + i) & 0xff));
                }
                break;
            default: throw new AssertionError(op);
        }
    }

    private static void bool(ReduceOp op, ByteBuffer a, ByteBuffer b, int n) {
        int pa = a.position();
        int pb = b.position();
        switch (op) {
            case SUM: case MAX:
                for (int i = 0; i < n; i++) {
                    a.put(pa + i, (byte) ((a.get(pa + i) | b.get(pb + i)) != 0 ? 1 : 0));
                }
                break;
            case PROD: case MIN:
                for (int i = 0; i < n; i++) {
                    a.put(pa + i, (byte) (a.get(pa + i) != 0 && b.get(pb + i) != 0 ? 1 : 0));
                }
                break;
            default: throw new AssertionError(op);
        }
    }
}
