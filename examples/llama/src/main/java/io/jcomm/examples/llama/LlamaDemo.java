package io.jcomm.examples.llama;

import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.Tensor;
import io.jcomm.parallel.GroupCoordinator;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelState;
import io.jcomm.parallel.ParallelStateOptions;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * A Llama decoder sharded over a jcomm job, for a newcomer to run:
 *
 * <pre>
 * bin/commrun --nproc-per-node 4 model --tp 2 --pp 2
 * bin/commrun --nproc-per-node 4 -cp examples/llama/target/jcomm-example-llama-0.1.0-SNAPSHOT.jar \
 *     io.jcomm.examples.llama.LlamaDemo --tp 2 --pp 2
 * </pre>
 *
 * Every rank joins the job's groups ({@link ParallelState}, TP x PP x DP = the world), writes the
 * seeded model once per host when it is not there yet ({@link ModelGenerator}), loads its shard, warms
 * up, answers the requests greedily ({@link Engine}), and gathers every replica's tokens and the logits
 * of the first steps. Rank 0 prints the tokens, the decode latency per token (p50, p99), tokens per
 * second and the share of each decode step spent inside jcomm calls; then it checks the tokens (and
 * logits, within {@link Reference#LOGIT_TOLERANCE}) against torch's reference ({@code --reference}) and
 * against a one-process run of the same weights (unless {@code --no-check}). Exit status 0 when every
 * check passed, 1 when one failed, 2 for a usage error. {@code --pd prefill|decode}: see
 * {@link Disaggregated}.
 *
 * <p>Lines for tests (rank 0): {@code llama: request I tokens T0 T1 ...},
 * {@code llama: torch reference: ... 0 differ ...}, {@code llama: one-process check: ...},
 * {@code llama: OK} or {@code llama: FAILED}.
 */
public final class LlamaDemo {

    private LlamaDemo() {
    }

    public static void main(String[] args) {
        System.exit(run(args, System.out));
    }

    static int run(String[] args, PrintStream out) {
        DemoOptions o;
        try {
            o = DemoOptions.parse(args);
        } catch (IllegalArgumentException e) {
            System.err.println("llama: " + e.getMessage());
            System.err.println(DemoOptions.USAGE);
            return 2;
        }
        if (o.help) {
            out.println(DemoOptions.USAGE);
            return 0;
        }
        DistributedConfig env = DistributedConfig.fromEnvironment();
        DistributedConfig cfg = o.timeout == null ? env : env.toBuilder().timeout(o.timeout).build();
        int world = cfg.worldSize();
        int tp = o.tp > 0 ? o.tp : Math.max(1, world / (o.pp * o.dp));
        if ((long) tp * o.pp * o.dp != world) {
            System.err.println("llama: TP " + tp + " x PP " + o.pp + " x DP " + o.dp + " is not the world size " + world);
            return 2;
        }
        // no TP message queue: this model broadcasts nothing over TP (its tokens go over PP), and the
        // queue's media driver would cost each rank its start-up
        ParallelStateOptions options = ParallelStateOptions.defaults().toBuilder().tpMessageQueue(false).build();
        Path dir;
        Outcome outcome;
        try (ParallelState ps = ParallelState.initialize(cfg, options, ParallelSizes.of(tp, o.pp, o.dp))) {
            dir = modelDirectory(o, cfg, ps, out);
            if (o.pd != null) {
                return new Disaggregated(o, cfg, ps, dir, out).run();
            }
            outcome = serve(o, cfg, ps, dir, out);
        }
        boolean ok = outcome.ok;
        if (cfg.rank() == 0 && o.check) {
            // after the job's groups are closed, so that no rank waits on this one while it runs alone
            long t0 = System.nanoTime();
            Engine.Result single = SingleProcess.run(dir, outcome.requests, o.logitsSteps, cfg.timeout());
            Reference.Comparison c = asReference(outcome.requests, single).compare(outcome.tokens, outcome.logits);
            out.printf(Locale.ROOT, "llama: one-process check (the same weights, unsharded, %.1f s): %s%n",
                    (System.nanoTime() - t0) / 1e9, c);
            ok &= c.ok();
        }
        if (cfg.rank() == 0) {
            out.println(ok ? "llama: OK" : "llama: FAILED");
        }
        out.flush();
        return ok ? 0 : 1;
    }

    /** What a run produced, on every rank after the gathers. */
    private static final class Outcome {
        List<Request> requests;
        Map<Integer, int[]> tokens;
        Map<Integer, List<float[]>> logits;
        boolean ok = true;
    }

    private static Outcome serve(DemoOptions o, DistributedConfig cfg, ParallelState ps, Path dir, PrintStream out) {
        int rank = ps.rank();
        CommClock clock = new CommClock();
        long t0 = System.nanoTime();
        LlamaModel model = LlamaModel.load(dir, ps, clock);
        LlamaConfig c = model.plan().config();
        out.printf(Locale.ROOT, "llama: rank %d: %s; %.1f MB of weights, loaded in %.2f s%n", rank, model.plan(),
                model.weightFloats() * 4 / 1e6, (System.nanoTime() - t0) / 1e9);
        Reference ref = o.reference == null ? null : Reference.read(o.reference);
        List<Request> requests = ref != null ? ref.asRequests() : o.workload.equals("shared-prefix")
                ? Request.sharedPrefix(o.groups, o.perGroup, o.systemTokens, o.questionTokens, o.tokens, c.vocab())
                : Request.defaults(o.prompts, o.tokens, c.vocab());
        int dp = ps.dp().worldSize();
        List<Request> warmup = o.warmup > 0 ? Request.defaults(dp, o.warmup, c.vocab()) : List.of();
        int capacity = Math.max(SingleProcess.capacity(requests), warmup.isEmpty() ? 1 : SingleProcess.capacity(warmup));
        Engine engine = new Engine(ps, model, o.logitsSteps);
        if (!warmup.isEmpty()) {
            engine.run(warmup, capacity); // the JIT compiles the loops before anything is timed
        }
        KvReuse kv = o.prefixCache ? KvReuse.open(o, cfg, ps, model, dir) : null;
        try {
            Engine.Result without = null;
            if (o.compareReuse) {
                ps.world().barrier();
                without = engine.run(requests, capacity);
            }
            if (kv != null) {
                kv.ready(out, rank == 0);
                engine = new Engine(ps, model, o.logitsSteps, kv.cache());
            }
            ps.world().barrier();
            Engine.Result r = engine.run(requests, capacity);
            Outcome outcome = report(o, ps, requests, r, ref, c.vocab(), out);
            if (kv != null) {
                outcome.ok &= reportReuse(ps, requests, without, r, kv, out);
                if (o.kvRelease) {
                    ps.world().barrier();
                    if (rank == 0) {
                        kv.release();
                    }
                }
                if (o.kvHold) {
                    kv.hold(out, rank);
                }
                ps.world().barrier();
            }
            return outcome;
        } finally {
            if (kv != null) {
                kv.close();
            }
        }
    }

    private static Outcome report(DemoOptions o, ParallelState ps, List<Request> requests, Engine.Result r, Reference ref,
                                  int vocab, PrintStream out) {
        int rank = ps.rank();
        Outcome outcome = new Outcome();
        outcome.requests = requests;
        outcome.tokens = gatherTokens(ps, requests, r);
        outcome.logits = o.logitsSteps == 0 ? Map.of() : gatherLogits(ps, requests, r, o.logitsSteps, vocab);
        double[][] stats = gatherStats(ps, r);
        if (rank == 0) {
            for (Map.Entry<Integer, int[]> e : outcome.tokens.entrySet()) {
                out.println("llama: request " + e.getKey() + " tokens " + join(e.getValue()));
            }
            report(ps, stats, r, out);
        }
        if (ref != null) {
            Reference.Comparison cmp = ref.compare(outcome.tokens, outcome.logits);
            if (rank == 0) {
                out.println("llama: torch reference: " + cmp + (ref.minTop2Gap() > 0
                        ? String.format(Locale.ROOT, " (torch's smallest top-2 margin %.4f)", ref.minTop2Gap()) : ""));
            }
            outcome.ok = cmp.ok();
        }
        out.flush();
        return outcome;
    }

    /**
     * The prefix cache's figures: prompt tokens computed and reused (every replica), time to first token
     * (rank 0's replica), with and, after {@code --compare-reuse}, without reuse, whose tokens must be the
     * same; and each rank's cache counters. Collective.
     *
     * @return whether the tokens with and without reuse are equal (true without {@code --compare-reuse})
     */
    private static boolean reportReuse(ParallelState ps, List<Request> requests, Engine.Result without, Engine.Result with,
                                       KvReuse kv, PrintStream out) {
        boolean counts = ps.tp().rankInGroup() == 0 && ps.pp().isFirstRank();
        Tensor t = Tensor.allocate(DType.I64, 4);
        if (counts) {
            t.setLong(0, with.promptTokensComputed);
            t.setLong(1, with.promptTokensReused);
            t.setLong(2, without == null ? 0 : without.promptTokensComputed);
        }
        ps.world().allReduce(t);
        Map<Integer, int[]> before = without == null ? null : gatherTokens(ps, requests, without);
        Map<Integer, int[]> after = without == null ? null : gatherTokens(ps, requests, with);
        out.println("llama: kv: rank " + ps.rank() + ": " + KvReuse.describe(kv.cache().stats()).orElse(""));
        boolean ok = true;
        if (ps.rank() == 0) {
            long computed = t.getLong(0);
            long reused = t.getLong(1);
            out.printf(Locale.ROOT, "llama: prefix cache: %d requests, prompt tokens computed %d, reused %d (%.1f %%); "
                            + "TTFT %s (rank 0's replica)%n", requests.size(), computed, reused,
                    100.0 * reused / Math.max(1, computed + reused), ttft(with));
            if (without != null) {
                int differ = 0;
                for (Map.Entry<Integer, int[]> e : before.entrySet()) {
                    differ += Arrays.equals(e.getValue(), after.get(e.getKey())) ? 0 : 1;
                }
                out.printf(Locale.ROOT, "llama: without reuse: prompt tokens computed %d; TTFT %s (rank 0's replica)%n",
                        t.getLong(2), ttft(without));
                out.println("llama: reuse check: " + requests.size() + " requests, " + differ + " differ");
                ok = differ == 0;
            }
        }
        out.flush();
        Tensor verdict = Tensor.ofLongs(ok ? 0 : 1);
        ps.world().allReduce(verdict);
        return verdict.getLong(0) == 0;
    }

    private static String ttft(Engine.Result r) {
        long[] v = r.ttftNanos.values().stream().mapToLong(Long::longValue).sorted().toArray();
        return String.format(Locale.ROOT, "p50 %.2f ms, p99 %.2f ms", percentile(v, 50) / 1e6, percentile(v, 99) / 1e6);
    }

    /**
     * The model directory: {@code --model} when it holds a {@code config.json}, else the seeded model of
     * {@code --preset}, written there (or in the temporary directory) by each host's local rank 0 while
     * the others wait at a world barrier.
     */
    private static Path modelDirectory(DemoOptions o, DistributedConfig cfg, ParallelState ps, PrintStream out) {
        Path dir = o.model != null ? o.model : Path.of(System.getProperty("java.io.tmpdir"),
                "jcomm-llama-" + o.preset + "-" + o.dtype.toLowerCase(Locale.ROOT) + "-seed" + o.seed);
        if (cfg.localRank() == 0 && !Files.isRegularFile(dir.resolve("config.json"))) {
            LlamaConfig c = o.presetConfig();
            long t0 = System.nanoTime();
            ModelGenerator.write(dir, c, o.seed, o.dtype);
            out.printf(Locale.ROOT, "llama: wrote the %s model (%s, %,d parameters, seed %d, %s) to %s in %.1f s%n",
                    o.preset, c, c.parameters(), o.seed, o.dtype, dir, (System.nanoTime() - t0) / 1e9);
        }
        ps.world().barrier();
        if (cfg.rank() == 0) {
            LlamaConfig c = LlamaConfig.read(dir.resolve("config.json"));
            out.printf(Locale.ROOT, "llama: model %s: %s, %,d parameters; TP %d x PP %d x DP %d%n", dir, c, c.parameters(),
                    ps.tp().worldSize(), ps.pp().worldSize(), ps.dp().worldSize());
        }
        return dir;
    }

    /** Every replica's tokens on every rank: one contribution per replica (its TP 0, stage 0 rank), summed. */
    private static Map<Integer, int[]> gatherTokens(ParallelState ps, List<Request> requests, Engine.Result r) {
        int[] offsets = new int[requests.size() + 1];
        for (int i = 0; i < requests.size(); i++) {
            offsets[i + 1] = offsets[i] + requests.get(i).maxNewTokens();
        }
        Tensor all = Tensor.allocate(DType.I64, offsets[requests.size()]);
        if (ps.tp().rankInGroup() == 0 && ps.pp().isFirstRank()) {
            for (Map.Entry<Integer, int[]> e : r.tokens.entrySet()) {
                for (int k = 0; k < e.getValue().length; k++) {
                    all.setLong(offsets[e.getKey()] + k, e.getValue()[k]);
                }
            }
        }
        ps.world().allReduce(all);
        Map<Integer, int[]> out = new LinkedHashMap<>();
        for (int i = 0; i < requests.size(); i++) {
            int[] t = new int[requests.get(i).maxNewTokens()];
            for (int k = 0; k < t.length; k++) {
                t[k] = (int) all.getLong(offsets[i] + k);
            }
            out.put(i, t);
        }
        return out;
    }

    /** The logits of each request's first {@code steps} steps, from each replica's TP 0 last-stage rank. */
    private static Map<Integer, List<float[]>> gatherLogits(ParallelState ps, List<Request> requests, Engine.Result r,
                                                            int steps, int vocab) {
        int[] kept = new int[requests.size()];
        int rows = 0;
        for (int i = 0; i < requests.size(); i++) {
            kept[i] = Math.min(steps, requests.get(i).maxNewTokens());
            rows += kept[i];
        }
        Tensor all = Tensor.allocate(DType.F32, rows, vocab);
        if (ps.tp().rankInGroup() == 0 && ps.pp().isLastRank()) {
            int row = 0;
            for (int i = 0; i < requests.size(); i++) {
                List<float[]> l = r.logits.get(i);
                for (int s = 0; s < kept[i]; s++) {
                    if (l != null) {
                        all.buffer().asFloatBuffer().put((row + s) * vocab, l.get(s));
                    }
                }
                row += kept[i];
            }
        }
        ps.world().allReduce(all);
        Map<Integer, List<float[]>> out = new LinkedHashMap<>();
        int row = 0;
        for (int i = 0; i < requests.size(); i++) {
            List<float[]> l = new ArrayList<>();
            for (int s = 0; s < kept[i]; s++) {
                float[] f = new float[vocab];
                all.buffer().asFloatBuffer().get((row + s) * vocab, f);
                l.add(f);
            }
            row += kept[i];
            out.put(i, l);
        }
        return out;
    }

    /** Per rank: decode tokens, decode ns, jcomm ns by kind (TP, PP, DP), p50 ns, p99 ns, prefills, prefill ns, wall ns. */
    private static final int STATS = 10;

    static double[][] gatherStats(ParallelState ps, Engine.Result r) {
        GroupCoordinator w = ps.world();
        Tensor t = Tensor.allocate(DType.F64, w.worldSize(), STATS);
        long[] sorted = r.decodeStepNanos.clone();
        Arrays.sort(sorted);
        long[] comm = r.decodeCommNanos;
        double[] mine = {r.decodeTokens(), r.decodeNanos(), comm[0], comm[1], comm[2], percentile(sorted, 50),
            percentile(sorted, 99), r.prefills, r.prefillNanos, r.wallNanos};
        for (int k = 0; k < STATS; k++) {
            t.setDouble((long) ps.rank() * STATS + k, mine[k]);
        }
        w.allReduce(t);
        double[][] out = new double[w.worldSize()][STATS];
        for (int i = 0; i < out.length; i++) {
            for (int k = 0; k < STATS; k++) {
                out[i][k] = t.getDouble((long) i * STATS + k);
            }
        }
        return out;
    }

    static void report(ParallelState ps, double[][] s, Engine.Result r0, PrintStream out) {
        // tokens per second: each replica's decode tokens over its decode time, summed over the replicas
        // (they decode at the same time); ranks 0 .. tp*pp-1 are replica 0, and so on (vLLM's layout)
        int perReplica = ps.tp().worldSize() * ps.pp().worldSize();
        double tokensPerSecond = 0;
        long decodeTokens = 0;
        for (int i = 0; i < s.length; i += perReplica) {
            decodeTokens += (long) s[i][0];
            tokensPerSecond += s[i][1] > 0 ? s[i][0] / (s[i][1] / 1e9) : 0;
        }
        double step = 0;
        double[] kinds = new double[3];
        double minShare = 1;
        double maxShare = 0;
        for (double[] rank : s) {
            step += rank[1];
            double mine = 0;
            for (int k = 0; k < 3; k++) {
                kinds[k] += rank[2 + k];
                mine += rank[2 + k];
            }
            double share = rank[1] > 0 ? mine / rank[1] : 0;
            minShare = Math.min(minShare, share);
            maxShare = Math.max(maxShare, share);
        }
        step = Math.max(1, step);
        out.printf(Locale.ROOT, "llama: decode: %d tokens, p50 %.2f ms, p99 %.2f ms per token (rank 0), %.1f tokens/s%s%n",
                decodeTokens, s[0][5] / 1e6, s[0][6] / 1e6, tokensPerSecond, s[0][7] == 0 ? ""
                        : String.format(Locale.ROOT, "; prefill: %d prompts, %.1f ms each (rank 0)", (long) s[0][7],
                        s[0][8] / s[0][7] / 1e6));
        out.printf(Locale.ROOT, "llama: inside jcomm calls: %.1f %% of a decode step (all ranks; %.1f-%.1f %% by rank): "
                        + "TP all-reduce/all-gather %.1f %%, PP hand-offs %.1f %% (waiting while the other stages compute "
                        + "included), DP agreement %.1f %%%n",
                100 * (kinds[0] + kinds[1] + kinds[2]) / step, 100 * minShare, 100 * maxShare, 100 * kinds[0] / step,
                100 * kinds[1] / step, 100 * kinds[2] / step);
        out.printf(Locale.ROOT, "llama: run: %.2f s wall on rank 0, %d idle iterations there (waiting for other replicas)%n",
                s[0][9] / 1e9, r0.idleIterations);
    }

    static long percentile(long[] sorted, int p) {
        if (sorted.length == 0) {
            return 0;
        }
        int i = (int) Math.ceil(p / 100.0 * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
    }

    static String join(int[] tokens) {
        StringBuilder b = new StringBuilder();
        for (int t : tokens) {
            b.append(b.length() == 0 ? "" : " ").append(t);
        }
        return b.toString();
    }

    /** A one-process run's tokens and logits as a reference to compare a sharded run with. */
    private static Reference asReference(List<Request> requests, Engine.Result single) {
        List<Reference.Entry> entries = new ArrayList<>();
        for (int i = 0; i < requests.size(); i++) {
            entries.add(new Reference.Entry(requests.get(i), single.tokens.get(i), single.logits.getOrDefault(i, List.of()),
                    Double.NaN));
        }
        return new Reference(entries, Double.NaN);
    }
}
