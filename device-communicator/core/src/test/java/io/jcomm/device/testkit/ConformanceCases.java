package io.jcomm.device.testkit;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.P2POp;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The conformance cases of the {@link DeviceCommunicator} SPI, run by every rank of a world in the
 * same order (threads as ranks or separate JVMs; see {@link ConformanceRunner}). Each case computes
 * its expected values independently of the implementation (explicit index arithmetic) and checks
 * real results on its own rank. Covered: every operation and reduce op, several dtypes,
 * concatenation/splitting along first, middle and last dimensions, in place and out of place,
 * point-to-point and batched point-to-point (ring, all-to-all, self), all-to-all with equal splits
 * and per-rank counts (zeros, uneven, all-zero), empty tensors, world size 1
 * (the same cases: expected values are computed for any world size), bad arguments (typed errors
 * before anything is enqueued, communicator still usable), and close.
 */
public final class ConformanceCases {

    private ConformanceCases() {
    }

    /** One rank's view while running a case. */
    public static final class Rank {
        public final DeviceCommunicator comm;
        public final DeviceMemory mem;
        public final int rank;
        public final int world;
        public final StreamHandle stream;

        /** The control plane of the communicator's members (the shrink case makes the survivors' from it), or null. */
        public final io.jcomm.api.ProcessGroup cpuGroup;

        public Rank(DeviceCommunicator comm, DeviceMemory mem) {
            this(comm, mem, null);
        }

        public Rank(DeviceCommunicator comm, DeviceMemory mem, io.jcomm.api.ProcessGroup cpuGroup) {
            this.comm = comm;
            this.mem = mem;
            this.rank = comm.rank();
            this.world = comm.worldSize();
            this.stream = mem.stream();
            this.cpuGroup = cpuGroup;
        }

        /** A device tensor whose element i (flat) is {@code f(rank, i)}. */
        public Tensor device(DType dtype, long[] shape, Value f) {
            return mem.upload(host(dtype, shape, rank, f));
        }

        /** Synchronises the stream and reads {@code t} back. */
        public Tensor read(Tensor t) {
            comm.synchronize(stream);
            return mem.read(t);
        }
    }

    /** An element value as a function of the contributing rank and the flat index. */
    @FunctionalInterface
    public interface Value {
        double at(int rank, long index);
    }

    /** A case body. */
    @FunctionalInterface
    public interface Body {
        void run(Rank r) throws Exception;
    }

    /** A named case. */
    public record Case(String name, Body body) {
    }

    /** A host tensor whose element i is {@code f(rank, i)}. */
    public static Tensor host(DType dtype, long[] shape, int rank, Value f) {
        Tensor t = Tensor.allocate(dtype, shape);
        for (long i = 0; i < t.numel(); i++) {
            t.setDouble(i, f.at(rank, i));
        }
        return t;
    }

    // ---- expected-value arithmetic, independent of DimLayout ----

    private static long[] unravel(long flat, long[] shape) {
        long[] idx = new long[shape.length];
        for (int d = shape.length - 1; d >= 0; d--) {
            idx[d] = shape[d] == 0 ? 0 : flat % shape[d];
            flat = shape[d] == 0 ? 0 : flat / shape[d];
        }
        return idx;
    }

    private static long ravel(long[] idx, long[] shape) {
        long flat = 0;
        for (int d = 0; d < shape.length; d++) {
            flat = flat * shape[d] + idx[d];
        }
        return flat;
    }

    /** Expected element {@code flat} of the concatenation along {@code dim} of every rank's {@code f}-filled piece. */
    static double concatValue(long flat, long[] pieceShape, int dim, int world, Value f) {
        long[] whole = pieceShape.clone();
        whole[dim] *= world;
        long[] idx = unravel(flat, whole);
        int src = (int) (idx[dim] / pieceShape[dim]);
        idx[dim] %= pieceShape[dim];
        return f.at(src, ravel(idx, pieceShape));
    }

    /** Expected element {@code flat} of rank {@code rank}'s reduce-scatter output along {@code dim}. */
    static double splitValue(long flat, long[] outShape, int dim, int rank, int world, Value f, ReduceOp op, DType dtype) {
        long[] idx = unravel(flat, outShape);
        long[] inShape = outShape.clone();
        inShape[dim] *= world;
        idx[dim] += rank * outShape[dim];
        long in = ravel(idx, inShape);
        return reduceAt(in, world, f, op, dtype);
    }

    /** Expected reduction over ranks of {@code f(r, i)}, in the reference semantics of {@link HostReduce}. */
    static double reduceAt(long i, int world, Value f, ReduceOp op, DType dtype) {
        List<byte[]> parts = new ArrayList<>();
        for (int r = 0; r < world; r++) {
            Tensor t = Tensor.allocate(dtype, 1);
            t.setDouble(0, f.at(r, i));
            parts.add(t.toByteArray());
        }
        return HostReduce.view(HostReduce.reduce(dtype, op, parts, 1), dtype, 1).getDouble(0);
    }

    /**
     * Checks every element: integer and bool types exactly, floating types to a relative 1e-6 (the
     * cases use values whose results are exact except for averages, where a library may multiply by
     * 1/n instead of dividing).
     */
    static void check(String what, Tensor actual, Expected e) {
        boolean exact = !actual.dtype().isFloatingPoint();
        for (long i = 0; i < actual.numel(); i++) {
            double want = e.at(i);
            double got = actual.getDouble(i);
            boolean ok = exact ? want == got : Math.abs(want - got) <= 1e-6 * Math.max(1.0, Math.abs(want));
            if (!ok) {
                throw new AssertionError(what + ": element " + i + " of " + actual + " is " + got + ", expected " + want
                        + " (first elements: " + Arrays.toString(Arrays.copyOf(actual.toDoubleArray(),
                        (int) Math.min(12, actual.numel()))) + ")");
            }
        }
    }

    @FunctionalInterface
    interface Expected {
        double at(long i);
    }

    static <T extends Throwable> T expectThrows(Class<T> type, String what, Runnable r) {
        try {
            r.run();
        } catch (Throwable t) {
            if (type.isInstance(t)) {
                return type.cast(t);
            }
            throw new AssertionError(what + ": expected " + type.getSimpleName() + " but got " + t, t);
        }
        throw new AssertionError(what + ": expected " + type.getSimpleName() + " but nothing was thrown");
    }

    private static String label(DType t, long[] shape, int dim) {
        return t.shortName() + Arrays.toString(shape).replace(" ", "") + " dim " + dim;
    }

    // ---- the cases ----

    /** Values exact in every dtype used (small integers, distinct per rank and index). */
    static final Value SMALL = (r, i) -> (r + 1) + (i % 5);
    static final Value WIDE = (r, i) -> r * 1000 + i;

    /** Values exact in every dtype used by the all-to-all cases (0..100, distinct along a chunk). */
    static final Value A2A = (r, i) -> (r * 31 + i) % 101;

    /** How many elements rank {@code i} sends to rank {@code j} in an all-to-all-v case. */
    @FunctionalInterface
    interface Counts {
        long of(int i, int j);
    }

    /**
     * One all-to-all-v: rank i sends {@code counts.of(i, j)} elements to rank j, element q of them
     * being {@code i * 100 + j * 10 + q % 10}; checks exact values on this rank.
     */
    private static void allToAllV(Rank r, DType dt, Counts counts) {
        long[] inCounts = new long[r.world];
        long[] outCounts = new long[r.world];
        for (int p = 0; p < r.world; p++) {
            inCounts[p] = counts.of(r.rank, p);
            outCounts[p] = counts.of(p, r.rank);
        }
        long inTotal = Arrays.stream(inCounts).sum();
        long outTotal = Arrays.stream(outCounts).sum();
        Tensor host = Tensor.allocate(dt, inTotal);
        long k = 0;
        for (int j = 0; j < r.world; j++) {
            for (long q = 0; q < inCounts[j]; q++) {
                host.setDouble(k++, r.rank * 100 + j * 10 + q % 10);
            }
        }
        Tensor in = r.mem.upload(host);
        Tensor out = r.mem.allocate(dt, outTotal);
        r.comm.allToAllV(out, in, outCounts, inCounts, r.stream);
        double[] want = new double[(int) outTotal];
        k = 0;
        for (int i = 0; i < r.world; i++) {
            for (long q = 0; q < outCounts[i]; q++) {
                want[(int) k++] = i * 100 + r.rank * 10 + q % 10;
            }
        }
        check("counts in " + Arrays.toString(inCounts) + " out " + Arrays.toString(outCounts), r.read(out),
                i -> want[(int) i]);
        check("input unchanged", r.read(in), i -> host.getDouble(i));
    }

    /** All cases, in the order every rank runs them. The last one closes the communicator. */
    public static List<Case> all() {
        List<Case> cases = new ArrayList<>();
        cases.add(new Case("allReduce sum f32 out of place", r -> {
            long[] shape = {3, 250};
            Tensor in = r.device(DType.F32, shape, WIDE);
            Tensor out = r.mem.allocate(DType.F32, shape);
            r.comm.allReduce(out, in, ReduceOp.SUM, r.stream);
            check("output", r.read(out), i -> reduceAt(i, r.world, WIDE, ReduceOp.SUM, DType.F32));
            check("input unchanged", r.read(in), i -> WIDE.at(r.rank, i));
        }));
        cases.add(new Case("allReduce sum f64 in place", r -> {
            Tensor t = r.device(DType.F64, new long[] {777}, WIDE);
            r.comm.allReduce(t, t, ReduceOp.SUM, r.stream);
            check("in place", r.read(t), i -> reduceAt(i, r.world, WIDE, ReduceOp.SUM, DType.F64));
        }));
        for (DType dt : List.of(DType.F32, DType.I64, DType.I32)) {
            for (ReduceOp op : ReduceOp.values()) {
                cases.add(new Case("allReduce " + op.name().toLowerCase(Locale.ROOT) + " " + dt.shortName(), r -> {
                    Tensor in = r.device(dt, new long[] {17}, SMALL);
                    Tensor out = r.mem.allocate(dt, 17);
                    r.comm.allReduce(out, in, op, r.stream);
                    check(op + " " + dt, r.read(out), i -> reduceAt(i, r.world, SMALL, op, dt));
                }));
            }
        }
        for (DType dt : List.of(DType.F16, DType.BF16, DType.I8, DType.U8)) {
            cases.add(new Case("allReduce sum and max " + dt.shortName(), r -> {
                Tensor t = r.device(dt, new long[] {2, 9}, SMALL);
                r.comm.allReduce(t, t, ReduceOp.SUM, r.stream);
                check("sum " + dt, r.read(t), i -> reduceAt(i, r.world, SMALL, ReduceOp.SUM, dt));
                Value neg = dt == DType.U8 ? SMALL : (rk, i) -> (i % 3) - rk;
                Tensor m = r.device(dt, new long[] {9}, neg);
                r.comm.allReduce(m, m, ReduceOp.MAX, r.stream);
                check("max " + dt, r.read(m), i -> reduceAt(i, r.world, neg, ReduceOp.MAX, dt));
            }));
        }
        long[] cube = {2, 3, 4};
        for (int dim : new int[] {0, 1, 2, -1, -2}) {
            cases.add(new Case("allGather f32 " + label(DType.F32, cube, dim), r -> {
                int d = dim < 0 ? dim + cube.length : dim;
                long[] outShape = cube.clone();
                outShape[d] *= r.world;
                Tensor in = r.device(DType.F32, cube, WIDE);
                Tensor out = r.mem.allocate(DType.F32, outShape);
                r.comm.allGather(out, in, dim, r.stream);
                check("gathered", r.read(out), i -> concatValue(i, cube, d, r.world, WIDE));
            }));
        }
        cases.add(new Case("allGather 1-d i64 and bool", r -> {
            long[] s = {5};
            Tensor in = r.device(DType.I64, s, WIDE);
            Tensor out = r.mem.allocate(DType.I64, 5L * r.world);
            r.comm.allGather(out, in, 0, r.stream);
            check("i64", r.read(out), i -> concatValue(i, s, 0, r.world, WIDE));
            Value bit = (rk, i) -> (rk + i) % 2;
            Tensor bin = r.device(DType.BOOL, new long[] {2, 3}, bit);
            Tensor bout = r.mem.allocate(DType.BOOL, 2, 3L * r.world);
            r.comm.allGather(bout, bin, 1, r.stream);
            check("bool", r.read(bout), i -> concatValue(i, new long[] {2, 3}, 1, r.world, bit));
        }));
        cases.add(new Case("allGather bf16 dim 1", r -> {
            long[] s = {3, 2, 2};
            Tensor in = r.device(DType.BF16, s, SMALL);
            Tensor out = r.mem.allocate(DType.BF16, 3, 2L * r.world, 2);
            r.comm.allGather(out, in, 1, r.stream);
            check("bf16", r.read(out), i -> concatValue(i, s, 1, r.world, SMALL));
        }));
        for (int dim : new int[] {0, 1, -1}) {
            for (ReduceOp op : List.of(ReduceOp.SUM, ReduceOp.MAX)) {
                cases.add(new Case("reduceScatter " + op.name().toLowerCase(Locale.ROOT) + " f32 dim " + dim, r -> {
                    long[] outShape = {2, 3, 2};
                    int d = dim < 0 ? dim + outShape.length : dim;
                    long[] inShape = outShape.clone();
                    inShape[d] *= r.world;
                    Tensor in = r.device(DType.F32, inShape, WIDE);
                    Tensor out = r.mem.allocate(DType.F32, outShape);
                    r.comm.reduceScatter(out, in, op, dim, r.stream);
                    check("scattered", r.read(out), i -> splitValue(i, outShape, d, r.rank, r.world, WIDE, op, DType.F32));
                }));
            }
        }
        cases.add(new Case("reduceScatter avg i64 dim 0", r -> {
            long[] outShape = {4};
            Tensor in = r.device(DType.I64, new long[] {4L * r.world}, SMALL);
            Tensor out = r.mem.allocate(DType.I64, outShape);
            r.comm.reduceScatter(out, in, ReduceOp.AVG, 0, r.stream);
            check("avg", r.read(out), i -> splitValue(i, outShape, 0, r.rank, r.world, SMALL, ReduceOp.AVG, DType.I64));
        }));
        for (int dim : new int[] {0, 1}) {
            cases.add(new Case("gather to last rank f32 dim " + dim, r -> {
                long[] s = {2, 3};
                int dst = r.world - 1;
                long[] outShape = s.clone();
                outShape[dim] *= r.world;
                Tensor in = r.device(DType.F32, s, WIDE);
                Tensor out = r.rank == dst ? r.mem.allocate(DType.F32, outShape) : null;
                r.comm.gather(out, in, dst, dim, r.stream);
                r.comm.synchronize(r.stream);
                if (r.rank == dst) {
                    check("gathered", r.read(out), i -> concatValue(i, s, dim, r.world, WIDE));
                }
            }));
        }
        cases.add(new Case("gather to rank 0 with an output everywhere", r -> {
            long[] s = {4};
            Tensor in = r.device(DType.I32, s, WIDE);
            Tensor out = r.mem.allocate(DType.I32, 4L * r.world);
            r.comm.gather(out, in, 0, 0, r.stream);
            Tensor got = r.read(out);
            if (r.rank == 0) {
                check("gathered", got, i -> concatValue(i, s, 0, r.world, WIDE));
            } else {
                check("untouched on non-destination", got, i -> 0);
            }
        }));
        cases.add(new Case("broadcast from 0 and from the last rank", r -> {
            for (int src : new int[] {0, r.world - 1}) {
                Tensor t = r.device(DType.F32, new long[] {3, 7}, WIDE);
                r.comm.broadcast(t, src, r.stream);
                check("from " + src, r.read(t), i -> WIDE.at(src, i));
            }
            Tensor h = r.device(DType.F16, new long[] {6}, SMALL);
            r.comm.broadcast(h, r.world / 2, r.stream);
            check("f16", r.read(h), i -> SMALL.at(r.world / 2, i));
        }));
        cases.add(new Case("send and recv between pairs", r -> {
            int partner = (r.rank % 2 == 0) ? r.rank + 1 : r.rank - 1;
            if (partner >= r.world) {
                return;
            }
            Tensor mine = r.device(DType.F64, new long[] {33}, WIDE);
            Tensor theirs = r.mem.allocate(DType.F64, 33);
            if (r.rank % 2 == 0) {
                r.comm.send(mine, partner, r.stream);
                r.comm.recv(theirs, partner, r.stream);
            } else {
                r.comm.recv(theirs, partner, r.stream);
                r.comm.send(mine, partner, r.stream);
            }
            check("received", r.read(theirs), i -> WIDE.at(partner, i));
        }));
        cases.add(new Case("batchP2P ring", r -> {
            int next = (r.rank + 1) % r.world;
            int prev = (r.rank - 1 + r.world) % r.world;
            Tensor out = r.device(DType.F32, new long[] {4, 16}, WIDE);
            Tensor in = r.mem.allocate(DType.F32, 4, 16);
            r.comm.batchP2P(List.of(P2POp.send(out, next), P2POp.recv(in, prev)), r.stream);
            check("from previous", r.read(in), i -> WIDE.at(prev, i));
        }));
        cases.add(new Case("batchP2P all to all including self", r -> {
            List<P2POp> ops = new ArrayList<>();
            List<Tensor> recvs = new ArrayList<>();
            for (int p = 0; p < r.world; p++) {
                int peer = p;
                ops.add(P2POp.send(r.device(DType.I64, new long[] {6}, (rk, i) -> rk * 100 + peer * 10 + i), peer));
            }
            for (int p = 0; p < r.world; p++) {
                Tensor t = r.mem.allocate(DType.I64, 6);
                recvs.add(t);
                ops.add(P2POp.recv(t, p));
            }
            r.comm.batchP2P(ops, r.stream);
            for (int p = 0; p < r.world; p++) {
                int src = p;
                check("from " + p, r.read(recvs.get(p)), i -> src * 100 + r.rank * 10 + i);
            }
        }));
        cases.add(new Case("batchP2P to self only", r -> {
            Tensor a = r.device(DType.U8, new long[] {10}, SMALL);
            Tensor b = r.mem.allocate(DType.U8, 10);
            r.comm.batchP2P(List.of(P2POp.recv(b, r.rank), P2POp.send(a, r.rank)), r.stream);
            check("self", r.read(b), i -> SMALL.at(r.rank, i));
        }));
        for (DType dt : List.of(DType.F32, DType.I64, DType.BF16, DType.I8, DType.BOOL)) {
            cases.add(new Case("allToAll equal splits " + dt.shortName(), r -> {
                // chunk j of rank i's input goes to rank j; element q of it is a2a(i, j * chunk + q)
                long chunk = dt == DType.F32 ? 6 : 5;
                long[] shape = dt == DType.F32 ? new long[] {r.world, 2, 3} : new long[] {chunk * r.world};
                Value v = dt == DType.BOOL ? (rk, i) -> (rk + i) % 2 : A2A;
                Tensor in = r.device(dt, shape, v);
                Tensor out = r.mem.allocate(dt, shape);
                r.comm.allToAll(out, in, r.stream);
                check("exchanged", r.read(out), i -> v.at((int) (i / chunk), r.rank * chunk + i % chunk));
                check("input unchanged", r.read(in), i -> v.at(r.rank, i));
            }));
        }
        cases.add(new Case("allToAll zero elements", r -> {
            r.comm.allToAll(r.mem.allocate(DType.F32, 0), r.mem.allocate(DType.F32, 0), r.stream);
            r.comm.allToAll(r.mem.allocate(DType.I32, 4, 0), r.mem.allocate(DType.I32, 0, 4), r.stream);
            r.comm.synchronize(r.stream);
        }));
        cases.add(new Case("allToAllV uneven with zeros i64", r -> allToAllV(r, DType.I64, (i, j) -> (2 * i + j + 1) % 4)));
        cases.add(new Case("allToAllV uneven with zeros f32", r -> allToAllV(r, DType.F32, (i, j) -> (i + 2 * j) % 3)));
        cases.add(new Case("allToAllV everything to rank 0", r -> allToAllV(r, DType.I32, (i, j) -> j == 0 ? i + 2 : 0)));
        cases.add(new Case("allToAllV all zero", r -> allToAllV(r, DType.F16, (i, j) -> 0)));
        cases.add(new Case("allToAll bad arguments fail with IllegalArgumentException and leave it usable", r -> {
            long n = 2L * r.world;
            Tensor in = r.device(DType.F32, new long[] {n}, A2A);
            Tensor out = r.mem.allocate(DType.F32, n);
            long[] twos = new long[r.world];
            Arrays.fill(twos, 2);
            if (r.world > 1) {
                expectThrows(IllegalArgumentException.class, "indivisible",
                        () -> r.comm.allToAll(r.mem.allocate(DType.F32, n + 1), r.mem.allocate(DType.F32, n + 1), r.stream));
            }
            expectThrows(IllegalArgumentException.class, "output size",
                    () -> r.comm.allToAll(r.mem.allocate(DType.F32, 2 * n), in, r.stream));
            expectThrows(IllegalArgumentException.class, "dtype mismatch",
                    () -> r.comm.allToAll(r.mem.allocate(DType.I32, n), in, r.stream));
            expectThrows(IllegalArgumentException.class, "in place", () -> r.comm.allToAll(in, in, r.stream));
            expectThrows(IllegalArgumentException.class, "null output", () -> r.comm.allToAll(null, in, r.stream));
            expectThrows(IllegalArgumentException.class, "V in place", () -> r.comm.allToAllV(in, in, twos, twos, r.stream));
            expectThrows(IllegalArgumentException.class, "V counts too long",
                    () -> r.comm.allToAllV(out, in, twos, Arrays.copyOf(twos, r.world + 1), r.stream));
            expectThrows(IllegalArgumentException.class, "V counts too short",
                    () -> r.comm.allToAllV(out, in, Arrays.copyOf(twos, r.world - 1), twos, r.stream));
            expectThrows(IllegalArgumentException.class, "V null counts", () -> r.comm.allToAllV(out, in, twos, null, r.stream));
            long[] negative = twos.clone();
            negative[r.world - 1] = -1;
            if (r.world > 1) {
                negative[0] += 3;
            }
            expectThrows(IllegalArgumentException.class, "V negative count",
                    () -> r.comm.allToAllV(out, in, twos, negative, r.stream));
            long[] more = twos.clone();
            more[0]++;
            expectThrows(IllegalArgumentException.class, "V input counts sum",
                    () -> r.comm.allToAllV(out, in, twos, more, r.stream));
            expectThrows(IllegalArgumentException.class, "V output counts sum",
                    () -> r.comm.allToAllV(out, in, more, twos, r.stream));
            long[] selfOut = twos.clone();
            selfOut[r.rank] = 1;
            expectThrows(IllegalArgumentException.class, "V self counts differ",
                    () -> r.comm.allToAllV(r.mem.allocate(DType.F32, n - 1), in, selfOut, twos, r.stream));
            if (!r.mem.device().isCpu()) {
                expectThrows(IllegalArgumentException.class, "null stream", () -> r.comm.allToAll(out, in, null));
                expectThrows(IllegalArgumentException.class, "V null stream", () -> r.comm.allToAllV(out, in, twos, twos, null));
            }
            if (r.comm.isClosed()) {
                throw new AssertionError("argument errors must not close the communicator");
            }
            r.comm.allToAll(out, in, r.stream);
            check("still works", r.read(out), i -> A2A.at((int) (i / 2), r.rank * 2L + i % 2));
        }));
        cases.add(new Case("empty tensors", r -> {
            Tensor e = r.mem.allocate(DType.F32, 0);
            r.comm.allReduce(e, e, ReduceOp.SUM, r.stream);
            Tensor e2 = r.mem.allocate(DType.F32, 0, 3);
            Tensor g = r.mem.allocate(DType.F32, 0, 3L * r.world);
            r.comm.allGather(g, e2, 1, r.stream);
            r.comm.broadcast(e, 0, r.stream);
            r.comm.synchronize(r.stream);
        }));
        cases.add(new Case("bad arguments fail with IllegalArgumentException and leave it usable", r -> {
            Tensor f = r.device(DType.F32, new long[] {4}, SMALL);
            Tensor i32 = r.mem.allocate(DType.I32, 4);
            Tensor f5 = r.mem.allocate(DType.F32, 5);
            Device other = r.mem.device().isCpu() ? new Device("elsewhere", 0) : Device.CPU;
            Tensor foreign = other.isCpu() ? Tensor.allocate(DType.F32, 4) : Tensor.onDevice(other, 4096, DType.F32, new long[] {4}, null);
            expectThrows(IllegalArgumentException.class, "dtype mismatch", () -> r.comm.allReduce(i32, f, ReduceOp.SUM, r.stream));
            expectThrows(IllegalArgumentException.class, "size mismatch", () -> r.comm.allReduce(f5, f, ReduceOp.SUM, r.stream));
            expectThrows(IllegalArgumentException.class, "tensor on another device", () -> r.comm.allReduce(foreign, foreign, ReduceOp.SUM, r.stream));
            expectThrows(IllegalArgumentException.class, "null tensor", () -> r.comm.broadcast(null, 0, r.stream));
            expectThrows(IllegalArgumentException.class, "null op", () -> r.comm.allReduce(f, f, null, r.stream));
            expectThrows(IllegalArgumentException.class, "allGather output shape",
                    () -> r.comm.allGather(r.mem.allocate(DType.F32, 4L * r.world + 1), f, 0, r.stream));
            expectThrows(IllegalArgumentException.class, "allGather dim out of range",
                    () -> r.comm.allGather(r.mem.allocate(DType.F32, 4L * r.world), f, 1, r.stream));
            expectThrows(IllegalArgumentException.class, "reduceScatter indivisible",
                    () -> r.comm.reduceScatter(r.mem.allocate(DType.F32, 5L * r.world + 1), f5, ReduceOp.SUM, 0, r.stream));
            expectThrows(IllegalArgumentException.class, "broadcast src out of range", () -> r.comm.broadcast(f, r.world, r.stream));
            expectThrows(IllegalArgumentException.class, "gather dst negative", () -> r.comm.gather(null, f, -1, 0, r.stream));
            expectThrows(IllegalArgumentException.class, "send to self", () -> r.comm.send(f, r.rank, r.stream));
            expectThrows(IllegalArgumentException.class, "recv from out of range", () -> r.comm.recv(f, r.world, r.stream));
            expectThrows(IllegalArgumentException.class, "unmatched self send",
                    () -> r.comm.batchP2P(List.of(P2POp.send(f, r.rank)), r.stream));
            expectThrows(IllegalArgumentException.class, "self pair of different sizes",
                    () -> r.comm.batchP2P(List.of(P2POp.send(f, r.rank), P2POp.recv(f5, r.rank)), r.stream));
            if (!r.mem.device().isCpu()) {
                expectThrows(IllegalArgumentException.class, "null stream", () -> r.comm.allReduce(f, f, ReduceOp.SUM, null));
            }
            if (r.comm.isClosed()) {
                throw new AssertionError("argument errors must not close the communicator");
            }
            r.comm.allReduce(f, f, ReduceOp.SUM, r.stream);
            check("still works", r.read(f), i -> reduceAt(i, r.world, SMALL, ReduceOp.SUM, DType.F32));
        }));
        cases.add(new Case("close makes later calls fail fast, idempotently", r -> {
            r.comm.synchronize(r.stream);
            r.comm.close();
            if (!r.comm.isClosed()) {
                throw new AssertionError("isClosed() is false after close()");
            }
            r.comm.close();
            r.comm.abort();
            Tensor t = r.mem.allocate(DType.F32, 2);
            expectThrows(CommClosedException.class, "allReduce after close", () -> r.comm.allReduce(t, t, ReduceOp.SUM, r.stream));
            expectThrows(CommClosedException.class, "batchP2P after close", () -> r.comm.batchP2P(List.of(), r.stream));
        }));
        return List.copyOf(cases);
    }

    // ---- shrink: run after every other case (it aborts the communicator and the CPU group) ----

    /**
     * The cases that end a communicator: {@link DeviceCommunicator#shrink} after a rank loss. Every rank
     * runs them after {@link #all()}, each reporting for itself (the group they would agree over is
     * gone): see {@link ConformanceRunner#runShrink}.
     */
    public static List<Case> shrinkCases() {
        return List.of(new Case("shrink without the last rank", ConformanceCases::shrinkWithoutTheLastRank));
    }

    /**
     * The last rank is excluded and does not call (it could be dead). The others first get
     * {@link IllegalArgumentException} for bad arguments (this rank excluded, a survivors' group that does not
     * fit) with the communicator still usable; then they shrink the CPU group and the communicator
     * within 20 s: the old communicator is closed and refuses operations with
     * {@link CommClosedException}; the new one has the same rank and device, one rank less, the
     * survivors' group name, and its all-reduce and all-gather give the survivors' values.
     */
    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static void shrinkWithoutTheLastRank(Rank r) {
        if (r.cpuGroup == null) {
            throw new AssertionError("the shrink case needs the CPU group (ConformanceRunner.runShrink)");
        }
        java.time.Duration t = java.time.Duration.ofSeconds(20);
        List<Integer> excluded = r.world > 1 ? List.of(r.world - 1) : List.of();
        if (r.world > 1 && r.rank == r.world - 1) {
            return; // excluded: it does not call shrink
        }
        expectThrows(IllegalArgumentException.class, "shrink without this rank", () -> r.comm.shrink(List.of(r.rank), r.cpuGroup, t));
        if (r.world > 1) {
            expectThrows(IllegalArgumentException.class, "survivors' group that does not fit",
                    () -> r.comm.shrink(excluded, r.cpuGroup, t));
        }
        check(!r.comm.isClosed(), "bad shrink arguments left the communicator usable");
        long start = System.nanoTime();
        io.jcomm.api.ProcessGroup survivors = r.cpuGroup.shrink(excluded, t);
        try {
            DeviceCommunicator shrunk = r.comm.shrink(excluded, survivors, t);
            try {
                long ms = (System.nanoTime() - start) / 1_000_000;
                check(ms < t.toMillis(), "shrink took " + ms + " ms");
                check(r.comm.isClosed(), "the old communicator is closed after a shrink");
                Tensor x = r.device(DType.F32, new long[] {4}, (q, i) -> q);
                expectThrows(CommClosedException.class, "the old communicator after shrink",
                        () -> r.comm.allReduce(x, x, ReduceOp.SUM, r.stream));
                int w = Math.max(1, r.world - 1);
                check(shrunk.rank() == r.rank, "new rank " + shrunk.rank() + ", expected " + r.rank);
                check(shrunk.worldSize() == w, "new world size " + shrunk.worldSize() + ", expected " + w);
                check(shrunk.device().equals(r.comm.device()), "new device " + shrunk.device());
                check(shrunk.groupName().equals(survivors.name()), "group name " + shrunk.groupName());
                Rank n = new Rank(shrunk, r.mem, survivors);
                Value f = (q, i) -> (q + 1) * 10 + i;
                Tensor sum = n.device(DType.F32, new long[] {6}, f);
                shrunk.allReduce(sum, sum, ReduceOp.SUM, n.stream);
                Tensor got = n.read(sum);
                for (long i = 0; i < 6; i++) {
                    double e = 0;
                    for (int q = 0; q < w; q++) {
                        e += f.at(q, i);
                    }
                    check(got.getDouble(i) == e, "all-reduce after shrink [" + i + "] = " + got.getDouble(i) + ", expected " + e);
                }
                Tensor in = n.device(DType.I32, new long[] {2, 3}, f);
                Tensor out = n.mem.allocate(DType.I32, new long[] {2L * w, 3});
                shrunk.allGather(out, in, 0, n.stream);
                Tensor all = n.read(out);
                for (long i = 0; i < all.numel(); i++) {
                    double e = concatValue(i, new long[] {2, 3}, 0, w, f);
                    check(all.getDouble(i) == e, "all-gather after shrink [" + i + "] = " + all.getDouble(i) + ", expected " + e);
                }
            } finally {
                shrunk.close();
            }
        } finally {
            survivors.close();
        }
    }
}
