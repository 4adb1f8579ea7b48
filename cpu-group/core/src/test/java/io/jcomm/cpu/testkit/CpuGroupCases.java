package io.jcomm.cpu.testkit;

import io.jcomm.api.DType;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.P2POp;
import io.jcomm.api.work.Work;
import io.jcomm.cpu.codec.ForyCodec;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * The conformance cases every CPU backend must pass: each case runs on every rank of a group (the
 * same calls in the same order) and checks exact results, throwing {@link AssertionError} otherwise.
 * Used by the threads-as-ranks tests and by the multi-JVM worker ({@link CaseWorker}).
 */
public final class CpuGroupCases {

    /** Sizes in bytes that take the ring/pipelined paths and the shared-memory path. */
    public static final long MIB = 1 << 20;

    /** A registered type for the object cases. */
    public record Meta(String key, long[] shape, int dtype, List<String> tags) {
        @Override
        public boolean equals(Object o) {
            return o instanceof Meta m && key.equals(m.key) && Arrays.equals(shape, m.shape) && dtype == m.dtype
                    && Objects.equals(tags, m.tags);
        }

        @Override
        public int hashCode() {
            return key.hashCode();
        }
    }

    /** The codec every rank of a conformance run uses. */
    public static ForyCodec codec() {
        return ForyCodec.builder().register(Meta.class).build();
    }

    /** A case body, run on every rank. */
    @FunctionalInterface
    public interface Body {
        void run(ProcessGroup g) throws Exception;
    }

    /** A named case. */
    public record Case(String name, Body body) {
        @Override
        public String toString() {
            return name;
        }
    }

    private CpuGroupCases() {
    }

    /**
     * Every case, in a fixed order (the same on every rank). {@code big} adds the 16 MiB cases.
     */
    public static List<Case> all(boolean big) {
        List<Case> cs = new ArrayList<>();
        cs.add(new Case("barrier", g -> {
            for (int i = 0; i < 3; i++) {
                g.barrier();
            }
        }));
        // broadcast
        for (DType t : new DType[] {DType.F32, DType.I64, DType.U8, DType.BF16, DType.BOOL}) {
            for (long n : new long[] {0, 1, 1001}) {
                cs.add(new Case("broadcast-" + t.shortName() + "-" + n, g -> broadcast(g, t, n, g.size() - 1)));
            }
        }
        cs.add(new Case("broadcast-f32-1MiB", g -> broadcast(g, DType.F32, MIB / 4, 0)));
        cs.add(new Case("broadcast-i8-1MiB+3-root1", g -> broadcast(g, DType.I8, MIB + 3, 1)));
        // all-reduce: every dtype x every op on the direct path
        for (DType t : DType.values()) {
            for (ReduceOp op : ReduceOp.values()) {
                if (t == DType.BOOL && op == ReduceOp.AVG) {
                    continue;
                }
                cs.add(new Case("allReduce-" + t.shortName() + "-" + op + "-1001", g -> allReduce(g, t, op, 1001)));
            }
        }
        for (long n : new long[] {0, 1}) {
            cs.add(new Case("allReduce-f32-SUM-" + n, g -> allReduce(g, DType.F32, ReduceOp.SUM, n)));
        }
        // ring path
        for (DType t : new DType[] {DType.F32, DType.I32, DType.F64}) {
            for (ReduceOp op : ReduceOp.values()) {
                cs.add(new Case("allReduce-" + t.shortName() + "-" + op + "-1MiB", g -> allReduce(g, t, op, MIB / t.byteSize())));
            }
        }
        for (DType t : new DType[] {DType.F16, DType.BF16, DType.I8, DType.U8}) {
            cs.add(new Case("allReduce-" + t.shortName() + "-SUM-1MiB+odd", g -> allReduce(g, t, ReduceOp.SUM, MIB / t.byteSize() + 7)));
        }
        cs.add(new Case("allReduce-bf16-AVG-1MiB", g -> allReduce(g, DType.BF16, ReduceOp.AVG, MIB / 2)));
        cs.add(new Case("allReduce-f32-SUM-odd-100003", g -> allReduce(g, DType.F32, ReduceOp.SUM, 100_003)));
        if (big) {
            cs.add(new Case("allReduce-f32-SUM-16MiB", g -> allReduce(g, DType.F32, ReduceOp.SUM, 16 * MIB / 4)));
            cs.add(new Case("broadcast-f32-16MiB", g -> broadcast(g, DType.F32, 16 * MIB / 4, 0)));
            cs.add(new Case("allGather-f32-16MiB-total", g -> allGather(g, DType.F32, 16 * MIB / 4 / g.size())));
        }
        // all-gather
        for (long n : new long[] {0, 1, 1001, MIB / 4}) {
            cs.add(new Case("allGather-f32-" + n, g -> allGather(g, DType.F32, n)));
        }
        cs.add(new Case("allGather-i8-1001", g -> allGather(g, DType.I8, 1001)));
        cs.add(new Case("allGather-f16-odd-300001", g -> allGather(g, DType.F16, 300_001)));
        cs.add(new Case("allGatherV-small", g -> allGatherV(g, DType.I32, 100)));
        cs.add(new Case("allGatherV-large", g -> allGatherV(g, DType.F32, MIB / 4)));
        // all-to-all (n elements per pair)
        for (long n : new long[] {0, 1, 1001}) {
            cs.add(new Case("allToAll-f32-" + n + "-per-pair", g -> allToAll(g, DType.F32, n, false)));
        }
        cs.add(new Case("allToAll-i8-333-per-pair", g -> allToAll(g, DType.I8, 333, false)));
        cs.add(new Case("allToAll-bf16-1MiB-per-pair", g -> allToAll(g, DType.BF16, MIB / 2, false)));
        cs.add(new Case("allToAll-i64-async", g -> allToAll(g, DType.I64, 257, true)));
        cs.add(new Case("allToAllV-uneven-with-zeros", g -> allToAllV(g, DType.I32, 50, false)));
        cs.add(new Case("allToAllV-large", g -> allToAllV(g, DType.F32, MIB / 4, false)));
        cs.add(new Case("allToAllV-f16-async", g -> allToAllV(g, DType.F16, 100, true)));
        cs.add(new Case("allToAllV-all-zero", g -> allToAllV(g, DType.F32, -1, false)));
        if (big) {
            cs.add(new Case("allToAll-f32-16MiB-total", g -> allToAll(g, DType.F32, 16 * MIB / 4 / g.size() / g.size(),
                    false)));
        }
        // gather / scatter
        for (long n : new long[] {0, 1, 1001, MIB / 4}) {
            cs.add(new Case("gather-f32-" + n, g -> gather(g, DType.F32, n, 0)));
            cs.add(new Case("scatter-f32-" + n, g -> scatter(g, DType.F32, n, g.size() - 1)));
        }
        cs.add(new Case("gather-i64-17-lastRoot", g -> gather(g, DType.I64, 17, g.size() - 1)));
        cs.add(new Case("scatter-u8-33-root0", g -> scatter(g, DType.U8, 33, 0)));
        // reduce-scatter
        for (DType t : new DType[] {DType.F32, DType.I32, DType.BF16}) {
            for (ReduceOp op : new ReduceOp[] {ReduceOp.SUM, ReduceOp.MAX, ReduceOp.AVG, ReduceOp.PROD}) {
                for (long n : new long[] {1, 1001}) {
                    cs.add(new Case("reduceScatter-" + t.shortName() + "-" + op + "-" + n, g -> reduceScatter(g, t, op, n)));
                }
            }
        }
        cs.add(new Case("reduceScatter-f32-SUM-1MiB-per-rank", g -> reduceScatter(g, DType.F32, ReduceOp.SUM, MIB / 4)));
        cs.add(new Case("reduceScatter-i64-MIN-1MiB-per-rank", g -> reduceScatter(g, DType.I64, ReduceOp.MIN, MIB / 8 + 1)));
        cs.add(new Case("reduceScatter-f16-AVG-0", g -> reduceScatter(g, DType.F16, ReduceOp.AVG, 0)));
        // point to point
        for (long n : new long[] {0, 1, 1001, MIB / 4}) {
            cs.add(new Case("sendRecv-ring-f32-" + n, g -> sendRecvRing(g, DType.F32, n)));
        }
        cs.add(new Case("sendRecv-tags-out-of-order", CpuGroupCases::sendRecvTags));
        cs.add(new Case("batchIsendIrecv-ring-both-ways-1001", g -> batchRing(g, DType.F32, 1001)));
        cs.add(new Case("batchIsendIrecv-ring-both-ways-6MiB", g -> batchRing(g, DType.I32, 6 * MIB / 4)));
        cs.add(new Case("sendRecv-interleaved-with-collectives", CpuGroupCases::interleaved));
        // objects
        cs.add(new Case("broadcastObject", CpuGroupCases::broadcastObject));
        cs.add(new Case("broadcastObject-large", CpuGroupCases::broadcastObjectLarge));
        cs.add(new Case("allGatherObject", CpuGroupCases::allGatherObject));
        cs.add(new Case("gatherObject", CpuGroupCases::gatherObject));
        cs.add(new Case("sendRecvObject", CpuGroupCases::sendRecvObject));
        // asynchronous
        cs.add(new Case("async-ordering", CpuGroupCases::asyncOrdering));
        cs.add(new Case("barrier-after-all", g -> g.barrier()));
        return cs;
    }

    private static void check(boolean ok, String msg) {
        if (!ok) {
            throw new AssertionError(msg);
        }
    }

    // ---------------------------------------------------------------- tensor cases

    static void broadcast(ProcessGroup g, DType t, long n, int src) {
        Tensor x = g.rank() == src ? Values.moveTensor(t, n, src, 1) : Tensor.allocate(t, n);
        g.broadcast(x, src);
        Values.assertAll(x, i -> Values.moveInput(t, src, i, 1), "broadcast from " + src);
    }

    static void allReduce(ProcessGroup g, DType t, ReduceOp op, long n) {
        int salt = op.ordinal() + t.ordinal();
        Tensor x = Values.reduceTensor(t, n, g.rank(), salt);
        g.allReduce(x, op);
        Values.assertAll(x, i -> Values.reduceExpected(t, op, g.size(), i, salt), "allReduce " + op);
    }

    static void allGather(ProcessGroup g, DType t, long n) {
        Tensor in = Values.moveTensor(t, n, g.rank(), 2);
        Tensor out = Tensor.allocate(t, n * g.size());
        g.allGather(out, in);
        for (int r = 0; r < g.size(); r++) {
            int rr = r;
            Values.assertAll(out.flatSlice(r * n, n), i -> Values.moveInput(t, rr, i, 2), "allGather part " + r);
        }
    }

    static void allGatherV(ProcessGroup g, DType t, long base) {
        long[] counts = new long[g.size()];
        for (int r = 0; r < counts.length; r++) {
            counts[r] = r == 1 ? 0 : base + 3L * r; // one rank contributes nothing
        }
        Tensor in = Values.moveTensor(t, counts[g.rank()], g.rank(), 3);
        Tensor out = Tensor.allocate(t, Arrays.stream(counts).sum());
        g.allGatherV(out, in, counts);
        long off = 0;
        for (int r = 0; r < counts.length; r++) {
            int rr = r;
            Values.assertAll(out.flatSlice(off, counts[r]), i -> Values.moveInput(t, rr, i, 3), "allGatherV part " + r);
            off += counts[r];
        }
    }

    /** Element {@code i} of what rank {@code src} sends rank {@code dst} in the all-to-all cases. */
    private static long a2a(DType t, int src, int dst, long i, int salt) {
        return Values.moveInput(t, src * 16 + dst, i, salt);
    }

    static void allToAll(ProcessGroup g, DType t, long n, boolean async) {
        int size = g.size();
        int me = g.rank();
        Tensor in = Tensor.allocate(t, n * size);
        for (int d = 0; d < size; d++) {
            int dd = d;
            Values.fill(in, d * n, n, i -> a2a(t, me, dd, i, 5));
        }
        Tensor out = Tensor.allocate(t, n * size);
        if (async) {
            g.allToAllAsync(out, in, g.defaultTimeout()).await();
        } else {
            g.allToAll(out, in);
        }
        for (int s = 0; s < size; s++) {
            int ss = s;
            Values.assertAll(out.flatSlice(s * n, n), i -> a2a(t, ss, me, i, 5), "allToAll part from rank " + s);
        }
    }

    /** What rank {@code s} sends rank {@code d}: zero for some pairs (never to itself), uneven otherwise; all zero for base -1. */
    private static long a2aCount(int s, int d, long base) {
        if (base < 0) {
            return 0;
        }
        return (s + 2 * d + 1) % 3 == 0 ? 0 : base + 7L * s + 3L * d;
    }

    static void allToAllV(ProcessGroup g, DType t, long base, boolean async) {
        int size = g.size();
        int me = g.rank();
        long[] inCounts = new long[size];
        long[] outCounts = new long[size];
        for (int r = 0; r < size; r++) {
            inCounts[r] = a2aCount(me, r, base);
            outCounts[r] = a2aCount(r, me, base);
        }
        Tensor in = Tensor.allocate(t, Arrays.stream(inCounts).sum());
        long off = 0;
        for (int d = 0; d < size; d++) {
            int dd = d;
            Values.fill(in, off, inCounts[d], i -> a2a(t, me, dd, i, 6));
            off += inCounts[d];
        }
        Tensor out = Tensor.allocate(t, Arrays.stream(outCounts).sum());
        if (async) {
            g.allToAllVAsync(out, in, outCounts, inCounts, g.defaultTimeout()).await();
        } else {
            g.allToAllV(out, in, outCounts, inCounts);
        }
        off = 0;
        for (int s = 0; s < size; s++) {
            int ss = s;
            Values.assertAll(out.flatSlice(off, outCounts[s]), i -> a2a(t, ss, me, i, 6), "allToAllV part from rank " + s);
            off += outCounts[s];
        }
    }

    /**
     * One batch per rank: a send to the next and to the previous rank, a receive from each (in that
     * order everywhere, so that at N=2 the two messages between the pair match in order). Larger than
     * the tcp credit, so that a backend that ran the batch in order would deadlock.
     */
    static void batchRing(ProcessGroup g, DType t, long n) {
        int size = g.size();
        int me = g.rank();
        int next = (me + 1) % size;
        int prev = (me + size - 1) % size;
        Tensor toNext = Values.moveTensor(t, n, me * 4 + 1, 7);
        Tensor toPrev = Values.moveTensor(t, n, me * 4 + 2, 7);
        Tensor fromPrev = Tensor.allocate(t, n);
        Tensor fromNext = Tensor.allocate(t, n);
        g.batchIsendIrecv(List.of(P2POp.send(toNext, next), P2POp.send(toPrev, prev),
                P2POp.recv(fromPrev, prev), P2POp.recv(fromNext, next))).await();
        Values.assertAll(fromPrev, i -> Values.moveInput(t, prev * 4 + 1, i, 7), "batch: from the previous rank");
        Values.assertAll(fromNext, i -> Values.moveInput(t, next * 4 + 2, i, 7), "batch: from the next rank");
    }

    static void gather(ProcessGroup g, DType t, long n, int dst) {
        Tensor in = Values.moveTensor(t, n, g.rank(), 4);
        Tensor out = g.rank() == dst ? Tensor.allocate(t, n * g.size()) : null;
        g.gather(out, in, dst);
        if (g.rank() == dst) {
            for (int r = 0; r < g.size(); r++) {
                int rr = r;
                Values.assertAll(out.flatSlice(r * n, n), i -> Values.moveInput(t, rr, i, 4), "gather part " + r);
            }
        }
    }

    static void scatter(ProcessGroup g, DType t, long n, int src) {
        Tensor in = null;
        if (g.rank() == src) {
            in = Tensor.allocate(t, n * g.size());
            for (int r = 0; r < g.size(); r++) {
                int rr = r;
                Values.fill(in, r * n, n, i -> Values.moveInput(t, rr, i, 5));
            }
        }
        Tensor out = Tensor.allocate(t, n);
        g.scatter(out, in, src);
        Values.assertAll(out, i -> Values.moveInput(t, g.rank(), i, 5), "scatter part");
    }

    static void reduceScatter(ProcessGroup g, DType t, ReduceOp op, long n) {
        int salt = 11 + op.ordinal();
        Tensor in = Values.reduceTensor(t, n * g.size(), g.rank(), salt);
        Tensor out = Tensor.allocate(t, n);
        g.reduceScatter(out, in, op);
        long base = g.rank() * n;
        Values.assertAll(out, i -> Values.reduceExpected(t, op, g.size(), base + i, salt), "reduceScatter " + op);
    }

    static void sendRecvRing(ProcessGroup g, DType t, long n) {
        int next = (g.rank() + 1) % g.size();
        int prev = (g.rank() + g.size() - 1) % g.size();
        Tensor out = Values.moveTensor(t, n, g.rank(), 6);
        Tensor in = Tensor.allocate(t, n);
        if (g.rank() % 2 == 0) {
            g.send(out, next, 7);
            g.recv(in, prev, 7);
        } else {
            g.recv(in, prev, 7);
            g.send(out, next, 7);
        }
        Values.assertAll(in, i -> Values.moveInput(t, prev, i, 6), "recv from " + prev);
    }

    static void sendRecvTags(ProcessGroup g) {
        // rank 0 sends tags 1, 2 to rank 1, which receives them in the opposite order
        if (g.rank() == 0) {
            g.send(Tensor.ofInts(1, 1, 1), 1, 1);
            g.send(Tensor.ofInts(2, 2), 1, 2);
        } else if (g.rank() == 1) {
            Tensor b = Tensor.allocate(DType.I32, 2);
            g.recv(b, 0, 2);
            Tensor a = Tensor.allocate(DType.I32, 3);
            g.recv(a, 0, 1);
            check(Arrays.equals(b.toLongArray(), new long[] {2, 2}), "tag 2 payload " + Arrays.toString(b.toLongArray()));
            check(Arrays.equals(a.toLongArray(), new long[] {1, 1, 1}), "tag 1 payload " + Arrays.toString(a.toLongArray()));
        }
        g.barrier();
    }

    static void interleaved(ProcessGroup g) {
        // rank 0 sends to the last rank before a collective that the receiver enters first
        int last = g.size() - 1;
        if (g.rank() == 0) {
            g.send(Tensor.ofLongs(42, 43), last, 3);
        }
        Tensor x = Tensor.ofLongs(g.rank() + 1);
        g.allReduce(x, ReduceOp.SUM);
        check(x.getLong(0) == (long) g.size() * (g.size() + 1) / 2, "allReduce after send: " + x.getLong(0));
        if (g.rank() == last) {
            Tensor y = Tensor.allocate(DType.I64, 2);
            g.recv(y, 0, 3);
            check(y.getLong(0) == 42 && y.getLong(1) == 43, "interleaved recv " + Arrays.toString(y.toLongArray()));
        }
        g.barrier();
    }

    // ---------------------------------------------------------------- objects

    static Meta meta(int r) {
        return new Meta("layer." + r, new long[] {r, 2, 3}, r % 3, List.of("t" + r, "x"));
    }

    static void broadcastObject(ProcessGroup g) {
        for (int src = 0; src < g.size(); src++) {
            Meta m = g.broadcastObject(g.rank() == src ? meta(src) : null, src, Meta.class);
            check(meta(src).equals(m), "broadcastObject from " + src + ": " + m);
        }
        String s = g.broadcastObject(g.rank() == 0 ? "hello" : null, 0, String.class);
        check("hello".equals(s), "string " + s);
        Object nul = g.broadcastObject(null, 0, Object.class);
        check(nul == null, "null broadcast gave " + nul);
    }

    static void broadcastObjectLarge(ProcessGroup g) {
        String big = g.rank() == 1 % g.size() ? "z".repeat(1_500_000) : null;
        String got = g.broadcastObject(big, 1 % g.size(), String.class);
        check(got != null && got.length() == 1_500_000 && got.charAt(1_499_999) == 'z', "large object");
    }

    static void allGatherObject(ProcessGroup g) {
        List<Meta> all = g.allGatherObject(meta(g.rank()), Meta.class);
        check(all.size() == g.size(), "size " + all.size());
        for (int r = 0; r < g.size(); r++) {
            check(meta(r).equals(all.get(r)), "allGatherObject[" + r + "] = " + all.get(r));
        }
        List<Integer> ints = g.allGatherObject(g.rank() * 10, Integer.class);
        for (int r = 0; r < g.size(); r++) {
            check(ints.get(r) == r * 10, "ints " + ints);
        }
    }

    static void gatherObject(ProcessGroup g) {
        int dst = g.size() - 1;
        List<Meta> all = g.gatherObject(meta(g.rank()), dst, Meta.class);
        if (g.rank() == dst) {
            for (int r = 0; r < g.size(); r++) {
                check(meta(r).equals(all.get(r)), "gatherObject[" + r + "] = " + all.get(r));
            }
        } else {
            check(all.isEmpty(), "non-destination got " + all);
        }
    }

    static void sendRecvObject(ProcessGroup g) {
        int next = (g.rank() + 1) % g.size();
        int prev = (g.rank() + g.size() - 1) % g.size();
        if (g.rank() % 2 == 0) {
            g.sendObject(meta(g.rank()), next);
            Meta m = g.recvObject(prev, Meta.class);
            check(meta(prev).equals(m), "recvObject " + m);
        } else {
            Meta m = g.recvObject(prev, Meta.class);
            check(meta(prev).equals(m), "recvObject " + m);
            g.sendObject(meta(g.rank()), next);
        }
    }

    // ---------------------------------------------------------------- async

    static void asyncOrdering(ProcessGroup g) {
        Tensor a = Values.reduceTensor(DType.F32, 1001, g.rank(), 21);
        Tensor b = Values.reduceTensor(DType.I64, MIB / 8, g.rank(), 22);
        Tensor c = g.rank() == 0 ? Values.moveTensor(DType.I32, 77, 0, 23) : Tensor.allocate(DType.I32, 77);
        Work<Void> wa = g.allReduceAsync(a, ReduceOp.SUM, g.defaultTimeout());
        Work<Void> wb = g.allReduceAsync(b, ReduceOp.MAX, g.defaultTimeout());
        Work<Void> wc = g.broadcastAsync(c, 0, g.defaultTimeout());
        // a synchronous call is ordered after the asynchronous ones
        Tensor d = Tensor.ofLongs(1);
        g.allReduce(d, ReduceOp.SUM);
        check(wa.isDone() && wb.isDone() && wc.isDone(), "sync call completed before earlier async calls");
        wa.await();
        wb.await();
        wc.await();
        wc.await(); // idempotent
        check(d.getLong(0) == g.size(), "sync result " + d.getLong(0));
        Values.assertAll(a, i -> Values.reduceExpected(DType.F32, ReduceOp.SUM, g.size(), i, 21), "async a");
        Values.assertAll(b, i -> Values.reduceExpected(DType.I64, ReduceOp.MAX, g.size(), i, 22), "async b");
        Values.assertAll(c, i -> Values.moveInput(DType.I32, 0, i, 23), "async c");
        Work<Void> wbar = g.barrierAsync(g.defaultTimeout());
        wbar.await();
        check(wbar.isSuccess(), "barrierAsync");
    }
}
