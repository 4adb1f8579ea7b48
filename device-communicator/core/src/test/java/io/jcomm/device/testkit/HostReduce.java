package io.jcomm.device.testkit;

import io.jcomm.api.DType;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import java.nio.ByteBuffer;
import java.util.List;

/**
 * Reference reductions on host bytes, with the semantics every communicator must have: integers in
 * exact 64-bit arithmetic ({@code AVG} truncates toward zero), floating types in double and rounded
 * once to the element type, {@code BOOL} sum as logical or and product as logical and. Used by the
 * test stand-ins (threads-as-ranks CPU group, fake NCCL) and to compute expected values.
 */
public final class HostReduce {

    private HostReduce() {
    }

    /** Reduces {@code inputs} (each {@code count} elements of {@code dtype}) into a new byte array. */
    public static byte[] reduce(DType dtype, ReduceOp op, List<byte[]> inputs, long count) {
        int n = inputs.size();
        Tensor[] ts = new Tensor[n];
        for (int i = 0; i < n; i++) {
            ts[i] = view(inputs.get(i), dtype, count);
        }
        Tensor out = Tensor.allocate(dtype, count);
        for (long e = 0; e < count; e++) {
            if (dtype.isFloatingPoint()) {
                double acc = ts[0].getDouble(e);
                for (int i = 1; i < n; i++) {
                    acc = combine(op, acc, ts[i].getDouble(e));
                }
                out.setDouble(e, op == ReduceOp.AVG ? acc / n : acc);
            } else if (dtype == DType.BOOL) {
                long acc = ts[0].getLong(e);
                for (int i = 1; i < n; i++) {
                    long v = ts[i].getLong(e);
                    acc = (op == ReduceOp.SUM || op == ReduceOp.MAX) ? Math.max(acc, v) : Math.min(acc, v);
                }
                out.setLong(e, acc);
            } else {
                long acc = ts[0].getLong(e);
                for (int i = 1; i < n; i++) {
                    acc = combine(op, acc, ts[i].getLong(e));
                }
                out.setLong(e, op == ReduceOp.AVG ? acc / n : acc);
            }
        }
        return out.toByteArray();
    }

    private static double combine(ReduceOp op, double a, double b) {
        switch (op) {
            case SUM: case AVG: return a + b;
            case PROD: return a * b;
            case MIN: return Math.min(a, b);
            case MAX: return Math.max(a, b);
            default: throw new AssertionError(op);
        }
    }

    private static long combine(ReduceOp op, long a, long b) {
        switch (op) {
            case SUM: case AVG: return a + b;
            case PROD: return a * b;
            case MIN: return Math.min(a, b);
            case MAX: return Math.max(a, b);
            default: throw new AssertionError(op);
        }
    }

    /** A host tensor over a copy of {@code bytes}. */
    public static Tensor view(byte[] bytes, DType dtype, long count) {
        ByteBuffer b = ByteBuffer.allocateDirect(bytes.length);
        b.put(bytes).flip();
        return Tensor.wrap(b, dtype, count);
    }
}
