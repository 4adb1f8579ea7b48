package io.jcomm.cpu.spi;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DType;
import io.jcomm.api.HalfFloats;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

class ReductionsTest {

    private static Tensor of(DType t, double... v) {
        Tensor x = Tensor.allocate(t, v.length);
        for (int i = 0; i < v.length; i++) {
            x.setDouble(i, v[i]);
        }
        return x;
    }

    private static double[] reduce(DType t, ReduceOp op, double[] a, double[] b) {
        Tensor x = of(t, a);
        Tensor y = of(t, b);
        Reductions.reduceInto(t, op, x.buffer(), y.buffer(), a.length);
        return x.toDoubleArray();
    }

    @Test
    void everyDtypeAndOperator() {
        double[] a = {1, -2, 3, 0};
        double[] b = {4, 5, -6, 0};
        for (DType t : new DType[] {DType.F16, DType.BF16, DType.F32, DType.F64, DType.I8, DType.I32, DType.I64}) {
            assertArrayEq(new double[] {5, 3, -3, 0}, reduce(t, ReduceOp.SUM, a, b), t + " SUM");
            assertArrayEq(new double[] {5, 3, -3, 0}, reduce(t, ReduceOp.AVG, a, b), t + " AVG accumulates");
            assertArrayEq(new double[] {4, -10, -18, 0}, reduce(t, ReduceOp.PROD, a, b), t + " PROD");
            assertArrayEq(new double[] {1, -2, -6, 0}, reduce(t, ReduceOp.MIN, a, b), t + " MIN");
            assertArrayEq(new double[] {4, 5, 3, 0}, reduce(t, ReduceOp.MAX, a, b), t + " MAX");
        }
        // unsigned bytes compare unsigned and wrap
        assertArrayEq(new double[] {44, 200}, reduce(DType.U8, ReduceOp.SUM, new double[] {200, 100}, new double[] {100, 100}), "u8 sum wraps");
        assertArrayEq(new double[] {200, 100}, reduce(DType.U8, ReduceOp.MAX, new double[] {200, 100}, new double[] {100, 50}), "u8 max");
        assertArrayEq(new double[] {-56, 2}, reduce(DType.I8, ReduceOp.SUM, new double[] {100, 1}, new double[] {100, 1}), "i8 wraps");
        // bool is logical
        assertArrayEq(new double[] {1, 1, 1, 0}, reduce(DType.BOOL, ReduceOp.SUM, new double[] {1, 1, 0, 0}, new double[] {1, 0, 1, 0}), "or");
        assertArrayEq(new double[] {1, 0, 0, 0}, reduce(DType.BOOL, ReduceOp.PROD, new double[] {1, 1, 0, 0}, new double[] {1, 0, 1, 0}), "and");
        assertArrayEq(new double[] {1, 0, 0, 0}, reduce(DType.BOOL, ReduceOp.MIN, new double[] {1, 1, 0, 0}, new double[] {1, 0, 1, 0}), "min");
        assertArrayEq(new double[] {1, 1, 1, 0}, reduce(DType.BOOL, ReduceOp.MAX, new double[] {1, 1, 0, 0}, new double[] {1, 0, 1, 0}), "max");
        assertFalse(Reductions.supports(DType.BOOL, ReduceOp.AVG));
        assertThrows(IllegalArgumentException.class, () -> reduce(DType.BOOL, ReduceOp.AVG, new double[] {1}, new double[] {1}));
    }

    /**
     * The 32- and 64-bit kernels run through arrays from 256 elements on: bit for bit what the element loop
     * gives, at sizes around the switch and the block, for NaN, signed zeros, infinities and overflow, with
     * direct and heap buffers at odd positions.
     */
    @Test
    void arrayKernelsMatchTheElementLoopBitForBit() {
        java.util.Random rnd = new java.util.Random(7);
        float[] specialsF = {Float.NaN, -0.0f, 0.0f, Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.MIN_VALUE,
                Float.MAX_VALUE, -1.5f};
        double[] specialsD = {Double.NaN, -0.0, 0.0, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, Double.MIN_VALUE,
                Double.MAX_VALUE, -1.5};
        for (int n : new int[] {255, 256, 257, 2047, 2048, 2049, 5000}) {
            for (DType t : new DType[] {DType.F32, DType.F64, DType.I32, DType.I64}) {
                int es = t.byteSize();
                for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.AVG, ReduceOp.PROD, ReduceOp.MIN, ReduceOp.MAX}) {
                    for (boolean direct : new boolean[] {true, false}) {
                        int off = 3;
                        ByteBuffer a = (direct ? ByteBuffer.allocateDirect(off + n * es) : ByteBuffer.allocate(off + n * es))
                                .order(ByteOrder.LITTLE_ENDIAN);
                        ByteBuffer b = (direct ? ByteBuffer.allocateDirect(off + n * es) : ByteBuffer.allocate(off + n * es))
                                .order(ByteOrder.LITTLE_ENDIAN);
                        for (int i = 0; i < n; i++) {
                            int at = off + i * es;
                            boolean special = rnd.nextInt(8) == 0;
                            switch (t) {
                                case F32 -> {
                                    a.putFloat(at, special ? specialsF[rnd.nextInt(specialsF.length)] : rnd.nextFloat() * 1e3f - 500);
                                    b.putFloat(at, special ? specialsF[rnd.nextInt(specialsF.length)] : rnd.nextFloat() * 1e3f - 500);
                                }
                                case F64 -> {
                                    a.putDouble(at, special ? specialsD[rnd.nextInt(specialsD.length)] : rnd.nextDouble() * 1e3 - 500);
                                    b.putDouble(at, special ? specialsD[rnd.nextInt(specialsD.length)] : rnd.nextDouble() * 1e3 - 500);
                                }
                                case I32 -> {
                                    a.putInt(at, rnd.nextInt());
                                    b.putInt(at, rnd.nextInt());
                                }
                                default -> {
                                    a.putLong(at, rnd.nextLong());
                                    b.putLong(at, rnd.nextLong());
                                }
                            }
                        }
                        ByteBuffer want = ByteBuffer.allocate(n * es).order(ByteOrder.LITTLE_ENDIAN);
                        for (int i = 0; i < n; i++) {
                            int at = off + i * es;
                            switch (t) {
                                case F32 -> {
                                    float x = a.getFloat(at);
                                    float y = b.getFloat(at);
                                    want.putFloat(i * es, switch (op) {
                                        case PROD -> x * y;
                                        case MIN -> Math.min(x, y);
                                        case MAX -> Math.max(x, y);
                                        default -> x + y;
                                    });
                                }
                                case F64 -> {
                                    double x = a.getDouble(at);
                                    double y = b.getDouble(at);
                                    want.putDouble(i * es, switch (op) {
                                        case PROD -> x * y;
                                        case MIN -> Math.min(x, y);
                                        case MAX -> Math.max(x, y);
                                        default -> x + y;
                                    });
                                }
                                case I32 -> {
                                    int x = a.getInt(at);
                                    int y = b.getInt(at);
                                    want.putInt(i * es, switch (op) {
                                        case PROD -> x * y;
                                        case MIN -> Math.min(x, y);
                                        case MAX -> Math.max(x, y);
                                        default -> x + y;
                                    });
                                }
                                default -> {
                                    long x = a.getLong(at);
                                    long y = b.getLong(at);
                                    want.putLong(i * es, switch (op) {
                                        case PROD -> x * y;
                                        case MIN -> Math.min(x, y);
                                        case MAX -> Math.max(x, y);
                                        default -> x + y;
                                    });
                                }
                            }
                        }
                        Reductions.reduceInto(t, op, a.duplicate().position(off), b.duplicate().position(off), n);
                        ByteBuffer got = a.duplicate().position(off);
                        for (int i = 0; i < n * es; i++) {
                            if (got.get(off + i) != want.get(i)) {
                                throw new AssertionError(t + " " + op + " n=" + n + " direct=" + direct + ": byte " + i
                                        + " (element " + i / es + ") differs from the element loop");
                            }
                        }
                        assertEquals(0, b.position(), "input untouched");
                    }
                }
            }
        }
    }

    /** reduceMany and reduceManyInPlace give the bits of folding the inputs with reduceInto, for every 32/64-bit type. */
    @Test
    void manyAndInPlaceFoldLikeReduceInto() {
        java.util.Random rnd = new java.util.Random(11);
        int n = 5000;
        for (DType t : new DType[] {DType.F32, DType.F64, DType.I32, DType.I64}) {
            for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.PROD, ReduceOp.MIN, ReduceOp.MAX}) {
                int b = n * t.byteSize();
                ByteBuffer[] ins = new ByteBuffer[3];
                for (int j = 0; j < ins.length; j++) {
                    ins[j] = ByteBuffer.allocateDirect(b).order(ByteOrder.LITTLE_ENDIAN);
                    byte[] r = new byte[b];
                    rnd.nextBytes(r);
                    ins[j].put(r).clear();
                }
                ByteBuffer want = ByteBuffer.allocateDirect(b).order(ByteOrder.LITTLE_ENDIAN);
                want.put(ins[0].duplicate()).clear();
                Reductions.reduceInto(t, op, want, ins[1], n);
                Reductions.reduceInto(t, op, want, ins[2], n);

                ByteBuffer many = ByteBuffer.allocateDirect(b).order(ByteOrder.LITTLE_ENDIAN);
                Reductions.reduceMany(t, op, many, ins, n);
                assertEquals(want, many, t + " " + op + " reduceMany");

                for (int self = 0; self < ins.length; self++) {
                    ByteBuffer inout = ByteBuffer.allocateDirect(b).order(ByteOrder.LITTLE_ENDIAN);
                    inout.put(ins[self].duplicate()).clear();
                    ByteBuffer[] others = ins.clone();
                    others[self] = null;
                    ByteBuffer also = ByteBuffer.allocateDirect(b).order(ByteOrder.LITTLE_ENDIAN);
                    Reductions.reduceManyInPlace(t, op, inout, others, self, n, also);
                    assertEquals(want, inout, t + " " + op + " in place, self " + self);
                    assertEquals(want, also, t + " " + op + " copy, self " + self);
                }
            }
        }
    }

    private static void assertArrayEq(double[] expected, double[] got, String msg) {
        assertEquals(java.util.Arrays.toString(expected), java.util.Arrays.toString(got), msg);
    }

    @Test
    void halfPrecisionComputesInFloatAndRounds() {
        // 2048 + 1 is not representable in f16 (rounds to even: 2048); the float sum is exact before rounding
        assertArrayEq(new double[] {2048}, reduce(DType.F16, ReduceOp.SUM, new double[] {2048}, new double[] {1}), "f16 rounding");
        assertArrayEq(new double[] {2052}, reduce(DType.F16, ReduceOp.SUM, new double[] {2048}, new double[] {3}), "f16 ties to even");
        // bf16: 256 + 1 -> 256, 256 + 3 -> 260 (nearest even of 259 at step 2)
        assertArrayEq(new double[] {256, 260}, reduce(DType.BF16, ReduceOp.SUM, new double[] {256, 256}, new double[] {1, 3}), "bf16");
        // NaN propagates through MIN/MAX
        Tensor x = of(DType.F32, Double.NaN, 1);
        Reductions.reduceInto(DType.F32, ReduceOp.MIN, x.buffer(), of(DType.F32, 0, Double.NaN).buffer(), 2);
        assertTrue(Double.isNaN(x.getDouble(0)) && Double.isNaN(x.getDouble(1)));
        Tensor h = of(DType.F16, 1);
        Reductions.reduceInto(DType.F16, ReduceOp.MAX, h.buffer(), Tensor.wrap(shortBuf(HalfFloats.floatToF16(Float.NaN)), DType.F16, 1).buffer(), 1);
        assertTrue(Double.isNaN(h.getDouble(0)));
    }

    private static ByteBuffer shortBuf(short v) {
        ByteBuffer b = ByteBuffer.allocateDirect(2).order(ByteOrder.LITTLE_ENDIAN);
        b.putShort(0, v);
        return b;
    }

    @Test
    void foldsManyInputsInOrderAndInPlace() {
        int n = 5000; // more than one block
        Tensor a = Tensor.allocate(DType.F32, n);
        Tensor b = Tensor.allocate(DType.F32, n);
        Tensor c = Tensor.allocate(DType.F32, n);
        for (int i = 0; i < n; i++) {
            a.setDouble(i, i % 5);
            b.setDouble(i, 10 * (i % 3));
            c.setDouble(i, -(i % 7));
        }
        Tensor out = Tensor.allocate(DType.F32, n);
        Reductions.reduceMany(DType.F32, ReduceOp.SUM, out.buffer(), new ByteBuffer[] {a.buffer(), b.buffer(), c.buffer()}, n);
        Tensor copy = Tensor.allocate(DType.F32, n);
        Tensor inout = Tensor.allocate(DType.F32, n);
        inout.copyFrom(b);
        Reductions.reduceManyInPlace(DType.F32, ReduceOp.SUM, inout.buffer(), new ByteBuffer[] {a.buffer(), null, c.buffer()},
                1, n, copy.buffer());
        Tensor maxed = Tensor.allocate(DType.F32, n);
        maxed.copyFrom(a);
        Reductions.reduceManyInPlace(DType.F32, ReduceOp.MAX, maxed.buffer(), new ByteBuffer[] {null, b.buffer(), c.buffer()},
                0, n, null);
        for (int i = 0; i < n; i++) {
            double expected = i % 5 + 10 * (i % 3) - (i % 7);
            assertEquals(expected, out.getDouble(i), "reduceMany " + i);
            assertEquals(expected, inout.getDouble(i), "in place " + i);
            assertEquals(expected, copy.getDouble(i), "copy " + i);
            assertEquals(Math.max(i % 5, 10 * (i % 3)), maxed.getDouble(i), "max " + i);
        }
    }

    @Test
    void divideTruncatesIntegersTowardZero() {
        Tensor i = Tensor.ofInts(7, -7, 8, -1);
        Reductions.divide(DType.I32, i.buffer(), 4, 2);
        assertArrayEq(new double[] {3, -3, 4, 0}, i.toDoubleArray(), "i32");
        Tensor l = Tensor.ofLongs(Long.MAX_VALUE, -9);
        Reductions.divide(DType.I64, l.buffer(), 2, 4);
        assertEquals(Long.MAX_VALUE / 4, l.getLong(0));
        assertEquals(-2, l.getLong(1));
        Tensor u = of(DType.U8, 255, 7);
        Reductions.divide(DType.U8, u.buffer(), 2, 2);
        assertArrayEq(new double[] {127, 3}, u.toDoubleArray(), "u8 unsigned");
        Tensor s = of(DType.I8, -128, 5);
        Reductions.divide(DType.I8, s.buffer(), 2, 3);
        assertArrayEq(new double[] {-42, 1}, s.toDoubleArray(), "i8");
        Tensor f = Tensor.ofFloats(1, 10);
        Reductions.divide(DType.F32, f.buffer(), 2, 4);
        assertArrayEq(new double[] {0.25, 2.5}, f.toDoubleArray(), "f32");
        Tensor h = of(DType.BF16, 3);
        Reductions.divide(DType.BF16, h.buffer(), 1, 2);
        assertEquals(1.5, h.getDouble(0));
    }

    @Test
    void respectsPositionsAndByteOrderAndBounds() {
        ByteBuffer acc = ByteBuffer.allocateDirect(16).order(ByteOrder.LITTLE_ENDIAN);
        acc.putInt(4, 5).putInt(8, 6);
        ByteBuffer in = ByteBuffer.allocate(8); // heap, big-endian view of little-endian data
        in.order(ByteOrder.LITTLE_ENDIAN).putInt(0, 1).putInt(4, 2);
        in.order(ByteOrder.BIG_ENDIAN);
        Reductions.reduceInto(DType.I32, ReduceOp.SUM, acc.duplicate().position(4), in, 2);
        assertEquals(6, acc.getInt(4));
        assertEquals(8, acc.getInt(8));
        assertEquals(0, acc.getInt(0));
        assertThrows(IllegalArgumentException.class, () -> Reductions.reduceInto(DType.I32, ReduceOp.SUM, acc, in, 3));
        Tensor out = Tensor.allocate(DType.F64, 2);
        Reductions.reduce(DType.F64, ReduceOp.PROD, out.buffer(), Tensor.ofDoubles(2, 3).buffer(), Tensor.ofDoubles(4, 5).buffer(), 2);
        assertArrayEq(new double[] {8, 15}, out.toDoubleArray(), "three operands");
    }
}
