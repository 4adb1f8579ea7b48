package io.jcomm.tools.bench.pipeline;

import io.jcomm.tools.bench.TorchProcess;
import io.jcomm.api.config.Settings;
import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import io.jcomm.tools.bench.WorkerJvms;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code commbench pipeline}: the workload of a pipeline-parallel job, streaming. {@code --tp x --pp}
 * worker JVMs ({@link PipelineBenchWorker}) on this host, each step: stage 0's TP rank 0 broadcasts a
 * small metadata dict to its TP group ({@code broadcastTensorDict}), every stage all-reduces its
 * activation over TP, stage k sends {@code {step, activation}} to stage k+1 ({@code sendTensorDict}
 * with the TP group, so each TP rank sends its slice and the next stage all-gathers them), which
 * receives it ({@code recvTensorDict}); two values of every received activation are checked.
 *
 * <p>Two ways to receive, both run by default ({@code --recv both}): {@code plain}, the code of the README
 * ({@code pp.recvTensorDict()}: new tensors each step, recycled by the SDK's receive pool), and {@code reuse}
 * (the previous step's dict handed back to be received into: the best case). Each warms up until its step
 * rate settles ({@code --warmup auto}), then prints steps/s (the slowest rank's: the throughput), the whole
 * step's mean, p50, p99 and p99.9 over all ranks, the mean over the p50, and the largest growth of a rank's
 * resident and direct memory during the timed steps; then each operation's p50/p99. With {@code --torch},
 * the same job in torch 1.13 gloo ({@code scripts/torch_pipeline_bench.py}) right after, receiving as vLLM
 * does ({@code torch.empty} each step) and into a preallocated tensor, and all four side by side.
 */
@Command(name = "pipeline", mixinStandardHelpOptions = true,
        description = "Streams activations through a TP x PP pipeline of worker JVMs (tensor dicts, TP all-reduce, "
                + "TP metadata broadcast); steps/s and per-operation latency, optionally beside torch gloo.")
public final class PipelineBenchCommand implements Callable<Integer> {

    @Option(names = "--tp", defaultValue = "1", description = "tensor-parallel size (default ${DEFAULT-VALUE})")
    int tp;

    @Option(names = "--pp", defaultValue = "2", description = "pipeline stages (default ${DEFAULT-VALUE})")
    int pp;

    @Option(names = "--hidden", defaultValue = "1K,4K,16K,64K,256K,1M",
            description = "activation sizes in f32 elements, comma-separated, K/M = x1024/x1048576 "
                    + "(default ${DEFAULT-VALUE}: 4 KiB to 4 MiB)")
    String hidden;

    @Option(names = "--steps", defaultValue = "0",
            description = "timed steps per size (default: about 3 s of steps at the rate the warm-up settled on, and at "
                    + "least 2 GiB of activations, 1,000 to 30,000 steps; with a fixed --warmup, the latter)")
    int steps;

    @Option(names = "--warmup", defaultValue = "auto", description = "untimed steps per size first, or auto: rounds "
            + "until the step rate settles within 5 %% (the compilers done; 3 to 60 s) (default ${DEFAULT-VALUE}); "
            + "torch runs 200")
    String warmup;

    @Option(names = "--recv", defaultValue = "both", description = "plain: pp.recvTensorDict() as the README shows "
            + "(new tensors each step, from the SDK's receive pool); reuse: the previous step's dict handed back to be "
            + "received into; both (default ${DEFAULT-VALUE})")
    String recv;

    @Option(names = "--backend", defaultValue = "tcp", description = "CPU backend: tcp or gloo (default ${DEFAULT-VALUE})")
    String backend;

    @Option(names = {"-o", "--option"}, description = "CPU group option key=value (repeatable), e.g. tcp.shm=false")
    List<String> options = new ArrayList<>();

    @Option(names = "--jvm-arg", description = "extra worker JVM argument (repeatable)")
    List<String> jvmArgs = new ArrayList<>();

    @Option(names = "--torch", description = "then run the same job in torch 1.13 gloo (scripts/torch_pipeline_bench.py "
            + "with /usr/bin/python3) and print both side by side")
    boolean torch;

    @Option(names = "--script", description = "path of torch_pipeline_bench.py (default: scripts/ of the jcomm checkout)")
    Path script;

    @Option(names = "--pin", negatable = true, description = "start rank r on CPU r mod CPUs (taskset), as bin/commrun "
            + "binds workers that fit the CPUs (the default then); --no-pin leaves placement to the scheduler. torch's "
            + "ranks run as torchrun starts them, unbound")
    Boolean pin;

    @Option(names = "--bands", description = "also print where the steps' time went: per band of step time (under "
            + "60 us, 60-100, ... over 5 ms), the share of steps and of time, over all ranks")
    boolean bands;

    @Option(names = "--timeout", defaultValue = "900", description = "seconds before everything is killed (default ${DEFAULT-VALUE})")
    long timeoutSeconds;

    private final PrintStream out;

    public PipelineBenchCommand() {
        this(System.out);
    }

    PipelineBenchCommand(PrintStream out) {
        this.out = out;
    }

    /**
     * One size's result.
     *
     * @param hidden    activation elements (f32)
     * @param steps     timed steps
     * @param seconds   the slowest rank's time for them
     * @param rssGrowth the largest growth of a rank's resident memory during them, bytes ({@code Long.MIN_VALUE}:
     *                  not measured); the heap's first use counts too
     * @param directGrowth the largest growth of a rank's direct (off-heap) buffer memory during them, bytes
     *                  ({@code Long.MIN_VALUE}: not measured)
     * @param warmupSteps untimed steps run first
     * @param ops       per operation: p50, p99, p99.9 and mean in µs over all ranks (p99.9 and mean NaN when not
     *                  measured)
     * @param bands     where the steps' time went (jcomm only): per band of step time, {lower µs, upper µs (0: open),
     *                  steps, their total ns}, over all ranks
     */
    public record Row(int hidden, int steps, double seconds, long rssGrowth, long directGrowth, int warmupSteps,
                      Map<String, double[]> ops, List<long[]> bands) {
        public double stepsPerSecond() {
            return steps / seconds;
        }

        /** The whole step's {p50, p99, p99.9, mean} in µs, or null. */
        public double[] step() {
            return ops.get("whole step");
        }

        /** MB/s moved from one stage to the next (one activation per step). */
        public double handOffMBps() {
            return stepsPerSecond() * 4.0 * hidden / 1e6;
        }
    }

    static List<Integer> parseHidden(String list) {
        List<Integer> sizes = new ArrayList<>();
        for (String s : list.split(",")) {
            String v = s.trim().toUpperCase(Locale.ROOT);
            int mul = v.endsWith("K") ? 1 << 10 : v.endsWith("M") ? 1 << 20 : 1;
            if (mul > 1) {
                v = v.substring(0, v.length() - 1);
            }
            sizes.add(Math.multiplyExact(Integer.parseInt(v), mul));
        }
        return sizes;
    }

    /** Whether the workers are bound: {@code --pin}/{@code --no-pin}, else when they fit the CPUs (as commrun). */
    boolean pinned() {
        return pin != null ? pin : tp * pp <= Runtime.getRuntime().availableProcessors()
                && io.jcomm.tools.run.CpuBinding.findTaskset() != null;
    }

    /** The receive modes of {@code --recv}. */
    private List<String> modes() {
        return switch (recv) {
            case "both" -> List.of("plain", "reuse");
            case "plain", "alloc" -> List.of("plain");
            case "reuse" -> List.of("reuse");
            default -> throw new IllegalArgumentException("--recv must be plain, reuse or both, not " + recv);
        };
    }

    private int warmupSteps() {
        if (warmup.equals("auto")) {
            return -1;
        }
        int w = Integer.parseInt(warmup);
        if (w < 0) {
            throw new IllegalArgumentException("--warmup must be auto or >= 0");
        }
        return w;
    }

    /** Runs the jcomm side only in the first mode of {@code --recv}, with the options as parsed (for tests). */
    public List<Row> measureJcomm() throws Exception {
        List<Row> rows = new ArrayList<>();
        if (runJcomm(modes().get(0), parseHidden(hidden), rows) != 0) {
            throw new IllegalStateException("commbench pipeline: a worker failed (see its output)");
        }
        return rows;
    }

    @Override
    public Integer call() throws Exception {
        List<Integer> sizes;
        List<String> modes;
        try {
            sizes = parseHidden(hidden);
            modes = modes();
            warmupSteps();
        } catch (RuntimeException e) {
            System.err.println("commbench pipeline: " + e.getMessage());
            return 2;
        }
        if (tp < 1 || pp < 1 || tp * pp < 2 || sizes.stream().anyMatch(h -> h < 2 || h % tp != 0)) {
            System.err.println("commbench pipeline: --tp >= 1, --pp >= 1, at least 2 ranks, every --hidden >= 2 and a "
                    + "multiple of --tp");
            return 2;
        }
        out.printf(Locale.ROOT, "# commbench pipeline: TP=%d x PP=%d, %d worker JVMs, backend %s, warm-up %s; host: %d "
                        + "CPUs, %s%n", tp, pp, tp * pp, backend, warmup.equals("auto") ? "until the rate settles"
                        : warmup + " steps", Runtime.getRuntime().availableProcessors(), pinned() ? "pinned" : "unpinned");
        Map<String, List<Row>> all = new LinkedHashMap<>();
        int exit = 0;
        for (String mode : modes) {
            List<Row> rows = new ArrayList<>();
            exit = Math.max(exit, runJcomm(mode, sizes, rows));
            String name = "jcomm " + mode + (mode.equals("plain") ? " (pp.recvTensorDict())" : " (previous dict handed back)");
            print(name, rows);
            all.put("jcomm " + mode, rows);
        }
        if (torch) {
            for (String mode : List.of("alloc", "prealloc")) {
                List<Row> rows = new ArrayList<>();
                exit = Math.max(exit, runTorch(mode, sizes, rows));
                print("torch gloo " + mode + (mode.equals("alloc") ? " (torch.empty each step, as vLLM)"
                        : " (received into a preallocated tensor)"), rows);
                all.put("torch " + mode, rows);
            }
            sideBySide(all);
        }
        return exit;
    }

    private void print(String who, List<Row> rows) {
        out.printf(Locale.ROOT, "%n# %s%n", who);
        out.printf(Locale.ROOT, "%10s %10s %7s %7s %10s %10s %9s %9s %9s %9s %9s %8s %9s%n", "hidden", "bytes", "warmup",
                "steps", "steps/s", "MB/s", "mean(us)", "p50(us)", "p99(us)", "p99.9(us)", "mean/p50", "rss+MB",
                "direct+MB");
        for (Row r : rows) {
            double[] st = r.step();
            out.printf(Locale.ROOT, "%10d %10d %7s %7d %10.0f %10.0f %9s %9s %9s %9s %9s %8s %9s%n", r.hidden(),
                    4L * r.hidden(), r.warmupSteps() < 0 ? "-" : Integer.toString(r.warmupSteps()), r.steps(),
                    r.stepsPerSecond(), r.handOffMBps(), cell(st, 3), cell(st, 0), cell(st, 1), cell(st, 2),
                    st == null || Double.isNaN(st[3]) ? "-" : String.format(Locale.ROOT, "%.2f", st[3] / st[0]),
                    megabytes(r.rssGrowth()), megabytes(r.directGrowth()));
        }
        if (bands) {
            printBands(rows);
        }
        out.printf(Locale.ROOT, "  %10s", "p50/p99(us)");
        for (String op : PipelineBenchWorker.OPS) {
            if (!op.equals("whole step")) {
                out.printf(Locale.ROOT, " %16s", abbreviate(op));
            }
        }
        out.println();
        for (Row r : rows) {
            out.printf(Locale.ROOT, "  %10d", r.hidden());
            for (String op : PipelineBenchWorker.OPS) {
                if (!op.equals("whole step")) {
                    double[] v = r.ops().get(op);
                    out.printf(Locale.ROOT, " %16s", v == null ? "-" : String.format(Locale.ROOT, "%.1f/%.1f", v[0], v[1]));
                }
            }
            out.println();
        }
    }

    /** Per size, the share of steps and of time in each band of step time ({@code --bands}). */
    private void printBands(List<Row> rows) {
        for (Row r : rows) {
            if (r.bands().isEmpty()) {
                continue;
            }
            long steps = r.bands().stream().mapToLong(b -> b[2]).sum();
            long nanos = r.bands().stream().mapToLong(b -> b[3]).sum();
            out.printf(Locale.ROOT, "  where the time went, hidden %d: %-13s %8s %8s %9s%n", r.hidden(), "step(us)",
                    "steps%", "time%", "mean(us)");
            for (long[] b : r.bands()) {
                if (b[2] == 0) {
                    continue;
                }
                String band = b[1] == 0 ? ">" + b[0] : b[0] + "-" + b[1];
                out.printf(Locale.ROOT, "  %35s %-13s %8.3f %8.1f %9.0f%n", "", band, 100.0 * b[2] / steps,
                        100.0 * b[3] / nanos, b[3] / 1e3 / b[2]);
            }
        }
    }

    private static String cell(double[] v, int i) {
        return v == null || Double.isNaN(v[i]) ? "-" : String.format(Locale.ROOT, "%.1f", v[i]);
    }

    private static String megabytes(long bytes) {
        return bytes == Long.MIN_VALUE ? "-" : String.format(Locale.ROOT, "%.0f", bytes / 1e6);
    }

    private static String abbreviate(String op) {
        return switch (op) {
            case "tp broadcast metadata" -> "meta";
            case "tp all-reduce" -> "allreduce";
            case "pp send tensor dict" -> "send";
            case "pp recv tensor dict" -> "recv";
            default -> "step";
        };
    }

    /** steps/s of every run, and jcomm's over torch's receiving into a preallocated tensor. */
    private void sideBySide(Map<String, List<Row>> all) {
        out.printf(Locale.ROOT, "%n# side by side: steps/s, TP=%d x PP=%d%n", tp, pp);
        out.printf(Locale.ROOT, "%10s %10s", "hidden", "bytes");
        all.keySet().forEach(k -> out.printf(Locale.ROOT, " %15s", k));
        List<String> jcommModes = all.keySet().stream().filter(k -> k.startsWith("jcomm")).toList();
        jcommModes.forEach(k -> out.printf(Locale.ROOT, " %22s", k.substring(6) + " / torch prealloc"));
        out.println();
        List<Row> reference = all.getOrDefault("torch prealloc", List.of());
        for (Row first : all.values().iterator().next()) {
            int h = first.hidden();
            out.printf(Locale.ROOT, "%10d %10d", h, 4L * h);
            for (List<Row> rows : all.values()) {
                Row r = find(rows, h);
                out.printf(Locale.ROOT, " %15s", r == null ? "-" : String.format(Locale.ROOT, "%.0f", r.stepsPerSecond()));
            }
            Row ref = find(reference, h);
            for (String k : jcommModes) {
                Row r = find(all.get(k), h);
                out.printf(Locale.ROOT, " %22s", r == null || ref == null ? "-"
                        : String.format(Locale.ROOT, "%.2fx", r.stepsPerSecond() / ref.stepsPerSecond()));
            }
            out.println();
        }
    }

    private static Row find(List<Row> rows, int hidden) {
        return rows == null ? null : rows.stream().filter(r -> r.hidden() == hidden).findFirst().orElse(null);
    }

    private int runJcomm(String mode, List<Integer> sizes, List<Row> rows) throws Exception {
        StringBuilder sizeArg = new StringBuilder();
        sizes.forEach(h -> sizeArg.append(sizeArg.length() > 0 ? "," : "").append(h));
        TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().port(0).logConnections(false).build());
        int world = tp * pp;
        Map<Integer, Row> byHidden = new LinkedHashMap<>();
        int exit;
        List<String> flags = new ArrayList<>(List.of("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"));
        flags.addAll(jvmArgs);
        List<String> cmd = WorkerJvms.javaCommand(flags, PipelineBenchWorker.class);
        cmd.addAll(List.of(Integer.toString(tp), Integer.toString(pp), Integer.toString(warmupSteps()),
                Integer.toString(steps), mode, sizeArg.toString()));
        cmd.addAll(options);
        Map<String, String> env = new java.util.HashMap<>();
        env.put(Settings.CPU_BACKEND.name(), backend);
        env.put(Settings.LAUNCHER_STORE.name(), "1");
        env.put(Settings.HOST_ID.name(), null);
        boolean bind = pinned();
        try (WorkerJvms workers = WorkerJvms.start(world, r -> {
            List<String> c = new ArrayList<>();
            if (bind) {
                c.addAll(List.of("taskset", "-c", Integer.toString(r % Runtime.getRuntime().availableProcessors())));
            }
            c.addAll(cmd);
            return c;
        }, server.port(), env,
                (rank, line) -> line(rank, line, byHidden), "pipeline-bench-out")) {
            exit = workers.await(timeoutSeconds, "commbench pipeline");
        } finally {
            server.close();
        }
        synchronized (byHidden) {
            rows.addAll(byHidden.values());
        }
        return exit;
    }

    private void line(int rank, String line, Map<Integer, Row> byHidden) {
        String[] f = line.split(" ");
        if (line.startsWith("@@row ")) {
            int h = Integer.parseInt(f[1]);
            synchronized (byHidden) {
                byHidden.put(h, new Row(h, Integer.parseInt(f[2]), Long.parseLong(f[3]) / 1e9, Long.parseLong(f[4]),
                        Long.parseLong(f[6]), Integer.parseInt(f[7]), new LinkedHashMap<>(), new ArrayList<>()));
            }
        } else if (line.startsWith("@@op ")) {
            synchronized (byHidden) {
                Row r = byHidden.get(Integer.parseInt(f[1]));
                r.ops().put(f[2].replace('_', ' '), new double[] {Long.parseLong(f[3]) / 1e3, Long.parseLong(f[4]) / 1e3,
                        Long.parseLong(f[6]) / 1e3, Long.parseLong(f[7]) / 1e3});
            }
        } else if (line.startsWith("@@band ")) {
            synchronized (byHidden) {
                byHidden.get(Integer.parseInt(f[1])).bands().add(new long[] {Long.parseLong(f[2]), Long.parseLong(f[3]),
                        Long.parseLong(f[4]), Long.parseLong(f[5])});
            }
        } else {
            System.err.println("[rank " + rank + "] " + line);
        }
    }

    private int runTorch(String mode, List<Integer> sizes, List<Row> rows) throws Exception {
        Path py = script != null ? script : Path.of("scripts", "torch_pipeline_bench.py");
        if (!Files.isRegularFile(py)) {
            System.err.println("commbench pipeline: " + py + " not found (--script)");
            return 2;
        }
        StringBuilder sizeArg = new StringBuilder();
        sizes.forEach(h -> sizeArg.append(sizeArg.length() > 0 ? "," : "").append(h));
        int torchWarmup = warmupSteps() < 0 ? 200 : warmupSteps();
        List<String> cmd = new ArrayList<>(List.of("/usr/bin/python3", py.toString(), "--tp", Integer.toString(tp),
                "--pp", Integer.toString(pp), "--hidden", sizeArg.toString(), "--warmup", Integer.toString(torchWarmup),
                "--recv", mode));
        if (steps > 0) {
            cmd.addAll(List.of("--steps", Integer.toString(steps)));
        }
        Map<Integer, Row> byHidden = new LinkedHashMap<>();
        int exit = TorchProcess.run(cmd, timeoutSeconds, "commbench pipeline", line -> {
            Map<String, String> kv = new LinkedHashMap<>();
            for (String f : line.split(" ")) {
                int eq = f.indexOf('=');
                if (eq > 0) {
                    kv.put(f.substring(0, eq), f.substring(eq + 1));
                }
            }
            if (line.startsWith("ROW ")) {
                int h = Integer.parseInt(kv.get("hidden"));
                synchronized (byHidden) {
                    byHidden.put(h, new Row(h, Integer.parseInt(kv.get("steps")), Double.parseDouble(kv.get("seconds")),
                            Long.MIN_VALUE, Long.MIN_VALUE, torchWarmup, new LinkedHashMap<>(), new ArrayList<>()));
                }
            } else if (line.startsWith("OP ")) {
                synchronized (byHidden) {
                    Row r = byHidden.get(Integer.parseInt(kv.get("hidden")));
                    r.ops().put(kv.get("name").replace('_', ' '), new double[] {Double.parseDouble(kv.get("p50_us")),
                            Double.parseDouble(kv.get("p99_us")), Double.parseDouble(kv.getOrDefault("p999_us", "NaN")),
                            Double.parseDouble(kv.getOrDefault("mean_us", "NaN"))});
                }
            } else if (!line.startsWith("#")) {
                System.err.println("[torch] " + line);
            }
        });
        if (exit == -1) {
            return 1;
        }
        synchronized (byHidden) {
            rows.addAll(byHidden.values());
        }
        return exit == 0 ? 0 : 1;
    }
}
