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
     * The least timed steps for an activation of {@code hidden} f32 when none are given: about 2 GiB of
     * activations, 1,000 to 30,000 steps. Also what sizes the warm-up's rounds.
     */
    static int autoSteps(int hidden) {
        return (int) Math.max(1000, Math.min(30_000, (2L << 30) / (4L * hidden)));
    }

    /**
     * How long the timed steps run when their number is not given and the warm-up settled: the mean is the
     * throughput, and over a fraction of a second (2 GiB of 1 MiB activations take 0.1-0.2 s here) it weighs
     * the few collections and preemptions that fall in it by chance, where a job runs for hours.
     */
    static final double TIMED_SECONDS = 3.0;

    /** Cap on the timed steps the settled rate asks for (a 4 KiB step runs in microseconds). */
    static final int MAX_TIMED_STEPS = 2_000_000;

    /**
     * Timed steps when none were given: {@link #autoSteps}, or more so that they run for about
     * {@link #TIMED_SECONDS} at {@code secondsPerStep} (the settled rate, the same on every rank; 0 when
     * unknown).
     */
    static int timedSteps(int hidden, double secondsPerStep) {
        int least = autoSteps(hidden);
        if (secondsPerStep <= 0) {
            return least;
        }
        return (int) Math.max(least, Math.min(MAX_TIMED_STEPS, Math.ceil(TIMED_SECONDS / secondsPerStep)));
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
                Step step = new Step(ps, hidden, reuse);
                Settled settled;
                if (warmup >= 0) {
                    runSteps(step, 0, warmup);
                    settled = new Settled(warmup, 0);
                } else {
                    settled = settle(ps, step, autoSteps(hidden));
                }
                int warmed = settled.steps();
                int steps = stepsArg > 0 ? stepsArg : timedSteps(hidden, settled.secondsPerStep());
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
     * @return the steps run, and the seconds per step of the last round (the slowest rank's)
     */
    static Settled settle(ParallelState ps, Step step, int steps) {
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
                return new Settled(s, took / 1e9 / round);
            }
        }
    }

    /** Step-time bands of {@link #bands}, lower edges in µs (the last one open-ended). */
    static final long[] BAND_EDGES_MICROS = {0, 60, 100, 200, 500, 1_000, 2_000, 5_000};

    /**
     * Where the time of {@code steps} went: per band of {@link #BAND_EDGES_MICROS}, {lower µs, upper µs (0: none),
     * steps, their total nanoseconds}. The mean's excess over the p50 is in the upper bands: a few steps of
     * milliseconds weigh as much as thousands of steps a little slower.
     */
    static List<long[]> bands(Histogram steps) {
        int last = BAND_EDGES_MICROS.length - 1;
        List<long[]> out = new ArrayList<>();
        for (int b = 0; b <= last; b++) {
            out.add(new long[] {BAND_EDGES_MICROS[b], b < last ? BAND_EDGES_MICROS[b + 1] : 0, 0, 0});
        }
        for (org.HdrHistogram.HistogramIterationValue v : steps.recordedValues()) {
            long x = v.getValueIteratedTo();
            int b = last;
            while (b > 0 && x < BAND_EDGES_MICROS[b] * 1000) {
                b--;
            }
            out.get(b)[2] += v.getCountAtValueIteratedTo();
            out.get(b)[3] += v.getCountAtValueIteratedTo() * x;
        }
        return out;
    }

    /** What the warm-up did: {@code steps} run, the last round at {@code secondsPerStep} (0: no rounds). */
    record Settled(int steps, double secondsPerStep) {
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
        Histogram whole = merged.get(OPS.size() - 1);
        for (long[] b : bands(whole)) {
            System.out.println("@@band " + hidden + " " + b[0] + " " + b[1] + " " + b[2] + " " + b[3]);
        }
        System.out.flush();
    }
}
