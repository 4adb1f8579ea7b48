package io.jcomm.tools.demo;

import io.jcomm.api.config.Settings;
import io.jcomm.actor.ActorRankMap;
import io.jcomm.actor.ActorRankMapper;
import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.Tensor;
import io.jcomm.runtime.shm.ProcessIdentity;
import io.jcomm.api.ray.ActorId;
import io.jcomm.parallel.GroupCoordinator;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelState;
import io.jcomm.parallel.ParallelStateOptions;
import io.jcomm.tools.bench.RankMeasurements;
import java.io.IOException;
import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import org.HdrHistogram.Histogram;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * The pipeline demo ({@code bin/commrun --nproc-per-node 4 demo --tp 2 --pp 2}): a TP x PP job built
 * with the SDK's defaults (the launcher's store, the best available CPU backend, the shared-memory
 * queue for TP metadata, NCCL when GPUs exist else the CPU device communicator), maps every rank's
 * actor id to its PP rank ({@link ActorRankMapper}, as vLLM's Ray adapter does), then runs a few
 * hundred pipelined steps, each:
 *
 * <ol>
 *   <li>stage 0: TP rank 0 broadcasts the step's request metadata (a tensor dict: step, request id,
 *       positions) to its TP group;</li>
 *   <li>every stage: a TP all-reduce of its activation shard;</li>
 *   <li>stage k sends its activation to stage k+1 as a tensor dict (each TP rank sends its 1/TP slice,
 *       the next stage all-gathers it in its TP group, as vLLM does).</li>
 * </ol>
 * Activations are host tensors (on a GPU host the groups still get NCCL communicators, but the
 * demo's data moves through the CPU side). The receiving stage receives into the tensors of its previous
 * step ({@link GroupCoordinator#recvTensorDict(int, GroupCoordinator, Map)}). Every received and reduced
 * value is checked exactly (they are small integers in floats; nothing is allocated per value); a wrong
 * value fails the rank (exit 1), which makes commrun stop the job. Then the same number of steps runs
 * again checking two values per tensor, so that the report shows the rate of the communication beside
 * the rate with the checks. Rank 0 prints the report: per-operation p50/p99 over all ranks
 * (HdrHistogram, the checked steps) and steps per second.
 */
@Command(name = "pipeline", mixinStandardHelpOptions = true,
        description = {"TP x PP pipeline over real processes, with every value verified; prints latencies and steps/s.",
                "The default of demo: 'demo --tp 2 --pp 2' is 'demo pipeline --tp 2 --pp 2'."})
public final class PipelineDemo implements Callable<Integer> {

    @Option(names = "--tp", description = "tensor-parallel size (default ${DEFAULT-VALUE})")
    int tp = 2;

    @Option(names = "--pp", description = "pipeline stages (default ${DEFAULT-VALUE})")
    int pp = 2;

    @Option(names = "--steps", description = "measured steps (default ${DEFAULT-VALUE})")
    int steps = 300;

    @Option(names = "--warmup", description = "unmeasured steps first (default ${DEFAULT-VALUE})")
    int warmup = 50;

    @Option(names = "--hidden", description = "activation elements (f32) per step (default ${DEFAULT-VALUE})")
    int hidden = 1024;

    @Option(names = "--moe", description = "also run a mixture-of-experts layer each step over the EP group (the TP "
            + "ranks): a deterministic router sends every token to 2 of 2 x EP experts, dispatch, an expert function, "
            + "combine, every value verified")
    boolean moe;

    @Option(names = "--device",
            description = "auto: NCCL and cuda:LOCAL_RANK when GPUs are usable, else the CPU communicator; "
                    + "cpu: the CPU communicator everywhere (e.g. more ranks than GPUs) (default ${DEFAULT-VALUE})")
    String device = "auto";

    @Option(names = "--phases", description = "print a line (\"demo: phase NAME\") when each phase starts: init, "
            + "group NAME (each group made), ready (all groups made), warmup, steps, done; for tests that inject "
            + "failures at a phase")
    boolean phases;

    private final PrintStream out;

    public PipelineDemo() {
        this(System.out);
    }

    PipelineDemo(PrintStream out) {
        this.out = out;
    }

    /** Operations the report lists, in order. */
    static final String OP_META = "tp broadcast metadata";
    static final String OP_ALLREDUCE = "tp all-reduce";
    static final String OP_SEND = "pp send tensor dict";
    static final String OP_RECV = "pp recv tensor dict";
    static final String OP_STEP = "whole step";
    static final String OP_MOE = "ep dispatch+combine";

    @Override
    public Integer call() {
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        if (tp < 1 || pp < 1 || cfg.worldSize() % (tp * pp) != 0) {
            System.err.println("demo: world size " + cfg.worldSize() + " is not a multiple of tp x pp = " + tp * pp
                    + " (run it with: bin/commrun --nproc-per-node " + Math.max(1, tp * pp) + " demo --tp " + tp
                    + " --pp " + pp + ")");
            return 2;
        }
        if (steps < 1 || warmup < 0 || hidden < 1 || hidden % tp != 0) {
            System.err.println("demo: --steps must be >= 1, --warmup >= 0, --hidden >= 1 and a multiple of --tp");
            return 2;
        }
        ParallelSizes sizes = ParallelSizes.of(tp, pp, cfg.worldSize() / (tp * pp));
        Launch launch = Launch.of(Settings.LAUNCH_EPOCH_MS.fromProcess().orElse(null));
        phase("init");
        // every group of the job at once (the fastest start)
        try (ParallelState ps = ParallelState.initialize(cfg, options(), sizes)) {
            long readyMillis = launch.millisSince();
            long readyCpuMillis = cpuMillis();
            phase("ready");
            int actors = mapActors(ps, cfg);
            // the TP broadcaster is made in the background; the measured steps should not share the
            // CPU with its making (the warm-up's first TP broadcast then switches to it)
            ps.tp().awaitMessageQueue(ps.tp().cpuGroup().defaultTimeout());
            long broadcasterMillis = launch.millisSince();
            Stage stage = new Stage(ps, hidden, moe);
            phase("warmup");
            for (int s = 0; s < warmup; s++) {
                stage.step(s, false);
            }
            ps.world().barrier();
            phase("steps");
            long t0 = System.nanoTime();
            for (int s = warmup; s < warmup + steps; s++) {
                stage.step(s, true);
            }
            long elapsed = System.nanoTime() - t0;
            ps.world().barrier();
            // the same steps again checking two values of each tensor: the rate of the communication itself
            long t1 = System.nanoTime();
            for (int s = warmup + steps; s < warmup + 2 * steps; s++) {
                stage.step(s, false, false);
            }
            long unchecked = System.nanoTime() - t1;
            ps.world().barrier();
            report(ps, stage, elapsed, unchecked, launch, new long[] {readyMillis, readyCpuMillis, broadcasterMillis},
                    actors);
        }
        phase("done");
        return 0;
    }

    private synchronized void phase(String name) {
        if (phases) {
            out.println("demo: phase " + name);
            out.flush();
        }
    }

    /** The SDK's defaults, or the CPU device communicator everywhere with {@code --device cpu}. */
    ParallelStateOptions options() {
        ParallelStateOptions.Builder b;
        if (device.equalsIgnoreCase("cpu")) {
            b = ParallelStateOptions.builder().device(Device.CPU).deviceCommunicator("cpu");
        } else if (device.equalsIgnoreCase("auto")) {
            b = ParallelStateOptions.defaults().toBuilder();
        } else {
            throw new CommandLine.ParameterException(new CommandLine(this), "--device must be auto or cpu, not " + device);
        }
        if (phases) {
            b.listener(new io.jcomm.parallel.GroupListener() {
                @Override
                public void created(GroupCoordinator group) {
                    phase("group " + group.name());
                }
            });
        }
        return b.build();
    }

    /** The actor id of global rank {@code rank} in this job (as a Ray actor would have one). */
    static ActorId actorOf(DistributedConfig cfg, int rank) {
        return new ActorId(0x6a636f6d6d000000L | cfg.masterPort(), 0x5eed000000000000L | rank);
    }

    /**
     * Maps every rank's actor id to its PP rank the way vLLM's Ray adapter does (an all-gather of the
     * ids over the PP group) and checks the map against the layout.
     *
     * @return the number of actors in this rank's map
     */
    static int mapActors(ParallelState ps, DistributedConfig cfg) {
        GroupCoordinator pp = ps.pp();
        ActorRankMap map = ActorRankMapper.map(pp, actorOf(cfg, ps.rank()));
        if (map.size() != pp.worldSize() || map.rankOf(actorOf(cfg, ps.rank())) != pp.rankInGroup()) {
            throw new IllegalStateException("demo: rank " + ps.rank() + ": actor map " + map + " does not place this rank at "
                    + pp.rankInGroup());
        }
        for (int r = 0; r < pp.worldSize(); r++) {
            ActorId expected = actorOf(cfg, pp.ranks().get(r));
            if (!map.actorOf(r).equals(expected) || map.rankOf(expected) != r) {
                throw new IllegalStateException("demo: rank " + ps.rank() + ": actor map " + map + " has " + map.actorOf(r)
                        + " at PP rank " + r + ", expected " + expected);
            }
        }
        return map.size();
    }

    /**
     * Where the cold start is measured from: the instant the launcher began starting the worker JVMs
     * ({@code JCOMM_LAUNCH_EPOCH_MS}, set by {@code commrun}), else this process's start.
     */
    record Launch(long epochMillis, boolean byLauncher) {

        static Launch of(String launcherEpochMillis) {
            if (launcherEpochMillis != null && !launcherEpochMillis.isBlank()) {
                try {
                    return new Launch(Long.parseLong(launcherEpochMillis.trim()), true);
                } catch (NumberFormatException ignored) {
                    // not ours: fall back to the process start
                }
            }
            return new Launch(processStartMillis(), false);
        }

        /**
         * This process's start: its age from {@code /proc} (start ticks against {@code /proc/uptime},
         * both on the boot clock; {@link ProcessHandle.Info#startInstant()} adds a boot time rounded to
         * the second, and was 0.8-1.2 s early here), else the JVM's own start time (which leaves out
         * most of the JVM's creation).
         */
        static long processStartMillis() {
            long ticks = ProcessIdentity.self().startTicks();
            if (ticks >= 0) {
                try {
                    String up = Files.readString(Path.of("/proc/uptime"), StandardCharsets.US_ASCII);
                    double uptimeSeconds = Double.parseDouble(up.substring(0, up.indexOf(' ')));
                    // /proc counts in USER_HZ = 100 ticks per second
                    return System.currentTimeMillis() - ((long) (uptimeSeconds * 1000) - ticks * 10);
                } catch (IOException | RuntimeException ignored) {
                    // not Linux: the JVM's start below
                }
            }
            return ManagementFactory.getRuntimeMXBean().getStartTime();
        }

        long millisSince() {
            return System.currentTimeMillis() - epochMillis;
        }

        String describe() {
            return byLauncher ? "after the JVMs were launched" : "after JVM start";
        }
    }

    /** CPU time of this process so far (all threads), or -1 where the platform does not say. */
    private static long cpuMillis() {
        return ProcessHandle.current().info().totalCpuDuration().map(Duration::toMillis).orElse(-1L);
    }

    /** What one rank does each step, and what it measured. */
    static final class Stage {
        final ParallelState ps;
        final GroupCoordinator tp;
        final GroupCoordinator pp;
        /** The EP group with {@code --moe}, else null. */
        final GroupCoordinator ep;
        final int stage;
        final int stages;
        final int tpRank;
        final int tpSize;
        final int hidden;
        final long triangle; // 1 + 2 + ... + tpSize: the all-reduce of (tpRank + 1) * v
        final Tensor shard;
        final Map<String, Histogram> histograms = new LinkedHashMap<>();
        /** What this stage sends each step (reused), and the dict it received last (received into next). */
        final Map<String, Object> outgoing = new LinkedHashMap<>();
        Map<String, Object> received;
        long checkedValues;

        Stage(ParallelState ps, int hidden) {
            this(ps, hidden, false);
        }

        Stage(ParallelState ps, int hidden, boolean moe) {
            this.ps = ps;
            this.ep = moe ? ps.ep() : null;
            this.tp = ps.tp();
            this.pp = ps.pp();
            this.stage = pp.rankInGroup();
            this.stages = pp.worldSize();
            this.tpRank = tp.rankInGroup();
            this.tpSize = tp.worldSize();
            this.hidden = hidden;
            this.triangle = (long) tpSize * (tpSize + 1) / 2;
            this.shard = Tensor.allocate(DType.F32, hidden);
            for (String op : List.of(OP_META, OP_ALLREDUCE, OP_SEND, OP_RECV, OP_STEP)) {
                histograms.put(op, new Histogram(3));
            }
            if (ep != null) {
                histograms.put(OP_MOE, new Histogram(3));
            }
        }

        /** Tokens per rank and their width in the MoE layer; experts per EP rank. */
        static final int MOE_TOKENS = 16;
        static final int MOE_HIDDEN = 64;
        static final int EXPERTS_PER_RANK = 2;

        /** Element h of token t of EP rank r at step s (a small integer, so every sum below is exact). */
        static long moeInput(int s, int r, int t, int h) {
            return (s + r * 31L + t * 7L + h) % 97;
        }

        /** The router: token t's j-th expert (two distinct experts per token, deterministic). */
        static int moeExpert(int s, int r, int t, int j, int experts) {
            int first = (s * 7 + r * 3 + t) % experts;
            return j == 0 ? first : (first + 1 + (s + t) % (experts - 1)) % experts;
        }

        /**
         * One MoE layer over the EP group: route every token to two experts (weights 1/2 each), dispatch,
         * run expert e as {@code x * (e + 1)}, combine, and check every value against the local formula.
         */
        void moeStep(int s, boolean measure) {
            int r = ep.rankInGroup();
            int experts = EXPERTS_PER_RANK * ep.worldSize();
            Tensor in = Tensor.allocate(DType.F32, MOE_TOKENS, MOE_HIDDEN);
            int[] ids = new int[MOE_TOKENS * 2];
            float[] weights = new float[MOE_TOKENS * 2];
            for (int t = 0; t < MOE_TOKENS; t++) {
                for (int h = 0; h < MOE_HIDDEN; h++) {
                    in.setDouble((long) t * MOE_HIDDEN + h, moeInput(s, r, t, h));
                }
                for (int j = 0; j < 2; j++) {
                    ids[t * 2 + j] = moeExpert(s, r, t, j, experts);
                    weights[t * 2 + j] = 0.5f;
                }
            }
            long t0 = System.nanoTime();
            io.jcomm.parallel.DispatchResult d = ep.dispatch(in, io.jcomm.parallel.ExpertRouting.topK(experts, 2, ids,
                    weights));
            Tensor tokens = d.tokens();
            int[] rowExperts = d.expertIds();
            Tensor expertOut = Tensor.allocate(DType.F32, d.rows(), MOE_HIDDEN);
            for (int row = 0; row < d.rows(); row++) {
                for (int h = 0; h < MOE_HIDDEN; h++) {
                    long at = (long) row * MOE_HIDDEN + h;
                    expertOut.setDouble(at, tokens.getDouble(at) * (rowExperts[row] + 1));
                }
            }
            Tensor out = ep.combine(d, expertOut);
            record(measure, OP_MOE, t0);
            for (int t = 0; t < MOE_TOKENS; t++) {
                for (int h = 0; h < MOE_HIDDEN; h++) {
                    long x = moeInput(s, r, t, h);
                    double expected = 0.5 * x * (ids[t * 2] + 1) + 0.5 * x * (ids[t * 2 + 1] + 1);
                    double got = out.getDouble((long) t * MOE_HIDDEN + h);
                    check(s, "moe token x2 (token * width + h)", t * MOE_HIDDEN + h, (long) (2 * got), (long) (2 * expected));
                }
            }
        }

        /** Stage 0's base value of element i at step s; stage k adds k (always a small integer). */
        static long base(int s, int i) {
            return (s % 97) + (i % 13);
        }

        void step(int s, boolean measure) {
            step(s, measure, true);
        }

        /**
         * One step; with {@code verify} every received and reduced value is checked, else only two values of
         * each (the step rate of the communication itself, which the report prints beside the checked one).
         */
        void step(int s, boolean measure, boolean verify) {
            long stepStart = System.nanoTime();
            long t;
            if (stage == 0) {
                t = System.nanoTime();
                Map<String, Object> meta = tp.broadcastTensorDict(tpRank == 0 ? Map.of("step", (long) s,
                        "request", "req-" + s, "positions", Tensor.ofInts(s, s + 1, s + 2, s + 3)) : null, 0);
                record(measure, OP_META, t);
                check(s, "metadata step", -1, ((Number) meta.get("step")).longValue(), s);
                check(s, "metadata request", -1, meta.get("request").equals("req-" + s) ? 1 : 0, 1);
                Tensor pos = (Tensor) meta.get("positions");
                for (int j = 0; j < 4; j++) {
                    check(s, "metadata positions", j, pos.getLong(j), s + j);
                }
            } else {
                t = System.nanoTime();
                // received into the previous step's tensors: a stream of hand-offs allocates nothing
                received = pp.recvTensorDict(stage - 1, tp, received);
                record(measure, OP_RECV, t);
                check(s, "received step", -1, ((Number) received.get("step")).longValue(), s);
                Tensor h = (Tensor) received.get("hidden");
                check(s, "received numel", -1, h.numel(), hidden);
                for (int i = 0; i < hidden; i = next(i, verify)) {
                    double v = h.getDouble(i);
                    long expected = triangle * (base(s, i) + stage - 1);
                    check(s, "received hidden", i, (long) v, expected);
                    check(s, "received hidden (integral)", i, v == Math.rint(v) ? 1 : 0, 1);
                }
            }
            // this stage's shard: (tpRank + 1) * (value of this stage), the input's value + 1 on later stages
            for (int i = 0; i < hidden; i++) {
                shard.setDouble(i, (double) (tpRank + 1) * (base(s, i) + stage));
            }
            t = System.nanoTime();
            Tensor reduced = tp.allReduce(shard);
            record(measure, OP_ALLREDUCE, t);
            for (int i = 0; i < hidden; i = next(i, verify)) {
                check(s, "all-reduced", i, (long) reduced.getDouble(i), triangle * (base(s, i) + stage));
            }
            if (stage < stages - 1) {
                outgoing.put("step", (long) s);
                outgoing.put("hidden", reduced);
                t = System.nanoTime();
                pp.sendTensorDict(outgoing, stage + 1, tp);
                record(measure, OP_SEND, t);
            }
            if (ep != null) {
                moeStep(s, measure);
            }
            record(measure, OP_STEP, stepStart);
        }

        /** The next index to check: every one when verifying, else the first and the last only. */
        private int next(int i, boolean verify) {
            return verify || i == hidden - 1 ? i + 1 : hidden - 1;
        }

        private void record(boolean measure, String op, long startNanos) {
            if (measure) {
                histograms.get(op).recordValue(Math.max(1, System.nanoTime() - startNanos));
            }
        }

        /** Counts one checked value; the message (with {@code index} when it is one) is built only on a mismatch. */
        private void check(int step, String what, int index, long got, long expected) {
            checkedValues++;
            if (got != expected) {
                throw new IllegalStateException("demo: rank " + ps.rank() + " (stage " + stage + ", tp rank " + tpRank
                        + ") step " + step + ": " + what + (index >= 0 ? "[" + index + "]" : "") + " = " + got
                        + ", expected " + expected);
            }
        }
    }

    /**
     * Rank 0 prints the report of every rank's measurements; {@code coldStart}: milliseconds from the
     * launch to this rank's groups, its CPU time until then, milliseconds to its TP broadcaster.
     */
    private void report(ParallelState ps, Stage st, long elapsedNanos, long uncheckedNanos, Launch launch,
                        long[] coldStart, int actors) {
        long[] mine = new long[3 + coldStart.length];
        mine[0] = elapsedNanos;
        mine[1] = uncheckedNanos;
        System.arraycopy(coldStart, 0, mine, 2, coldStart.length);
        mine[2 + coldStart.length] = st.checkedValues;
        List<byte[]> all = ps.world().allGatherObject(RankMeasurements.encode(mine, st.histograms.values()),
                byte[].class);
        if (ps.rank() != 0) {
            return;
        }
        List<String> ops = new ArrayList<>(st.histograms.keySet());
        Map<String, Histogram> merged = new LinkedHashMap<>();
        ops.forEach(op -> merged.put(op, new Histogram(3)));
        long maxElapsed = 0;
        long maxUnchecked = 0;
        long lastReady = 0;
        long readyCpu = 0;
        long lastBroadcaster = 0;
        long checked = 0;
        for (byte[] b : all) {
            RankMeasurements m = RankMeasurements.decode(b);
            long[] v = m.values();
            if (v.length != mine.length) {
                throw new IllegalStateException("demo: a rank sent " + v.length + " figures, " + mine.length + " expected");
            }
            maxElapsed = Math.max(maxElapsed, v[0]);
            maxUnchecked = Math.max(maxUnchecked, v[1]);
            lastReady = Math.max(lastReady, v[2]);
            readyCpu = readyCpu < 0 || v[3] < 0 ? -1 : readyCpu + v[3];
            lastBroadcaster = Math.max(lastBroadcaster, v[4]);
            checked += v[5];
            for (int k = 0; k < m.histograms().size() && k < ops.size(); k++) {
                merged.get(ops.get(k)).add(m.histograms().get(k));
            }
        }
        GroupCoordinator tp = ps.tp();
        String cpu = tp.cpuGroup().backendName();
        String device = tp.deviceCommunicator().map(d -> d.name()).orElse("none") + ", device " + tp.device();
        double seconds = maxElapsed / 1e9;
        out.printf(Locale.ROOT, "jcomm pipeline demo: TP=%d x PP=%d (DP=%d) on %s, %s%n", st.tpSize, st.stages,
                ps.worldSize() / (st.tpSize * st.stages), plural(ps.worldSize(), "rank"), plural(ps.topology().nodeCount(), "host"));
        ps.config().launch().ifPresent(l -> out.printf(Locale.ROOT, "  launched by %s%n", l.describe()));
        out.printf(Locale.ROOT, "  CPU backend %s, device communicator %s, TP metadata via %s, activations in host memory%n",
                cpu, device, tp.broadcastsThroughQueue() ? "the shared-memory message queue" : "the CPU group");
        out.printf(Locale.ROOT, "  actor ids mapped to PP ranks (ActorRankMapper, %d per PP group) and checked%n", actors);
        // the slowest rank's figures: the job is ready when its last rank is
        out.printf(Locale.ROOT, "  groups ready %.2f s %s (slowest of %s%s; TP broadcaster %.2f s); %d steps (+%d "
                + "warm-up) of %d f32 in %.2f s: %.0f steps/s, checking every value; the same number again checking "
                + "two values per tensor: %.0f steps/s%n", lastReady / 1000.0, launch.describe(),
                plural(ps.worldSize(), "rank"), readyCpu < 0 ? "" : String.format(Locale.ROOT, ", %.2f s CPU in all",
                        readyCpu / 1000.0), lastBroadcaster / 1000.0, steps, warmup, hidden, seconds, steps / seconds,
                steps / (maxUnchecked / 1e9));
        if (st.ep != null) {
            out.printf(Locale.ROOT, "  MoE layer each step over EP=%d (%s): %d tokens of %d f32 per rank, 2 of %d experts "
                    + "per token, dispatch, expert, combine%n", st.ep.worldSize(), st.ep.all2allManager().name(),
                    Stage.MOE_TOKENS, Stage.MOE_HIDDEN, Stage.EXPERTS_PER_RANK * st.ep.worldSize());
        }
        out.printf(Locale.ROOT, "  verified %d values on %s: all exact%n", checked, plural(ps.worldSize(), "rank"));
        out.printf(Locale.ROOT, "  %-24s %9s %10s %10s%n", "operation", "count", "p50(us)", "p99(us)");
        for (Map.Entry<String, Histogram> e : merged.entrySet()) {
            Histogram h = e.getValue();
            if (h.getTotalCount() == 0) {
                continue;
            }
            out.printf(Locale.ROOT, "  %-24s %9d %10.1f %10.1f%n", e.getKey(), h.getTotalCount(),
                    h.getValueAtPercentile(50) / 1000.0, h.getValueAtPercentile(99) / 1000.0);
        }
        out.flush();
    }

    private static String plural(int n, String what) {
        return n + " " + what + (n == 1 ? "" : "s");
    }

    /**
     * The main class of {@code demo} (commrun's {@code demo}, the manifests in {@code deploy/}): runs
     * {@link DemoCommand}, whose default subcommand is this pipeline.
     */
    public static void main(String[] args) {
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        int code = DemoCommand.run(System.out, args);
        if (code != 0) {
            System.exit(code);
        }
    }
}
