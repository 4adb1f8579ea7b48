package io.jcomm.tools.bench.pipeline;

import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.Tensor;
import io.jcomm.parallel.GroupCoordinator;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelState;
import io.jcomm.parallel.ParallelStateOptions;
import io.jcomm.tools.bench.ParentWatch;
import io.jcomm.tools.bench.RankMeasurements;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.HdrHistogram.Histogram;

/**
 * One rank of {@link PipelineBenchCommand}: a TP x PP {@link ParallelState} with the SDK's defaults
 * (CPU device communicator), then for each activation size the streaming pipeline step of a
 * pipeline-parallel job ({@link Step}), warm-up steps first, then the timed ones. Rank 0 prints
 * {@code @@row <hidden> <steps> <elapsedNanos> <maxRssGrowthBytes> <checked> <maxDirectGrowthBytes> <warmupSteps>}
 * and one {@code @@op <hidden> <name> <p50Nanos> <p99Nanos> <count> <p999Nanos> <meanNanos>} per operation (over
 * all ranks).
 *
 * <p>Arguments: {@code <tp> <pp> <warmup (steps, or -1: until the rate settles)> <steps (0: by size)>
 * <recv: plain|reuse> <hidden,...> [cpu option key=value...]}; the rank comes from the torchrun-style environment.
 * {@code plain} receives the way the README shows ({@code pp.recvTensorDict()}; with TP, the slices gathered
 * over the TP group), {@code reuse} hands the previous dict back to be received into.
 */
public final class PipelineBenchWorker {

    private PipelineBenchWorker() {
    }

    /** Operations, in the order of the report. */
    static final List<String> OPS = List.of("tp broadcast metadata", "tp all-reduce", "pp send tensor dict",
            "pp recv tensor dict", "whole step");

    /**
     * Timed steps for an activation of {@code hidden} f32 when none are given: about 2 GiB of activations, 1,000
     * to 30,000 steps (enough that a millisecond hiccup moves the mean by less than a few percent).
     */
    static int autoSteps(int hidden) {
        return (int) Math.max(1000, Math.min(30_000, (2L << 30) / (4L * hidden)));
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.start(3);
        int tp = Integer.parseInt(args[0]);
        int pp = Integer.parseInt(args[1]);
        int warmup = Integer.parseInt(args[2]);
        int stepsArg = Integer.parseInt(args[3]);
        boolean reuse = args[4].equals("reuse");
        if (!reuse && !args[4].equals("plain") && !args[4].equals("alloc")) {
            throw new IllegalArgumentException("recv must be plain or reuse, not " + args[4]);
        }
        List<Integer> sizes = new ArrayList<>();
        for (String s : args[5].split(",")) {
            sizes.add(Integer.parseInt(s));
        }
        ParallelStateOptions.Builder ob = ParallelStateOptions.builder();
        for (int i = 6; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            ob.cpuOption(args[i].substring(0, eq), args[i].substring(eq + 1));
        }
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        try (ParallelState ps = ParallelState.initialize(cfg, ob.build(), ParallelSizes.of(tp, pp, 1))) {
            ps.tp().awaitMessageQueue(ps.tp().cpuGroup().defaultTimeout());
            for (int hidden : sizes) {
                int steps = stepsArg > 0 ? stepsArg : autoSteps(hidden);
                Step step = new Step(ps, hidden, reuse);
                int warmed = warmup >= 0 ? warmup : settle(ps, step, steps);
                runSteps(step, warmed, warmup - warmed); // none when the settling ran past warmup
                warmed = Math.max(warmed, warmup);
                step.resetHistograms();
                ps.world().barrier();
                long rss0 = rssBytes();
                long direct0 = directBytes();
                long t0 = System.nanoTime();
                runSteps(step, warmed, steps);
                long elapsed = System.nanoTime() - t0;
                long growth = rssBytes() - rss0;
                long directGrowth = directBytes() - direct0;
                ps.world().barrier();
                report(ps, step, hidden, steps, elapsed, growth, directGrowth, warmed);
            }
        }
    }

    /**
     * Runs steps {@code from} to {@code from + count - 1}. The warm-up and the timed steps both run through
     * this one loop, recording alike, so that the timed steps run the code the warm-up compiled: a separate
     * timed loop, or a recording branch the warm-up never took, made the JIT recompile (and the steps stall
     * for milliseconds) in the first second of the timed steps.
     */
    static void runSteps(Step step, int from, int count) {
        for (int s = from; s < from + count; s++) {
            step.run(s);
        }
    }

    /**
     * Warms up until the step rate settles: rounds of {@code max(200, steps / 4)} steps until two rounds in a
     * row ran within 5 % of the one before (the compilers are done, the pool and the rings are in use), at
     * least 3 rounds and 3 s, at most 60 s. Every rank takes the slowest rank's round time, so all stop together.
     *
     * @return the steps run
     */
    static int settle(ParallelState ps, Step step, int steps) {
        int round = Math.max(200, steps / 4);
        Tensor t = Tensor.allocate(DType.F64, 1);
        long start = System.nanoTime();
        double previous = -1;
        int calm = 0;
        int s = 0;
        for (int r = 0; ; r++) {
            long t0 = System.nanoTime();
            runSteps(step, s, round);
            s += round;
            t.setDouble(0, System.nanoTime() - t0);
            ps.world().allReduce(t, t, io.jcomm.api.ReduceOp.MAX);
            double took = t.getDouble(0);
            calm = previous > 0 && Math.abs(took - previous) <= 0.05 * previous ? calm + 1 : 0;
            previous = took;
            long spent = System.nanoTime() - start;
            t.setDouble(0, spent > 60_000_000_000L ? 2 : spent > 3_000_000_000L ? 1 : 0);
            ps.world().allReduce(t, t, io.jcomm.api.ReduceOp.MIN);
            if ((r >= 2 && calm >= 2 && t.getDouble(0) >= 1) || t.getDouble(0) >= 2) {
                return s;
            }
        }
    }

    /** What a rank does each step: the pattern of a pipeline-parallel job, two values checked. */
    static final class Step {
        final GroupCoordinator tp;
        final GroupCoordinator pp;
        final int stage;
        final int stages;
        final int tpRank;
        final int tpSize;
        final int hidden;
        final boolean reuse;
        final Tensor activation;
        final Tensor positions = Tensor.allocate(DType.I32, 4);
        final Map<String, Histogram> histograms = new LinkedHashMap<>();
        final Map<String, Object> outgoing = new LinkedHashMap<>();
        final Map<String, Object> metadata = new LinkedHashMap<>();
        Map<String, Object> received;
        long checked;

        Step(ParallelState ps, int hidden, boolean reuse) {
            this.tp = ps.tp();
            this.pp = ps.pp();
            this.stage = pp.rankInGroup();
            this.stages = pp.worldSize();
            this.tpRank = tp.rankInGroup();
            this.tpSize = tp.worldSize();
            this.hidden = hidden;
            this.reuse = reuse;
            this.activation = Tensor.allocate(DType.F32, hidden);
            OPS.forEach(op -> histograms.put(op, new Histogram(3)));
        }

        /** Empties the histograms (after the warm-up, which records too so that it runs the timed code). */
        void resetHistograms() {
            histograms.values().forEach(Histogram::reset);
        }

        void run(int s) {
            long stepStart = System.nanoTime();
            long t;
            if (stage == 0) {
                t = System.nanoTime();
                Map<String, Object> meta = null;
                if (tpRank == 0) {
                    positions.setLong(0, s);
                    metadata.put("step", (long) s);
                    metadata.put("positions", positions);
                    meta = metadata;
                }
                Map<String, Object> got = tp.broadcastTensorDict(meta, 0);
                record("tp broadcast metadata", t);
                check(s, "metadata step", ((Number) got.get("step")).longValue(), s);
                check(s, "metadata positions[0]", ((Tensor) got.get("positions")).getLong(0), s);
            } else {
                t = System.nanoTime();
                received = reuse ? pp.recvTensorDict(stage - 1, tp, received)
                        : tpSize == 1 ? pp.recvTensorDict() : pp.recvTensorDict(stage - 1, tp);
                record("pp recv tensor dict", t);
                Tensor h = (Tensor) received.get("hidden");
                check(s, "received step", ((Number) received.get("step")).longValue(), s);
                check(s, "received hidden[0]", (long) h.getDouble(0), (long) tpSize * (s % 1000));
                check(s, "received hidden[last]", (long) h.getDouble(hidden - 1), (long) tpSize * stage);
            }
            activation.setDouble(0, s % 1000);
            activation.setDouble(hidden - 1, stage + 1);
            t = System.nanoTime();
            if (tpSize > 1) {
                tp.allReduce(activation);
            } else {
                activation.setDouble(0, activation.getDouble(0) * tpSize);
                activation.setDouble(hidden - 1, activation.getDouble(hidden - 1) * tpSize);
            }
            record("tp all-reduce", t);
            if (stage < stages - 1) {
                outgoing.put("step", (long) s);
                outgoing.put("hidden", activation);
                t = System.nanoTime();
                pp.sendTensorDict(outgoing, stage + 1, tp);
                record("pp send tensor dict", t);
            }
            record("whole step", stepStart);
        }

        private void record(String op, long startNanos) {
            histograms.get(op).recordValue(Math.max(1, System.nanoTime() - startNanos));
        }

        private void check(int step, String what, long got, long expected) {
            checked++;
            if (got != expected) {
                throw new IllegalStateException("pipeline bench: stage " + stage + " tp rank " + tpRank + " step " + step
                        + ": " + what + " = " + got + ", expected " + expected);
            }
        }
    }

    /** Direct (off-heap) buffer memory in use, as the JVM counts it. */
    static long directBytes() {
        for (java.lang.management.BufferPoolMXBean b
                : java.lang.management.ManagementFactory.getPlatformMXBeans(java.lang.management.BufferPoolMXBean.class)) {
            if (b.getName().equals("direct")) {
                return b.getMemoryUsed();
            }
        }
        return 0;
    }

    /** Resident memory of this process (VmRSS), or 0 where /proc does not say. */
    static long rssBytes() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"), StandardCharsets.US_ASCII)) {
                if (line.startsWith("VmRSS:")) {
                    return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
                }
            }
        } catch (IOException | NumberFormatException ignored) {
            // not Linux
        }
        return 0;
    }

    private static void report(ParallelState ps, Step step, int hidden, int steps, long elapsed, long growth,
                               long directGrowth, int warmed) {
        long[] mine = {elapsed, growth, directGrowth, step.checked};
        List<byte[]> all = ps.world().allGatherObject(RankMeasurements.encode(mine, step.histograms.values()),
                byte[].class);
        if (ps.rank() != 0) {
            return;
        }
        long maxElapsed = 0;
        long maxGrowth = Long.MIN_VALUE;
        long maxDirect = Long.MIN_VALUE;
        long checked = 0;
        List<Histogram> merged = new ArrayList<>();
        OPS.forEach(op -> merged.add(new Histogram(3)));
        for (byte[] b : all) {
            RankMeasurements m = RankMeasurements.decode(b);
            long[] v = m.values();
            maxElapsed = Math.max(maxElapsed, v[0]);
            maxGrowth = Math.max(maxGrowth, v[1]);
            maxDirect = Math.max(maxDirect, v[2]);
            checked += v[3];
            for (int k = 0; k < m.histograms().size() && k < merged.size(); k++) {
                merged.get(k).add(m.histograms().get(k));
            }
        }
        System.out.println("@@row " + hidden + " " + steps + " " + maxElapsed + " " + maxGrowth + " " + checked + " "
                + maxDirect + " " + warmed);
        for (int k = 0; k < OPS.size(); k++) {
            Histogram h = merged.get(k);
            if (h.getTotalCount() > 0) {
                System.out.println("@@op " + hidden + " " + OPS.get(k).replace(' ', '_') + " "
                        + h.getValueAtPercentile(50) + " " + h.getValueAtPercentile(99) + " " + h.getTotalCount() + " "
                        + h.getValueAtPercentile(99.9) + " " + (long) h.getMean());
            }
        }
        System.out.flush();
    }
}
