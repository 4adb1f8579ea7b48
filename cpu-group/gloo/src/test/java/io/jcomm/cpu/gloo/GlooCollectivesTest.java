package io.jcomm.cpu.gloo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DType;
import io.jcomm.api.Deadline;
import io.jcomm.api.HalfFloats;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ThreadLocalRandom;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Every operation and dtype of the gloo backend, ranks as threads over an in-memory store; with
 * the argument check (default) small payloads (up to 1 KiB) travel inline in the check messages
 * and larger ones by gloo's algorithms, so sizes on both sides of that limit are used.
 */
@Timeout(120)
class GlooCollectivesTest {

    /** Backend options of every run of this class. */
    Map<String, String> options() {
        return Map.of();
    }

    private void run(int size, ThreadRanks.Body body) {
        ThreadRanks.run(size, options(), Duration.ofSeconds(60), body);
    }

    private static final Duration T = Duration.ofSeconds(20);

    private static Deadline d() {
        return Deadline.after(T);
    }

    /** Test data: small integers so that every dtype holds sums and products of 3 ranks exactly. */
    static long value(DType t, int rank, long i) {
        long base = (rank * 7L + i * 3L) % 11L;
        switch (t) {
            case U8: return base;
            case BOOL: return base % 2;
            default: return base - 5;
        }
    }

    static Tensor filled(DType t, int rank, int n) {
        Tensor x = Tensor.allocate(t, n);
        for (int i = 0; i < n; i++) {
            x.setLong(i, value(t, rank, i));
        }
        return x;
    }

    /** The expected all-reduce result, computed the way the contract defines it. */
    static Tensor expected(DType t, ReduceOp op, int size, int n) {
        Tensor e = Tensor.allocate(t, n);
        for (int i = 0; i < n; i++) {
            if (t == DType.BOOL) {
                boolean any = false;
                boolean all = true;
                for (int r = 0; r < size; r++) {
                    any |= value(t, r, i) != 0;
                    all &= value(t, r, i) != 0;
                }
                e.setLong(i, (op == ReduceOp.SUM || op == ReduceOp.MAX) ? (any ? 1 : 0) : (all ? 1 : 0));
                continue;
            }
            long acc = value(t, 0, i);
            for (int r = 1; r < size; r++) {
                long v = value(t, r, i);
                switch (op) {
                    case SUM: case AVG: acc += v; break;
                    case PROD: acc *= v; break;
                    case MIN: acc = Math.min(acc, v); break;
                    case MAX: acc = Math.max(acc, v); break;
                    default: throw new AssertionError(op);
                }
            }
            if (op != ReduceOp.AVG) {
                e.setLong(i, acc); // wraps like the backend for 8-bit types
            } else if (t.isFloatingPoint()) {
                e.setDouble(i, t == DType.F64 ? acc / (double) size : (float) acc / (float) size);
            } else {
                e.setLong(i, acc / size);
            }
        }
        return e;
    }

    /** Equal element values (so that -0.0 == 0.0, which a float product of a zero may give). */
    static void assertSameValues(Tensor e, Tensor x, String what) {
        assertEquals(e.dtype(), x.dtype(), what);
        assertEquals(e.numel(), x.numel(), what);
        for (int i = 0; i < e.numel(); i++) {
            if (e.getDouble(i) != x.getDouble(i)) {
                throw new AssertionError(what + ": element " + i + ": expected "
                        + java.util.Arrays.toString(e.toDoubleArray()) + " got " + java.util.Arrays.toString(x.toDoubleArray()));
            }
        }
    }

    @Test
    void allReduceEveryDTypeAndOp() {
        int size = 3;
        run(size, (b, rank) -> {
            for (int n : new int[] {37, 301}) {
            for (DType t : DType.values()) {
                for (ReduceOp op : ReduceOp.values()) {
                    if (t == DType.BOOL && op == ReduceOp.AVG) {
                        continue;
                    }
                    Tensor x = filled(t, rank, n);
                    b.allReduce(x, op, d());
                    assertSameValues(expected(t, op, size, n), x, t + " " + op + " n=" + n);
                }
            }
            }
        });
    }

    @Test
    void halfPrecisionReducesInFloat() {
        // 2048 + 1 + 1 in f16: pairwise f16 additions would round 2049 down to 2048 twice; a float
        // accumulator gives 2050 exactly.
        run(3, (b, rank) -> {
            for (DType t : new DType[] {DType.F16, DType.BF16}) {
                Tensor x = Tensor.allocate(t, 2);
                double big = t == DType.F16 ? 2048 : 256;
                x.setDouble(0, rank == 0 ? big : 1);
                x.setDouble(1, 0.1 * (rank + 1));
                b.allReduce(x, ReduceOp.SUM, d());
                float sum1 = 0;
                for (int r = 0; r < 3; r++) {
                    sum1 += t == DType.F16 ? HalfFloats.f16ToFloat(HalfFloats.floatToF16((float) (0.1 * (r + 1))))
                            : HalfFloats.bf16ToFloat(HalfFloats.floatToBf16((float) (0.1 * (r + 1))));
                }
                assertEquals(big + 2, x.getDouble(0), t.toString());
                short bits = x.buffer().getShort(2);
                short want = t == DType.F16 ? HalfFloats.floatToF16(sum1) : HalfFloats.floatToBf16(sum1);
                assertEquals(want, bits, t + " rounding of " + sum1);
            }
        });
    }

    @Test
    void largeAllReduceSpansManySegments() {
        int n = 600_001; // 2.4 MB of f32: several of gloo's 1 MiB ring segments
        run(2, (b, rank) -> {
            Tensor x = Tensor.allocate(DType.F32, n);
            for (int i = 0; i < n; i++) {
                x.setDouble(i, (i % 1000) * (rank + 1));
            }
            b.allReduce(x, ReduceOp.SUM, d());
            for (int i = 0; i < n; i += 997) {
                assertEquals((i % 1000) * 3.0, x.getDouble(i), "element " + i);
            }
            assertEquals(((n - 1) % 1000) * 3.0, x.getDouble(n - 1));
        });
    }

    @Test
    void broadcastEveryDTypeFromEveryRoot() {
        int size = 3;
        run(size, (b, rank) -> {
            for (int n : new int[] {29, 1500}) {
                for (DType t : DType.values()) {
                    for (int root = 0; root < size; root++) {
                        Tensor x = rank == root ? filled(t, root, n) : Tensor.allocate(t, n);
                        b.broadcast(x, root, d());
                        assertTrue(filled(t, root, n).contentEquals(x), t + " from " + root + " n=" + n);
                    }
                }
            }
        });
    }

    @Test
    void allGatherAndAllGatherV() {
        int size = 3;
        run(size, (b, rank) -> {
            for (int n : new int[] {5, 700}) {
                for (DType t : DType.values()) {
                    Tensor in = filled(t, rank, n);
                    Tensor out = Tensor.allocate(t, (long) n * size);
                    b.allGather(out, in, d());
                    for (int r = 0; r < size; r++) {
                        assertTrue(filled(t, r, n).contentEquals(out.flatSlice((long) n * r, n)), t + " part " + r);
                    }
                }
            }
            long[] counts = {3, 0, 6};
            Tensor in = filled(DType.I64, rank, (int) counts[rank]);
            Tensor out = Tensor.allocate(DType.I64, 9);
            b.allGatherV(out, in, counts, d());
            assertTrue(filled(DType.I64, 0, 3).contentEquals(out.flatSlice(0, 3)));
            assertTrue(filled(DType.I64, 2, 6).contentEquals(out.flatSlice(3, 6)));
        });
    }

    @Test
    void gatherAndScatter() {
        int size = 3;
        run(size, (b, rank) -> {
            for (int n : new int[] {4, 400}) {
                for (int root = 0; root < size; root++) {
                    Tensor in = filled(DType.F64, rank, n);
                    Tensor out = rank == root ? Tensor.allocate(DType.F64, 3L * n) : null;
                    b.gather(out, in, root, d());
                    if (rank == root) {
                        for (int r = 0; r < size; r++) {
                            assertTrue(filled(DType.F64, r, n).contentEquals(out.flatSlice((long) n * r, n)), "part " + r);
                        }
                    }
                    Tensor all = rank == root ? filled(DType.I32, root, 3 * n) : null;
                    Tensor mine = Tensor.allocate(DType.I32, n);
                    b.scatter(mine, all, root, d());
                    assertTrue(filled(DType.I32, root, 3 * n).flatSlice((long) n * rank, n).contentEquals(mine),
                            "root " + root + " n=" + n);
                }
            }
        });
    }

    @Test
    void reduceScatterEveryOp() {
        int size = 3;
        run(size, (b, rank) -> {
            for (int chunk : new int[] {7, 200}) {
            for (DType t : new DType[] {DType.F32, DType.I64, DType.BF16, DType.U8}) {
                for (ReduceOp op : ReduceOp.values()) {
                    Tensor in = filled(t, rank, chunk * size);
                    Tensor before = Tensor.allocate(t, chunk * size);
                    before.copyFrom(in);
                    Tensor out = Tensor.allocate(t, chunk);
                    b.reduceScatter(out, in, op, d());
                    Tensor e = expected(t, op, size, chunk * size).flatSlice((long) chunk * rank, chunk);
                    assertSameValues(e, out, t + " " + op + " chunk=" + chunk);
                    assertTrue(before.contentEquals(in), "input unchanged");
                }
            }
            }
        });
    }

    @Test
    void sendRecvWithTagsAndEmptyMessages() {
        run(3, (b, rank) -> {
            int next = (rank + 1) % 3;
            int prev = (rank + 2) % 3;
            byte[] payload = new byte[100_000];
            ThreadLocalRandom.current().nextBytes(payload);
            Tensor out = Tensor.ofBytes(payload);
            Tensor in = Tensor.allocate(DType.U8, payload.length);
            int tagBefore = b.nextTag();
            // gloo's send completes when the receiver has posted its receive (like torch's blocking
            // dist.send), so a ring exchange must not start with a send on every rank.
            Tensor small = Tensor.ofLongs(rank, 42);
            Tensor smallIn = Tensor.allocate(DType.I64, 2);
            Tensor empty = Tensor.allocate(DType.F32, 0);
            if (rank == 0) {
                b.send(small, next, 9, d());
                b.send(out, next, 7, d());
                b.send(empty, next, 3, d());
                b.recv(smallIn, prev, 9, d());
                b.recv(in, prev, 7, d());
                b.recv(Tensor.allocate(DType.F32, 0), prev, 3, d());
            } else {
                b.recv(smallIn, prev, 9, d());
                b.recv(in, prev, 7, d());
                b.recv(Tensor.allocate(DType.F32, 0), prev, 3, d());
                b.send(small, next, 9, d());
                b.send(out, next, 7, d());
                b.send(empty, next, 3, d());
            }
            assertArrayEquals(new long[] {prev, 42}, smallIn.toLongArray());
            assertEquals(tagBefore, b.nextTag(), "send/recv do not advance the collective counter");
            // What came from prev is prev's random payload: check it by sending it back.
            Tensor back = Tensor.allocate(DType.U8, payload.length);
            if (rank == 0) {
                b.send(in, prev, 11, d());
                b.recv(back, next, 11, d());
            } else {
                b.recv(back, next, 11, d());
                b.send(in, prev, 11, d());
            }
            assertArrayEquals(payload, back.toByteArray());
            // Negative tags (the group's internal ones) are slots too.
            Tensor neg = Tensor.ofInts(rank);
            if (rank == 0) {
                b.send(neg, 1, -1, d());
            } else if (rank == 1) {
                b.recv(neg, 0, -1, d());
                assertEquals(0, neg.getLong(0));
            }
        });
    }

    @Test
    void sendsAreBufferedSoNoOrderDeadlocks() {
        run(3, (b, rank) -> {
            int next = (rank + 1) % 3;
            int prev = (rank + 2) % 3;
            // every rank sends first
            Tensor out = Tensor.ofLongs(rank, 100 + rank);
            b.send(out, next, 1, d());
            out.fill(-1); // the payload was copied: changing the tensor now is harmless
            Tensor in = Tensor.allocate(DType.I64, 2);
            b.recv(in, prev, 1, d());
            assertArrayEquals(new long[] {prev, 100 + prev}, in.toLongArray());
            // tags received in the opposite order
            if (rank == 0) {
                b.send(Tensor.ofInts(1, 1, 1), 1, 11, d());
                b.send(Tensor.ofInts(2, 2), 1, 12, d());
            } else if (rank == 1) {
                Tensor two = Tensor.allocate(DType.I32, 2);
                b.recv(two, 0, 12, d());
                Tensor one = Tensor.allocate(DType.I32, 3);
                b.recv(one, 0, 11, d());
                assertArrayEquals(new long[] {2, 2}, two.toLongArray());
                assertArrayEquals(new long[] {1, 1, 1}, one.toLongArray());
            }
            // a send before a collective that the receiver enters first
            if (rank == 0) {
                b.send(Tensor.ofLongs(42), 2, 3, d());
            }
            Tensor x = Tensor.ofLongs(rank + 1);
            b.allReduce(x, ReduceOp.SUM, d());
            assertEquals(6, x.getLong(0));
            if (rank == 2) {
                Tensor y = Tensor.allocate(DType.I64, 1);
                b.recv(y, 0, 3, d());
                assertEquals(42, y.getLong(0));
            }
            // a last send right before close is still delivered (close waits for it)
            if (rank == 1) {
                b.send(Tensor.ofFloats(7.5f), 0, 99, d());
            } else if (rank == 0) {
                Thread.sleep(200);
                Tensor z = Tensor.allocate(DType.F32, 1);
                b.recv(z, 1, 99, d());
                assertEquals(7.5, z.getDouble(0));
            }
        });
    }

    @Test
    void tagsFollowTorchCounterAcrossTwoDevices() {
        ThreadRanks.run(2, Map.of(GlooBackend.DEVICES_OPTION, "2"), Duration.ofSeconds(60), (b, rank) -> {
            assertEquals(2, b.devices());
            assertEquals(2, b.deviceNames().size());
            assertEquals(0, b.nextTag());
            b.barrier(d());
            assertEquals(1, b.nextTag());
            for (int k = 0; k < 6; k++) {
                Tensor x = Tensor.ofInts(k, rank);
                b.allReduce(x, ReduceOp.MAX, d());
                assertArrayEquals(new long[] {k, 1}, x.toLongArray());
                Tensor y = Tensor.ofLongs(rank == 0 ? 77 + k : -1);
                b.broadcast(y, 0, d());
                assertEquals(77 + k, y.getLong(0));
            }
            assertEquals(13, b.nextTag());
            Tensor m = Tensor.ofInts(rank);
            if (rank == 0) {
                b.send(m, 1, 5, d());
            } else {
                b.recv(m, 0, 5, d());
                assertEquals(0, m.getLong(0));
            }
            assertEquals(13, b.nextTag());
        });
    }

    @Test
    void worksWithoutTheArgumentCheck() {
        ThreadRanks.run(3, Map.of(GlooBackend.CHECK_ARGS_OPTION, "false"), Duration.ofSeconds(60), (b, rank) -> {
            assertTrue(!b.checksArguments());
            b.barrier(d());
            Tensor x = filled(DType.I32, rank, 10);
            b.allReduce(x, ReduceOp.SUM, d());
            assertTrue(expected(DType.I32, ReduceOp.SUM, 3, 10).contentEquals(x));
            Tensor out = Tensor.allocate(DType.I32, 30);
            b.allGather(out, filled(DType.I32, rank, 10), d());
            assertTrue(filled(DType.I32, 2, 10).contentEquals(out.flatSlice(20, 10)));
            if (rank == 0) {
                b.send(Tensor.ofFloats(1.5f), 2, 1, d());
            } else if (rank == 2) {
                Tensor r = Tensor.allocate(DType.F32, 1);
                b.recv(r, 0, 1, d());
                assertEquals(1.5, r.getDouble(0));
            }
        });
    }
}
