package io.jcomm.tools.bench;

import io.jcomm.api.config.Settings;
import io.jcomm.api.DType;
import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import io.jcomm.tools.bench.plot.BenchCharts;
import io.jcomm.tools.bench.plot.BenchRun;
import io.jcomm.tools.bench.progress.BenchProgress;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Benchmarks one operation: hosts a TCP store in this process, starts {@code --nproc} worker JVMs
 * ({@link BenchWorker}) as the ranks of a group on {@code --backend}, and prints an nccl-tests-style
 * table from rank 0's measurements (time = median over iterations of the slowest rank's time;
 * latency operations report p50/p99/p99.9). {@code --api} picks what the ranks call: the process
 * group, or a {@link io.jcomm.parallel.GroupCoordinator} ({@link CoordinatorTarget}). Below each
 * table: the routes taken and the raw shared-memory floor measured by the same workers
 * ({@link ShmFloor}); with several runs (backends x APIs) a side-by-side summary closes the output.
 */
@Command(mixinStandardHelpOptions = true, description = "Benchmarks one operation over N local ranks, through a "
        + "process group or a GroupCoordinator (--api).")
final class CollectiveBenchCommand implements Callable<Integer> {

    private final BenchOp op;

    @Option(names = "--backend", defaultValue = "tcp", description = "tcp, gloo or auto, or several: tcp,gloo (default ${DEFAULT-VALUE})")
    String backend;

    @Option(names = "--api", defaultValue = "process-group", description = "what the ranks call: process-group (one "
            + "CPU group), coordinator (a GroupCoordinator: TP group of the world with the SDK's defaults, so its "
            + "node-local channel, shared-memory message queue and CPU group are measured), or both: "
            + "process-group,coordinator (default ${DEFAULT-VALUE})")
    String api;

    @Option(names = "--no-floor", description = "do not measure the raw shared-memory ping-pong floor printed "
            + "below each table (ranks 0 and 1 spinning on one cache line in /dev/shm, 0.7 s; up to 3.2 s on a loaded "
            + "machine)")
    boolean noFloor;

    @Option(names = "--idle-cpu", defaultValue = "0", description = "after the timed loops, leave the group without "
            + "traffic for 2 s, then print each rank's process CPU over this many seconds, in %% of one core (the "
            + "cost of a rank that waits for work; 0: not measured, the default)")
    int idleCpuSeconds;

    @Option(names = {"--nproc", "-N"}, defaultValue = "2", description = "local ranks to start (default ${DEFAULT-VALUE})")
    int nproc;

    @Option(names = {"-b", "--minbytes"}, description = "smallest size (default 1K; 100 for object ops; 0 for barrier)")
    String minBytes;

    @Option(names = {"-e", "--maxbytes"}, description = "largest size (default 64M; 100 for object ops; 0 for barrier)")
    String maxBytes;

    @Option(names = {"-f", "--stepfactor"}, defaultValue = "4", description = "size multiplier (default ${DEFAULT-VALUE})")
    long factor;

    @Option(names = {"-w", "--warmup_iters"}, description = "warm-up iterations per size (default: until the figure "
            + "stops moving, at least 5, 2000 for latency ops; the warm-up of each size is printed below the table)")
    Integer warmup;

    @Option(names = {"-n", "--iters"}, description = "timed iterations per size (default: about 64 MiB moved, 20 to "
            + "2,000 by size; 10000 for latency ops)")
    Integer iters;

    @Option(names = {"-d", "--dtype"}, defaultValue = "f32", description = "element type (default ${DEFAULT-VALUE})")
    String dtype;

    @Option(names = "--json", description = "also write the results as JSON to this file (an array with several backends)")
    Path json;

    @Option(names = "--plot", description = "also draw the results into this PNG (bus bandwidth or latency vs size, a line per backend)")
    Path plot;

    @Option(names = "--progress-interval", defaultValue = "5", description = "seconds between progress lines on stderr, 0: none (default ${DEFAULT-VALUE})")
    long progressSeconds;

    @Option(names = {"-o", "--option"}, description = "backend option key=value (repeatable), e.g. tcp.shm=false")
    List<String> options = new ArrayList<>();

    @Option(names = "--timeout", defaultValue = "600", description = "seconds before everything is killed (default ${DEFAULT-VALUE})")
    long timeoutSeconds;

    @Option(names = "--jvm-arg", description = "extra JVM argument for the workers (repeatable)")
    List<String> jvmArgs = new ArrayList<>();

    @Option(names = "--pin", negatable = true, description = "start rank r on CPU r mod CPUs (taskset): on a small "
            + "machine, where the scheduler puts two busy ranks changes small-message latencies by half from run to run "
            + "and a job whose two ranks share a CPU runs small operations 15x slower. Default: when the ranks fit the "
            + "CPUs, as bin/commrun binds its workers (what a user's job gets); --no-pin leaves placement to the "
            + "scheduler. scripts/torch_gloo_bench.py has the same option")
    Boolean pin;

    /** Whether the workers are bound: {@code --pin}/{@code --no-pin}, else when they fit the CPUs (as commrun). */
    boolean pinned() {
        return pin != null ? pin : nproc <= Runtime.getRuntime().availableProcessors()
                && io.jcomm.tools.run.CpuBinding.findTaskset() != null;
    }

    CollectiveBenchCommand(BenchOp op) {
        this.op = op;
    }

    /** One table: a backend through an API, its rows and the floor measured with it. */
    private record Run(String backend, BenchApi api, List<BenchResult> rows, ShmFloor.Result floor) {
        String label() {
            return backend + "/" + api.cliName();
        }
    }

    @Override
    public Integer call() throws Exception {
        List<BenchApi> apis = new ArrayList<>();
        try {
            for (String a : api.split(",")) {
                apis.add(BenchApi.parse(a));
            }
        } catch (IllegalArgumentException e) {
            System.err.println("commbench: " + e.getMessage());
            return 2;
        }
        for (BenchApi a : apis) {
            if (!a.supports(op)) {
                System.err.println("commbench: " + op.cliName() + " has no " + a.cliName() + " counterpart "
                        + "(a GroupCoordinator has no scatter and no plain all-to-all)");
                return 2;
            }
        }
        int exit = 0;
        List<String> docs = new ArrayList<>();
        List<Run> runs = new ArrayList<>();
        for (String b : backend.split(",")) {
            for (BenchApi a : apis) {
                List<BenchResult> rows = new ArrayList<>();
                ShmFloor.Result[] floor = new ShmFloor.Result[1];
                exit = Math.max(exit, runBackend(b.trim(), a, rows, floor));
                runs.add(new Run(b.trim(), a, rows, floor[0]));
                docs.add(BenchResult.json("commbench", op.cliName(), b.trim(), a.cliName(), nproc,
                        String.join(",", options), floor[0], rows));
            }
        }
        if (runs.size() > 1) {
            printSummary(runs, System.out);
        }
        if (json != null) {
            Files.writeString(json, docs.size() == 1 ? docs.get(0) : BenchRun.jsonArray(docs), StandardCharsets.UTF_8);
        }
        if (plot != null) {
            List<BenchRun> plotted = new ArrayList<>();
            docs.forEach(d -> plotted.addAll(BenchRun.parse(d, "this run")));
            BenchCharts.write(plotted, plot);
            System.err.println("commbench: chart written to " + plot);
        }
        return exit;
    }

    /**
     * The runs side by side: per size the p50 (latency operations) or median time of each run, and
     * the floor of each run.
     */
    private void printSummary(List<Run> runs, PrintStream out) {
        Map<Long, Map<String, BenchResult>> bySize = new TreeMap<>();
        for (Run r : runs) {
            for (BenchResult row : r.rows()) {
                bySize.computeIfAbsent(row.bytes(), k -> new LinkedHashMap<>()).put(r.label(), row);
            }
        }
        StringBuilder head = new StringBuilder(String.format(Locale.ROOT, "#%13s", "size(B)"));
        for (Run r : runs) {
            head.append(String.format(Locale.ROOT, " %24s", r.label()));
        }
        out.println();
        out.printf("# side by side: %s (us), nproc=%d%n", op.latency() ? "p50" : "median time", nproc);
        out.println(head);
        for (Map.Entry<Long, Map<String, BenchResult>> e : bySize.entrySet()) {
            StringBuilder line = new StringBuilder(String.format(Locale.ROOT, " %13d", e.getKey()));
            for (Run r : runs) {
                BenchResult row = e.getValue().get(r.label());
                line.append(row == null ? String.format(Locale.ROOT, " %24s", "-")
                        : String.format(Locale.ROOT, " %24.1f", op.latency() ? row.p50Us() : row.medianUs()));
            }
            out.println(line);
        }
        StringBuilder floorLine = new StringBuilder(String.format(Locale.ROOT, "#%13s", "shm floor p50"));
        for (Run r : runs) {
            floorLine.append(r.floor() != null && r.floor().measured()
                    ? String.format(Locale.ROOT, " %24.2f", r.floor().p50Us()) : String.format(Locale.ROOT, " %24s", "-"));
        }
        out.println(floorLine);
    }

    private int runBackend(String backend, BenchApi api, List<BenchResult> results, ShmFloor.Result[] floorOut)
            throws Exception {
        if (nproc < 2 && op != BenchOp.BARRIER) {
            System.err.println("commbench: --nproc must be >= 2");
            return 2;
        }
        DType t = DType.parse(dtype);
        long min = Sizes.parse(minBytes != null ? minBytes : op == BenchOp.BARRIER ? "0" : op.object() ? "100" : "1K");
        long max = Sizes.parse(maxBytes != null ? maxBytes : op == BenchOp.BARRIER ? "0" : op.object() ? "100" : "64M");
        // negative: warm up until steady, at least that many calls (BenchWorker.warmUntilSteady)
        int w = warmup != null ? warmup : -(op.latency() ? 2000 : 5);
        int n = iters != null ? iters : op.latency() ? 10000 : -1; // -1: by size (BenchWorker.autoIters)
        List<Long> sizes = op == BenchOp.BARRIER ? List.of(0L) : (min == max ? List.of(min) : Sizes.series(min, max, factor));
        StringBuilder sizeArg = new StringBuilder();
        for (long s : sizes) {
            sizeArg.append(sizeArg.length() > 0 ? "," : "").append(s);
        }
        PrintStream out = System.out;
        out.printf("# commbench %s  backend=%s  api=%s  nproc=%d  dtype=%s  warmup=%s  iters=%s  %s%s%n", op.cliName(), backend,
                api.cliName(), nproc, t.shortName(), w >= 0 ? Integer.toString(w) : "until steady (>= " + -w + ")",
                n > 0 ? Integer.toString(n) : "20-2000 by size", pinned() ? "pinned" : "unpinned",
                options.isEmpty() ? "" : "  options=" + String.join(",", options));
        out.println(BenchResult.header(op.latency()));
        List<BenchResult> rows = Collections.synchronizedList(new ArrayList<>());
        List<String> notes = Collections.synchronizedList(new ArrayList<>());
        TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().host("127.0.0.1").port(0)
                .logConnections(false).build());
        int exit;
        BenchProgress progress = BenchProgress.start(op.cliName(), backend, sizes, System.err,
                TimeUnit.SECONDS.toMillis(progressSeconds));
        List<String> flags = new ArrayList<>(List.of("-XX:+UseSerialGC", "-Xms512m", "-Xmx1g", "-XX:MaxDirectMemorySize=4g",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"));
        if (api == BenchApi.COORDINATOR) {
            // why a TP broadcaster could not be made (one line, only then)
            flags.add("-Dorg.slf4j.simpleLogger.log.io.jcomm.parallel.LateBroadcaster=info");
        }
        flags.addAll(jvmArgs);
        List<String> worker = WorkerJvms.javaCommand(flags, BenchWorker.class);
        worker.addAll(List.of(op.name(), api.name(), backend, t.shortName(), sizeArg.toString(), Integer.toString(w),
                Integer.toString(n), Boolean.toString(!noFloor), Integer.toString(Math.max(0, idleCpuSeconds))));
        worker.addAll(options);
        try (WorkerJvms workers = WorkerJvms.start(nproc, r -> {
            List<String> cmd = new ArrayList<>();
            if (pinned()) {
                cmd.addAll(List.of("taskset", "-c", Integer.toString(r % Runtime.getRuntime().availableProcessors())));
            }
            cmd.addAll(worker);
            return cmd;
        }, server.port(), Map.of(Settings.TIMEOUT_MS.name(), "60000"), (rank, line) -> line(rank, line, rows, notes, out, progress),
                "bench-out")) {
            exit = workers.await(timeoutSeconds, "commbench");
        } finally {
            progress.close();
            server.close();
            // a floor file of a worker that died between making it and unlinking it (its owner is dead now)
            ShmFloor.cleanStale();
        }
        ShmFloor.Result floor = null;
        synchronized (notes) {
            for (String note : notes) {
                if (note.startsWith(ShmFloor.LINE_PREFIX)) {
                    floor = ShmFloor.Result.parse(note);
                    out.println(floor.describe());
                } else {
                    out.println("# " + note.substring(BenchResult.NOTE_PREFIX.length()));
                }
            }
        }
        floorOut[0] = floor;
        Map<Long, BenchResult> bySize = new LinkedHashMap<>();
        synchronized (rows) {
            for (BenchResult r : rows) {
                bySize.put(r.bytes(), r);
            }
        }
        results.addAll(bySize.values());
        if (exit != 0) {
            System.err.println("commbench: a worker failed (see its output above)");
        }
        return exit;
    }

    private void line(int rank, String line, List<BenchResult> rows, List<String> notes, PrintStream out,
                      BenchProgress progress) {
        if (rank == 0 && line.startsWith(BenchResult.PREFIX)) {
            BenchResult r = BenchResult.parse(line);
            rows.add(r);
            progress.sizeDone(r.bytes());
            synchronized (out) {
                out.println(r.row(op.latency()));
            }
        } else if (rank == 0 && (line.startsWith(BenchResult.NOTE_PREFIX) || line.startsWith(ShmFloor.LINE_PREFIX))) {
            notes.add(line); // printed below the table
        } else {
            System.err.println("[rank " + rank + "] " + line);
        }
    }
}
