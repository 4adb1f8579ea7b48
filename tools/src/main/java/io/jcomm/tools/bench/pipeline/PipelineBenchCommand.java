package io.jcomm.tools.bench.pipeline;

import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import io.jcomm.tools.bench.WorkerJvms;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code commbench pipeline}: the workload of a pipeline-parallel job, streaming. {@code --tp x --pp}
 * worker JVMs ({@link PipelineBenchWorker}) on this host, each step: stage 0's TP rank 0 broadcasts a
 * small metadata dict to its TP group ({@code broadcastTensorDict}), every stage all-reduces its
 * activation over TP, stage k sends {@code {step, activation}} to stage k+1 ({@code sendTensorDict}
 * with the TP group, so each TP rank sends its slice and the next stage all-gathers them), which
 * receives it ({@code recvTensorDict}); two values of every received activation are checked. Prints
 * steps/s (the slowest rank's), per-operation p50/p99 over all ranks and the largest growth of a rank's
 * resident memory and of its direct buffer memory during the timed steps; with {@code --torch}, the same job in torch 1.13 gloo
 * ({@code scripts/torch_pipeline_bench.py}) right after, and both side by side.
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
            description = "timed steps per size (default: by size, 300 to 3,000, about 2 GiB of activations)")
    int steps;

    @Option(names = "--warmup", defaultValue = "200", description = "untimed steps per size first (default ${DEFAULT-VALUE})")
    int warmup;

    @Option(names = "--recv", defaultValue = "reuse", description = "alloc: recvTensorDict returns new tensors each "
            + "step (what vLLM does); reuse: the previous step's dict is passed back to be received into "
            + "(default ${DEFAULT-VALUE})")
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
     * @param ops       per operation: p50 and p99 in µs over all ranks
     */
    public record Row(int hidden, int steps, double seconds, long rssGrowth, long directGrowth, Map<String, double[]> ops) {
        public double stepsPerSecond() {
            return steps / seconds;
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

    /** Runs the jcomm side only, with the options as parsed, and returns its rows (for tests). */
    public List<Row> measureJcomm() throws Exception {
        List<Row> rows = new ArrayList<>();
        if (runJcomm(parseHidden(hidden), rows) != 0) {
            throw new IllegalStateException("commbench pipeline: a worker failed (see its output)");
        }
        return rows;
    }

    @Override
    public Integer call() throws Exception {
        List<Integer> sizes;
        try {
            sizes = parseHidden(hidden);
        } catch (RuntimeException e) {
            System.err.println("commbench pipeline: bad --hidden " + hidden);
            return 2;
        }
        if (tp < 1 || pp < 1 || tp * pp < 2 || sizes.stream().anyMatch(h -> h < 2 || h % tp != 0)
                || !(recv.equals("alloc") || recv.equals("reuse"))) {
            System.err.println("commbench pipeline: --tp >= 1, --pp >= 1, at least 2 ranks, every --hidden >= 2 and a multiple of --tp, "
                    + "--recv alloc|reuse");
            return 2;
        }
        out.printf(Locale.ROOT, "# commbench pipeline: TP=%d x PP=%d, %d worker JVMs, backend %s, recv %s, warm-up %d "
                        + "steps; host: %d CPUs; unpinned%n", tp, pp, tp * pp, backend, recv, warmup,
                Runtime.getRuntime().availableProcessors());
        List<Row> jcomm = new ArrayList<>();
        int exit = runJcomm(sizes, jcomm);
        print("jcomm", jcomm);
        if (torch) {
            List<Row> theirs = new ArrayList<>();
            exit = Math.max(exit, runTorch(sizes, theirs));
            print("torch gloo", theirs);
            sideBySide(jcomm, theirs);
        }
        return exit;
    }

    private void print(String who, List<Row> rows) {
        out.printf(Locale.ROOT, "%n# %s%n", who);
        out.printf(Locale.ROOT, "%10s %10s %7s %10s %10s %9s %9s", "hidden", "bytes", "steps", "steps/s", "MB/s", "rss+MB",
                "direct+MB");
        for (String op : PipelineBenchWorker.OPS) {
            out.printf(Locale.ROOT, " %22s", abbreviate(op) + " p50/p99");
        }
        out.println();
        for (Row r : rows) {
            out.printf(Locale.ROOT, "%10d %10d %7d %10.0f %10.0f %9s %9s", r.hidden(), 4L * r.hidden(), r.steps(),
                    r.stepsPerSecond(), r.handOffMBps(), megabytes(r.rssGrowth()), megabytes(r.directGrowth()));
            for (String op : PipelineBenchWorker.OPS) {
                double[] v = r.ops().get(op);
                out.printf(Locale.ROOT, " %22s", v == null ? "-" : String.format(Locale.ROOT, "%.1f/%.1f", v[0], v[1]));
            }
            out.println();
        }
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

    private void sideBySide(List<Row> jcomm, List<Row> torchRows) {
        out.printf(Locale.ROOT, "%n# side by side: steps/s, TP=%d x PP=%d%n", tp, pp);
        out.printf(Locale.ROOT, "%10s %10s %12s %12s %8s%n", "hidden", "bytes", "jcomm", "torch gloo", "ratio");
        for (Row j : jcomm) {
            Row t = torchRows.stream().filter(r -> r.hidden() == j.hidden()).findFirst().orElse(null);
            out.printf(Locale.ROOT, "%10d %10d %12.0f %12s %8s%n", j.hidden(), 4L * j.hidden(), j.stepsPerSecond(),
                    t == null ? "-" : String.format(Locale.ROOT, "%.0f", t.stepsPerSecond()),
                    t == null ? "-" : String.format(Locale.ROOT, "%.2fx", j.stepsPerSecond() / t.stepsPerSecond()));
        }
    }

    private int runJcomm(List<Integer> sizes, List<Row> rows) throws Exception {
        StringBuilder sizeArg = new StringBuilder();
        sizes.forEach(h -> sizeArg.append(sizeArg.length() > 0 ? "," : "").append(h));
        TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().port(0).logConnections(false).build());
        int world = tp * pp;
        Map<Integer, Row> byHidden = new LinkedHashMap<>();
        int exit;
        List<String> flags = new ArrayList<>(List.of("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"));
        flags.addAll(jvmArgs);
        List<String> cmd = WorkerJvms.javaCommand(flags, PipelineBenchWorker.class);
        cmd.addAll(List.of(Integer.toString(tp), Integer.toString(pp), Integer.toString(warmup), Integer.toString(steps), recv,
                sizeArg.toString()));
        cmd.addAll(options);
        Map<String, String> env = new java.util.HashMap<>();
        env.put("JCOMM_CPU_BACKEND", backend);
        env.put("JCOMM_LAUNCHER_STORE", "1");
        env.put("JCOMM_HOST_ID", null);
        try (WorkerJvms workers = WorkerJvms.start(world, r -> cmd, server.port(), env,
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
                        Long.parseLong(f[6]), new LinkedHashMap<>()));
            }
        } else if (line.startsWith("@@op ")) {
            synchronized (byHidden) {
                Row r = byHidden.get(Integer.parseInt(f[1]));
                r.ops().put(f[2].replace('_', ' '), new double[] {Long.parseLong(f[3]) / 1e3, Long.parseLong(f[4]) / 1e3});
            }
        } else {
            System.err.println("[rank " + rank + "] " + line);
        }
    }

    private int runTorch(List<Integer> sizes, List<Row> rows) throws Exception {
        Path py = script != null ? script : Path.of("scripts", "torch_pipeline_bench.py");
        if (!Files.isRegularFile(py)) {
            System.err.println("commbench pipeline: " + py + " not found (--script)");
            return 2;
        }
        StringBuilder sizeArg = new StringBuilder();
        sizes.forEach(h -> sizeArg.append(sizeArg.length() > 0 ? "," : "").append(h));
        List<String> cmd = new ArrayList<>(List.of("/usr/bin/python3", py.toString(), "--tp", Integer.toString(tp),
                "--pp", Integer.toString(pp), "--hidden", sizeArg.toString(), "--warmup", Integer.toString(warmup)));
        if (steps > 0) {
            cmd.addAll(List.of("--steps", Integer.toString(steps)));
        }
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        Map<Integer, Row> byHidden = new LinkedHashMap<>();
        try (BufferedReader in = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                Map<String, String> kv = new LinkedHashMap<>();
                for (String f : line.split(" ")) {
                    int eq = f.indexOf('=');
                    if (eq > 0) {
                        kv.put(f.substring(0, eq), f.substring(eq + 1));
                    }
                }
                if (line.startsWith("ROW ")) {
                    int h = Integer.parseInt(kv.get("hidden"));
                    byHidden.put(h, new Row(h, Integer.parseInt(kv.get("steps")), Double.parseDouble(kv.get("seconds")),
                            Long.MIN_VALUE, Long.MIN_VALUE, new LinkedHashMap<>()));
                } else if (line.startsWith("OP ")) {
                    Row r = byHidden.get(Integer.parseInt(kv.get("hidden")));
                    r.ops().put(kv.get("name").replace('_', ' '), new double[] {Double.parseDouble(kv.get("p50_us")),
                            Double.parseDouble(kv.get("p99_us"))});
                } else if (!line.startsWith("#")) {
                    System.err.println("[torch] " + line);
                }
            }
        }
        if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            return 1;
        }
        rows.addAll(byHidden.values());
        return p.exitValue() == 0 ? 0 : 1;
    }
}
