package io.jcomm.cpu.testkit;

import io.jcomm.api.DType;
import io.jcomm.api.HalfFloats;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import java.nio.ByteBuffer;

/**
 * Deterministic inputs and exact expected results for the conformance cases. Reduction inputs are
 * small integers (1..4, or 0/1 for bool) so that every dtype represents every partial result exactly;
 * data-movement inputs use a wider pattern so that misplaced elements are caught.
 */
public final class Values {

    private Values() {
    }

    /** Reduction input of {@code rank} at element {@code i}: 1..4 (bool: 0/1). */
    public static long reduceInput(DType t, int rank, long i, int salt) {
        if (t == DType.BOOL) {
            return (rank + i + salt) % 3 != 0 ? 1 : 0;
        }
        return 1 + Math.floorMod(rank * 3L + i * 7L + salt, 4);
    }

    /** Data-movement input of {@code rank} at element {@code i}: 0..96 (bool: 0/1). */
    public static long moveInput(DType t, int rank, long i, int salt) {
        if (t == DType.BOOL) {
            return (rank * 5L + i + salt) % 2;
        }
        return Math.floorMod(rank * 131L + i * 17L + salt, 97);
    }

    /** A tensor of {@code n} elements filled with {@link #reduceInput}. */
    public static Tensor reduceTensor(DType t, long n, int rank, int salt) {
        Tensor x = Tensor.allocate(t, n);
        fill(x, 0, n, i -> reduceInput(t, rank, i, salt));
        return x;
    }

    /** A tensor of {@code n} elements filled with {@link #moveInput}. */
    public static Tensor moveTensor(DType t, long n, int rank, int salt) {
        Tensor x = Tensor.allocate(t, n);
        fill(x, 0, n, i -> moveInput(t, rank, i, salt));
        return x;
    }

    /** Element generator. */
    @FunctionalInterface
    public interface Gen {
        long at(long i);
    }

    /** Fills elements {@code [from, from + n)} of {@code x} (small integers) fast. */
    public static void fill(Tensor x, long from, long n, Gen g) {
        ByteBuffer b = x.buffer();
        DType t = x.dtype();
        int es = t.byteSize();
        for (long i = 0; i < n; i++) {
            int at = (int) ((from + i) * es);
            long v = g.at(i);
            switch (t) {
                case F32: b.putFloat(at, v); break;
                case F64: b.putDouble(at, v); break;
                case F16: b.putShort(at, HalfFloats.floatToF16(v)); break;
                case BF16: b.putShort(at, HalfFloats.floatToBf16(v)); break;
                case I32: b.putInt(at, (int) v); break;
                case I64: b.putLong(at, v); break;
                case I8: case U8: case BOOL: b.put(at, (byte) v); break;
                default: throw new AssertionError(t);
            }
        }
    }

    /** Rounds {@code v} to the precision of {@code t} (floating types) and returns it as a double. */
    public static double roundTo(DType t, double v) {
        switch (t) {
            case F32: return (float) v;
            case F16: return HalfFloats.f16ToFloat(HalfFloats.floatToF16((float) v));
            case BF16: return HalfFloats.bf16ToFloat(HalfFloats.floatToBf16((float) v));
            default: return v;
        }
    }

    /** Wraps {@code v} to the integer type {@code t} the way the tensor stores it. */
    public static long wrap(DType t, long v) {
        switch (t) {
            case I8: return (byte) v;
            case U8: return v & 0xff;
            case I32: return (int) v;
            case BOOL: return v != 0 ? 1 : 0;
            default: return v;
        }
    }

    /** Exact expected all-reduce result at element {@code i} over {@code size} ranks, as a double. */
    public static double reduceExpected(DType t, ReduceOp op, int size, long i, int salt) {
        if (t == DType.BOOL) {
            boolean or = false;
            boolean and = true;
            for (int r = 0; r < size; r++) {
                boolean v = reduceInput(t, r, i, salt) != 0;
                or |= v;
                and &= v;
            }
            boolean res = (op == ReduceOp.SUM || op == ReduceOp.MAX) ? or : and;
            return res ? 1 : 0;
        }
        long sum = 0;
        long prod = 1;
        long min = Long.MAX_VALUE;
        long max = Long.MIN_VALUE;
        for (int r = 0; r < size; r++) {
            long v = reduceInput(t, r, i, salt);
            sum += v;
            prod *= v;
            min = Math.min(min, v);
            max = Math.max(max, v);
        }
        if (!t.isFloatingPoint()) {
            switch (op) {
                case SUM: return wrap(t, sum);
                case PROD: return wrap(t, prod);
                case MIN: return min;
                case MAX: return max;
                case AVG: return wrap(t, sum) / size; // wrap then truncate toward zero (U8 unsigned)
                default: throw new AssertionError(op);
            }
        }
        switch (op) {
            case SUM: return roundTo(t, sum);
            case PROD: return roundTo(t, prod);
            case MIN: return min;
            case MAX: return max;
            case AVG:
                if (t == DType.F64) {
                    return (double) sum / size;
                }
                return roundTo(t, (float) roundTo(t, sum) / (float) size);
            default: throw new AssertionError(op);
        }
    }

    /** Asserts element {@code i} of {@code x} equals {@code expected} exactly. */
    public static void assertElement(Tensor x, long i, double expected, String what) {
        double got = x.dtype().isFloatingPoint() ? x.getDouble(i) : x.getLong(i);
        if (Double.compare(got, expected) != 0) {
            throw new AssertionError(what + ": element " + i + " is " + got + ", expected " + expected);
        }
    }

    /** Checks every element of {@code x} against {@code expected(i)}; reports the first difference. */
    public static void assertAll(Tensor x, java.util.function.LongToDoubleFunction expected, String what) {
        long n = x.numel();
        for (long i = 0; i < n; i++) {
            assertElement(x, i, expected.applyAsDouble(i), what);
        }
    }
}
