package io.jcomm.tools.bench;

import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.store.Store;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.parallel.ParallelState;
import java.time.Duration;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.HdrHistogram.Histogram;

/**
 * One rank of a {@code commbench} run (started by {@link CollectiveBenchCommand}). Arguments:
 * {@code <op> <api> <backend> <dtype> <sizes,comma,separated> <warmup> <iters> <floor> <idle-cpu seconds>
 * [key=value options...]}.
 * Rank 0 prints one {@link BenchResult} line per size; per iteration the slowest rank's time counts.
 * With {@code floor} it also prints the shared-memory floor of the run ({@link ShmFloor}), and a line
 * saying which routes the API takes ({@link BenchResult#NOTE_PREFIX}).
 */
public final class BenchWorker {

    private BenchWorker() {
    }

    /**
     * What a run calls: a process group or a group coordinator. {@link #control()} is the process group
     * that carries the run's own bookkeeping (decisions, timings), never measured.
     */
    interface Target {
        ProcessGroup control();

        /** One round of the JIT warm-up: barrier, a small all-reduce and an object broadcast. */
        void warmUpRound(Tensor x);

        /** The body of one iteration of {@code op} at {@code size}, or null when that size is empty. */
        Runnable prepare(BenchOp op, DType t, long size);

        /** Which routes the operations take (known after the warm-up). */
        String routes();
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.start(86);
        BenchOp op = BenchOp.valueOf(args[0]);
        BenchApi api = BenchApi.valueOf(args[1]);
        String backend = args[2];
        DType dtype = DType.parse(args[3]);
        long[] sizes = Arrays.stream(args[4].split(",")).mapToLong(Long::parseLong).toArray();
        int warmup = Integer.parseInt(args[5]);
        int iters = Integer.parseInt(args[6]);
        boolean floor = Boolean.parseBoolean(args[7]);
        int idleSeconds = Integer.parseInt(args[8]);
        Map<String, String> options = new LinkedHashMap<>();
        for (int i = 9; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq <= 0) {
                throw new IllegalArgumentException("option must be key=value: " + args[i]);
            }
            options.put(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        try (Store store = TcpRendezvous.connect(cfg, TcpRendezvous.Options.builder().hostServer(false).build())) {
            if (api == BenchApi.COORDINATOR) {
                try (ParallelState ps = CoordinatorTarget.initialize(cfg, store, backend, options)) {
                    run(new CoordinatorTarget(ps.tp()), op, dtype, sizes, warmup, iters, floor, idleSeconds);
                }
                return;
            }
            CpuGroupOptions.Builder b = CpuGroupOptions.builder().store(store).groupName("bench").rank(cfg.rank())
                    .size(cfg.worldSize()).backend(backend).timeout(Duration.ofSeconds(60));
            options.forEach(b::option);
            try (ProcessGroup g = CpuGroups.create(b.build())) {
                run(new GroupTarget(g), op, dtype, sizes, warmup, iters, floor, idleSeconds);
            }
        }
    }

    private static void run(Target target, BenchOp op, DType dtype, long[] sizes, int warmup, int iters,
                            boolean floor, int idleSeconds) {
        ProcessGroup g = target.control();
        warmUpJit(target);
        if (g.rank() == 0) {
            System.out.println(BenchResult.NOTE_PREFIX + target.routes());
        }
        if (floor) {
            ShmFloor.Result f = ShmFloor.measure(g);
            if (g.rank() == 0) {
                System.out.println(f.toLine());
            }
        }
        System.out.flush();
        // one untimed pass over every size first (up to 200 iterations or 150 ms each, rank 0
        // decides), so that the JIT has compiled every size's path before anything is measured
        for (long size : sizes) {
            Runnable body = target.prepare(op, dtype, size);
            if (body == null) {
                continue;
            }
            long end = System.nanoTime() + 150_000_000L;
            for (int i = 0; i < 200; i += 10) {
                for (int j = 0; j < 10; j++) {
                    body.run();
                }
                Boolean more = g.broadcastObject(g.rank() == 0 ? System.nanoTime() < end : null, 0, Boolean.class);
                if (!more) {
                    break;
                }
            }
        }
        for (long size : sizes) {
            Runnable body = target.prepare(op, dtype, size);
            if (body == null) {
                continue;
            }
            if (warmup >= 0) {
                for (int i = 0; i < warmup; i++) {
                    body.run();
                }
            } else {
                String w = warmUntilSteady(g, body, -warmup, iters);
                if (g.rank() == 0) {
                    System.out.println(BenchResult.NOTE_PREFIX + "warm-up " + size + " B: " + w);
                }
            }
            g.barrier();
            int n = iters > 0 ? iters : autoIters(size);
            long[] t = new long[n + 1];
            long cpu0 = processCpuNanos();
            for (int i = 0; i < n; i++) {
                long t0 = System.nanoTime();
                body.run();
                t[i] = System.nanoTime() - t0;
            }
            t[n] = processCpuNanos() - cpu0; // last element: CPU time of the whole loop
            List<long[]> all = g.gatherObject(t, 0, long[].class);
            if (g.rank() == 0) {
                System.out.println(summarize(op, g.size(), dtype, size, all).toLine());
                System.out.flush();
            }
        }
        g.barrier();
        if (idleSeconds > 0) {
            idleCpu(g, idleSeconds);
        }
    }

    /** Longest adaptive warm-up of one size. */
    static final long STEADY_MAX_NANOS = 10_000_000_000L;
    /** The shortest warm-up of a size. */
    static final long STEADY_MIN_NANOS = 500_000_000L;
    /** Shortest block of the adaptive warm-up (and at least 5 calls). */
    static final long BLOCK_NANOS = 20_000_000L;
    /** Blocks whose medians must agree within {@link #STEADY_TOLERANCE} for the figure to count as settled. */
    static final int STEADY_BLOCKS = 3;
    static final double STEADY_TOLERANCE = 0.05;

    /**
     * Timed iterations of a size when none are given: about 64 MiB moved, 20 to 2,000 calls (a median of 20
     * calls of a microsecond operation moved by half from run to run on a 2-core machine).
     */
    static int autoIters(long size) {
        return (int) Math.max(20, Math.min(2000, (64L << 20) / Math.max(1, size)));
    }

    /**
     * Warms {@code body} up until its figure stops moving: at least {@code minCalls} calls and half a second
     * (the compilers reach a hot path's last tier well after its first quiet blocks: a 1 KiB all-reduce
     * measured 3.3-3.7x its steady figure after the first three), then blocks of at least 20 ms (and 5 calls)
     * until, over the last {@value #STEADY_BLOCKS} blocks, no rank's JIT compiled anything and the slowest
     * rank's block medians lie within 5 % of each other, or 10 s passed.
     * Every rank sees every rank's figures (one small all-gather per block) and decides alike. Returns the
     * line rank 0 prints about it.
     */
    static String warmUntilSteady(ProcessGroup g, Runnable body, int minCalls, int iters) {
        java.lang.management.CompilationMXBean jit = java.lang.management.ManagementFactory.getCompilationMXBean();
        boolean jitKnown = jit != null && jit.isCompilationTimeMonitoringSupported();
        long start = System.nanoTime();
        long[] t = new long[1024];
        double[] medians = new double[STEADY_BLOCKS];
        long[] compiled = new long[STEADY_BLOCKS];
        double first = -1;
        double last = 0;
        long calls = 0;
        int blocks = 0;
        int n = 5; // calls per block: the same on every rank (rank 0 sizes the next block to ~20 ms)
        while (true) {
            long jit0 = jitKnown ? jit.getTotalCompilationTime() : 0;
            if (t.length < n) {
                t = new long[n];
            }
            for (int i = 0; i < n; i++) {
                long t0 = System.nanoTime();
                body.run();
                t[i] = System.nanoTime() - t0;
            }
            calls += n;
            long[] sorted = Arrays.copyOf(t, n);
            Arrays.sort(sorted);
            long mine = sorted[n / 2];
            long jitMillis = jitKnown ? jit.getTotalCompilationTime() - jit0 : 0;
            // the slowest rank's median and whether any rank compiled: alike on every rank
            long slowest = 0;
            long anyJit = 0;
            for (long[] r : g.allGatherObject(new long[] {mine, jitMillis}, long[].class)) {
                slowest = Math.max(slowest, r[0]);
                anyJit += r[1];
            }
            if (first < 0) {
                first = slowest;
            }
            last = slowest;
            medians[blocks % STEADY_BLOCKS] = slowest;
            compiled[blocks % STEADY_BLOCKS] = anyJit;
            blocks++;
            boolean quiet = blocks >= STEADY_BLOCKS && Arrays.stream(compiled).sum() == 0;
            boolean settled = calls >= minCalls && quiet && spread(medians) <= STEADY_TOLERANCE
                    && System.nanoTime() - start >= STEADY_MIN_NANOS;
            // rank 0's clock decides when to give up and how long the next block is: every rank goes on alike
            long[] next = g.broadcastObject(g.rank() == 0 ? new long[] {settled ? 1 : 0,
                    System.nanoTime() - start > STEADY_MAX_NANOS ? 1 : 0,
                    Math.max(5, Math.min(1_000_000, BLOCK_NANOS / Math.max(1, slowest)))} : null, 0, long[].class);
            if (next[0] == 1 || next[1] == 1) {
                return String.format(Locale.ROOT, "%,d calls in %.2f s, %s; slowest rank's median in the first block "
                                + "%.1f us, in the last %.1f us", calls, (System.nanoTime() - start) / 1e9,
                        next[0] == 1 ? "until " + STEADY_BLOCKS + " blocks of ~20 ms had no JIT compilation on any rank "
                                + "and medians within 5 %"
                                : "stopped after " + STEADY_MAX_NANOS / 1_000_000_000L + " s: the figure did not settle",
                        first / 1e3, last / 1e3);
            }
            n = (int) next[2];
        }
    }

    /** (max - min) / min of {@code v}. */
    static double spread(double[] v) {
        double min = Double.MAX_VALUE;
        double max = 0;
        for (double x : v) {
            min = Math.min(min, x);
            max = Math.max(max, x);
        }
        return min <= 0 ? 0 : (max - min) / min;
    }

    /**
     * Every rank leaves the group alone for 2 s, then measures its process's CPU over {@code seconds}
     * (every thread: progress thread, media driver, JIT, GC); rank 0 prints them as one note, in % of a core.
     */
    private static void idleCpu(ProcessGroup g, int seconds) {
        sleep(2_000);
        long cpu0 = processCpuNanos();
        long t0 = System.nanoTime();
        sleep(seconds * 1000L);
        double percent = 100.0 * (processCpuNanos() - cpu0) / (System.nanoTime() - t0);
        List<Double> all = g.gatherObject(percent, 0, Double.class);
        if (g.rank() == 0) {
            StringBuilder sb = new StringBuilder(BenchResult.NOTE_PREFIX).append(String.format(Locale.ROOT,
                    "idle CPU per rank over %d s after 2 s without traffic (%% of one core, all threads):", seconds));
            for (int r = 0; r < all.size(); r++) {
                sb.append(String.format(Locale.ROOT, " rank %d %.2f", r, all.get(r)));
            }
            System.out.println(sb);
            System.out.flush();
        }
        g.barrier();
    }

    private static void sleep(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException("interrupted", e);
        }
    }

    /** CPU time of this process (all threads), or 0 where the JVM cannot say. */
    private static long processCpuNanos() {
        java.lang.management.OperatingSystemMXBean os = java.lang.management.ManagementFactory.getOperatingSystemMXBean();
        if (os instanceof com.sun.management.OperatingSystemMXBean) {
            return Math.max(0, ((com.sun.management.OperatingSystemMXBean) os).getProcessCpuTime());
        }
        return 0;
    }


    /** A few hundred small operations so that the first measured sizes do not pay for the JIT. */
    private static void warmUpJit(Target target) {
        ProcessGroup g = target.control();
        Tensor x = Tensor.allocate(DType.F32, 256);
        long end = System.nanoTime() + 300_000_000L;
        int i = 0;
        while (true) {
            target.warmUpRound(x);
            // everyone must agree on when to stop: rank 0 decides
            Boolean more = g.broadcastObject(g.rank() == 0 ? (System.nanoTime() < end && ++i < 2000) : null, 0, Boolean.class);
            if (!more) {
                break;
            }
        }
    }

    /** Elements of {@code size} bytes, rounded down to a multiple of {@code n} for the split operations. */
    static long count(long size, DType t, int n, boolean split) {
        long c = size / t.byteSize();
        return split ? c / n * n : c;
    }

    /**
     * What rank {@code src} sends each rank in the {@code alltoallv} benchmark: a quarter more or less
     * than an even split, alternating (scripts/torch_gloo_bench.py uses the same rule).
     */
    static long[] allToAllVSplits(int src, int n, long chunk) {
        long delta = chunk / 4;
        long[] c = new long[n];
        for (int d = 0; d < n; d++) {
            c[d] = chunk + ((src + d) % 2 == 0 ? delta : -delta);
        }
        return c;
    }

    /**
     * The metadata-only tensor dict of {@code broadcast-tensor-dict}: a step, a request id and plain
     * bytes, about {@code size} bytes once encoded (as vLLM's per-step metadata: plain values, no tensors).
     */
    static Map<String, Object> metadataDict(long size) {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("step", 7L);
        d.put("request", "req-000007");
        byte[] data = new byte[(int) Math.max(1, size - 48)];
        Arrays.fill(data, (byte) 7);
        d.put("data", data);
        return d;
    }

    /** The process-group API: every operation on one CPU group. */
    private static final class GroupTarget implements Target {
        private final ProcessGroup g;

        GroupTarget(ProcessGroup g) {
            this.g = g;
        }

        @Override
        public ProcessGroup control() {
            return g;
        }

        @Override
        public void warmUpRound(Tensor x) {
            g.barrier();
            g.allReduce(x, ReduceOp.SUM);
            g.broadcastObject(g.rank() == 0 ? "warm" : null, 0, String.class);
        }

        @Override
        public Runnable prepare(BenchOp op, DType t, long size) {
            return BenchWorker.prepare(op, g, t, size);
        }

        @Override
        public String routes() {
            return "api=process-group: group " + g.name() + " (" + g.size() + " ranks), every operation on the "
                    + g.backendName() + " CPU group";
        }
    }

    private static Runnable prepare(BenchOp op, ProcessGroup g, DType t, long size) {
        int n = g.size();
        int rank = g.rank();
        switch (op) {
            case BARRIER:
                return g::barrier;
            case BROADCAST: {
                Tensor x = Tensor.allocate(t, count(size, t, n, false));
                return x.numel() == 0 ? null : () -> g.broadcast(x, 0);
            }
            case ALLREDUCE: {
                Tensor x = Tensor.allocate(t, count(size, t, n, false));
                x.fill(1);
                return x.numel() == 0 ? null : () -> g.allReduce(x, ReduceOp.SUM);
            }
            case ALLGATHER: {
                long c = count(size, t, n, true);
                Tensor out = Tensor.allocate(t, c);
                Tensor in = Tensor.allocate(t, c / n);
                return c == 0 ? null : () -> g.allGather(out, in);
            }
            case REDUCESCATTER: {
                long c = count(size, t, n, true);
                Tensor in = Tensor.allocate(t, c);
                Tensor out = Tensor.allocate(t, c / n);
                return c == 0 ? null : () -> g.reduceScatter(out, in, ReduceOp.SUM);
            }
            case GATHER: {
                long c = count(size, t, n, true);
                Tensor in = Tensor.allocate(t, c / n);
                Tensor out = rank == 0 ? Tensor.allocate(t, c) : null;
                return c == 0 ? null : () -> g.gather(out, in, 0);
            }
            case SCATTER: {
                long c = count(size, t, n, true);
                Tensor in = rank == 0 ? Tensor.allocate(t, c) : null;
                Tensor out = Tensor.allocate(t, c / n);
                return c == 0 ? null : () -> g.scatter(out, in, 0);
            }
            case ALLTOALL: {
                long c = count(size, t, n, true);
                Tensor in = Tensor.allocate(t, c);
                Tensor out = Tensor.allocate(t, c);
                return c == 0 ? null : () -> g.allToAll(out, in);
            }
            case ALLTOALLV: {
                long c = count(size, t, n, true);
                long[] inCounts = allToAllVSplits(rank, n, c / n);
                long[] outCounts = new long[n];
                for (int s = 0; s < n; s++) {
                    outCounts[s] = allToAllVSplits(s, n, c / n)[rank];
                }
                Tensor in = Tensor.allocate(t, java.util.Arrays.stream(inCounts).sum());
                Tensor out = Tensor.allocate(t, java.util.Arrays.stream(outCounts).sum());
                return c == 0 ? null : () -> g.allToAllV(out, in, outCounts, inCounts);
            }
            case SENDRECV: {
                // ring exchange: even ranks send first, odd ranks receive first
                long c = count(size, t, n, false);
                Tensor out = Tensor.allocate(t, c);
                Tensor in = Tensor.allocate(t, c);
                int next = (rank + 1) % n;
                int prev = (rank + n - 1) % n;
                if (c == 0) {
                    return null;
                }
                return rank % 2 == 0 ? () -> {
                    g.send(out, next, 0);
                    g.recv(in, prev, 0);
                } : () -> {
                    g.recv(in, prev, 0);
                    g.send(out, next, 0);
                };
            }
            case BROADCAST_OBJECT: {
                byte[] payload = new byte[(int) Math.max(1, size - 8)]; // ~size bytes once encoded
                Arrays.fill(payload, (byte) 7);
                return () -> g.broadcastObject(rank == 0 ? payload : null, 0, byte[].class);
            }
            case ALLGATHER_OBJECT: {
                byte[] payload = new byte[(int) Math.max(1, size - 8)];
                return () -> g.allGatherObject(payload, byte[].class);
            }
            case BROADCAST_TENSOR_DICT: {
                // what a process-group user calls for a metadata dict: torch's broadcast_object_list
                Map<String, Object> dict = metadataDict(size);
                return () -> g.broadcastObject(rank == 0 ? dict : null, 0, Map.class);
            }
            default:
                throw new AssertionError(op);
        }
    }

    private static BenchResult summarize(BenchOp op, int n, DType t, long size, List<long[]> all) {
        int iters = all.get(0).length - 1;
        long[] worst = new long[iters];
        long cpu = 0;
        for (long[] r : all) {
            for (int i = 0; i < iters; i++) {
                worst[i] = Math.max(worst[i], r[i]);
            }
            cpu = Math.max(cpu, r[iters]);
        }
        Histogram h = new Histogram(3);
        for (long v : worst) {
            h.recordValue(Math.max(1, v));
        }
        long[] sorted = worst.clone();
        Arrays.sort(sorted);
        double medianNs = iters % 2 == 1 ? sorted[iters / 2] : (sorted[iters / 2 - 1] + sorted[iters / 2]) / 2.0;
        long count;
        long bytes;
        if (op == BenchOp.BARRIER) {
            count = 0;
            bytes = 0;
        } else if (op.object()) {
            count = size;
            bytes = size;
        } else {
            boolean split = op == BenchOp.ALLGATHER || op == BenchOp.REDUCESCATTER || op == BenchOp.GATHER
                    || op == BenchOp.SCATTER;
            count = count(size, t, n, split);
            bytes = count * t.byteSize();
        }
        double algbw = bytes == 0 ? 0 : bytes / medianNs; // bytes per ns = GB/s
        return new BenchResult(bytes, count, op.object() ? "obj" : t.shortName(), medianNs / 1000.0, algbw,
                algbw * op.busFactor(n), h.getValueAtPercentile(50) / 1000.0, h.getValueAtPercentile(99) / 1000.0,
                h.getValueAtPercentile(99.9) / 1000.0, iters, cpu / 1000.0 / iters);
    }
}
