package io.jcomm.spark;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.Tensor;
import io.jcomm.parallel.GroupCoordinator;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelState;
import io.jcomm.parallel.ParallelStateOptions;
import java.util.List;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;

/**
 * A Spark job whose barrier stage runs a TP x PP pipeline step on its partitions, every value checked: each
 * stage's TP group broadcasts the step's metadata from its first rank and all-reduces its shards, and each
 * stage hands {@code {step, hidden}} to the next as a tensor dict. Each rank returns what it verified;
 * the driver prints the answers in rank order.
 *
 * <pre>
 * SparkPipelineDemo [master] [tp] [pp] [steps]     (default: local-cluster[2,2,1024] 2 2 200)
 * </pre>
 */
public final class SparkPipelineDemo {

    private SparkPipelineDemo() {
    }

    public static void main(String[] args) {
        String master = args.length > 0 ? args[0] : "local-cluster[2,2,1024]";
        int tp = args.length > 1 ? Integer.parseInt(args[1]) : 2;
        int pp = args.length > 2 ? Integer.parseInt(args[2]) : 2;
        int steps = args.length > 3 ? Integer.parseInt(args[3]) : 200;
        SparkConf conf = new SparkConf().setMaster(master).setAppName("jcomm-pipeline");
        int code = 0;
        try (JavaSparkContext sc = new JavaSparkContext(conf)) {
            long t0 = System.nanoTime();
            List<String> lines = run(sc, tp, pp, steps, 1024);
            System.out.printf("jcomm spark demo: TP=%d x PP=%d on %d barrier tasks, %d steps in %.1f s%n", tp, pp,
                    tp * pp, steps, (System.nanoTime() - t0) / 1e9);
            for (String line : lines) {
                System.out.println("  " + line);
            }
        } catch (RuntimeException e) {
            e.printStackTrace();
            code = 1;
        }
        // Spark's non-daemon threads may outlive the context
        System.exit(code);
    }

    /** Runs the pipeline on {@code tp x pp} barrier tasks; one line per rank. */
    public static List<String> run(JavaSparkContext sc, int tp, int pp, int steps, int hidden) {
        return JcommSpark.run(sc, tp * pp, config -> rank(config, tp, pp, steps, hidden));
    }

    static String rank(DistributedConfig config, int tp, int pp, int steps, int hidden) {
        long t0 = System.nanoTime();
        try (ParallelState ps = ParallelState.initialize(config, ParallelStateOptions.defaults(), ParallelSizes.of(tp, pp))) {
            double readySeconds = (System.nanoTime() - t0) / 1e9;
            GroupCoordinator t = ps.tp();
            GroupCoordinator p = ps.pp();
            long verified = 0;
            float expectedFactor = tp * (tp + 1) / 2f;
            for (int s = 0; s < steps; s++) {
                Map<String, Object> meta = t.broadcastTensorDict(t.rankInGroup() == 0
                        ? Map.of("step", Tensor.ofInts(s), "request", "r-" + s) : null, 0);
                check(((Tensor) meta.get("step")).getDouble(0) == s && ("r-" + s).equals(meta.get("request")),
                        "metadata of step " + s);
                verified += 2;
                float[] shard = new float[hidden];
                for (int i = 0; i < hidden; i++) {
                    shard[i] = (t.rankInGroup() + 1) * (s + i % 7);
                }
                Tensor sum = t.allReduce(Tensor.ofFloats(shard));
                verified += verify(sum, s, expectedFactor, "all-reduce");
                if (!p.isFirstRank()) {
                    Map<String, Object> in = p.recvTensorDict();
                    check(((Tensor) in.get("step")).getDouble(0) == s, "step of the dict received at step " + s);
                    verified += 1 + verify((Tensor) in.get("hidden"), s, expectedFactor, "hidden received");
                }
                if (!p.isLastRank()) {
                    p.sendTensorDict(Map.of("step", Tensor.ofInts(s), "hidden", sum));
                }
            }
            return "rank " + ps.rank() + " (tp " + t.rankInGroup() + ", pp " + p.rankInGroup() + ", "
                    + config.launch().map(l -> "local " + l.localRank() + " of " + l.localWorldSize()).orElse("")
                    + "): groups ready in " + String.format(java.util.Locale.ROOT, "%.2f", readySeconds) + " s, " + verified
                    + " values verified, all exact, in pid " + ProcessHandle.current().pid();
        }
    }

    private static long verify(Tensor t, int step, float factor, String what) {
        long n = t.numel();
        for (int i = 0; i < n; i++) {
            double want = factor * (step + i % 7);
            check(t.getDouble(i) == want, what + " value " + i + " of step " + step + ": " + t.getDouble(i) + " != " + want);
        }
        return n;
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException("wrong " + what);
        }
    }
}
