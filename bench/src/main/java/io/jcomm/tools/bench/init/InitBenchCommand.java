package io.jcomm.tools.bench.init;

import io.jcomm.api.config.Settings;
import io.jcomm.tools.bench.WorkerJvms;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Callable;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Benchmark of group initialisation: N ranks (separate JVMs on this host) start at one common
 * instant and the time until the last rank has every group ready is measured — store rendezvous,
 * world group, host-id exchange, then the TP/PP/DP/EP groups with their communicators and the TP
 * broadcaster.
 *
 * <p>JVM start-up is excluded: the workers start, report ready, then for each iteration the
 * coordinator picks a fresh store port and an instant 50 ms ahead on the host's monotonic clock
 * ({@link System#nanoTime()} is {@code CLOCK_MONOTONIC} on Linux, shared by all processes), and
 * every worker begins {@code initialize} at that instant. Iteration 1 runs in cold JVMs (classes
 * loading, nothing compiled) and is reported on its own; the statistics cover the iterations after
 * the warm-up ones. Every iteration builds everything anew (new store server, new groups, new
 * media driver) and tears it down before the next.
 */
@Command(name = "init", mixinStandardHelpOptions = true,
        description = "Time from a common start signal until every rank has all groups ready (TP/PP/DP/EP).")
public final class InitBenchCommand implements Callable<Integer> {

    @Option(names = "--tp", defaultValue = "2", description = "tensor parallel size (default ${DEFAULT-VALUE})")
    int tp;

    @Option(names = "--pp", defaultValue = "2", description = "pipeline parallel size (default ${DEFAULT-VALUE})")
    int pp;

    @Option(names = "--dp", defaultValue = "1", description = "data parallel size (default ${DEFAULT-VALUE})")
    int dp;

    @Option(names = "--iterations", defaultValue = "20", description = "measured iterations (default ${DEFAULT-VALUE})")
    int iterations;

    @Option(names = "--warmup", defaultValue = "3", description = "iterations run first and not counted, "
            + "the first of them in cold JVMs (default ${DEFAULT-VALUE})")
    int warmup;

    @Option(names = "--mq", defaultValue = "true", arity = "1", description = "TP broadcaster (default ${DEFAULT-VALUE})")
    boolean mq;

    @Option(names = "--mq-across-hosts-only", description = "broadcasters only for TP groups that span hosts "
            + "(one-host groups broadcast small objects through their CPU group)")
    boolean mqAcrossHostsOnly;

    @Option(names = "--mq-background", defaultValue = "true", arity = "1",
            description = "make the TP broadcasters after the groups, in the background (default ${DEFAULT-VALUE}); "
                    + "false: during creation, as vLLM does")
    boolean mqBackground = true;

    @Option(names = "--concurrent", defaultValue = "true", arity = "1",
            description = "create a rank's groups in parallel (default ${DEFAULT-VALUE})")
    boolean concurrent;

    @Option(names = "--one-step", defaultValue = "true", arity = "1",
            description = "initialize(config, store, options, sizes): every group, the world included, at once; "
                    + "false: initialize then initializeModelParallel (default ${DEFAULT-VALUE})")
    boolean oneStep;

    @Option(names = "--distinct-hosts", description = "give every rank its own JCOMM_HOST_ID (as if on separate nodes)")
    boolean distinctHosts;

    @Option(names = "--timeout-ms", defaultValue = "30000", description = "timeout of every blocking step (default ${DEFAULT-VALUE})")
    long timeoutMs;

    @Option(names = "--cpu-option", description = "CPU group option key=value, repeatable (e.g. tcp.shm.ringBytes=65536)")
    List<String> cpuOptions = new ArrayList<>();

    @Option(names = "--jvm-arg", description = "extra worker JVM argument, repeatable")
    List<String> jvmArgs = new ArrayList<>();

    @Option(names = "--verbose", description = "echo the workers' output")
    boolean verbose;

    private final PrintStream out;

    public InitBenchCommand() {
        this(System.out);
    }

    InitBenchCommand(PrintStream out) {
        this.out = out;
    }

    public static void main(String[] args) {
        System.exit(new CommandLine(new InitBenchCommand()).execute(args));
    }

    /** What one rank reported for one iteration (nanoTime values). */
    record Report(int iteration, int rank, long start, long store, long world, long groups, long cpu, long broadcasters) {
    }

    @Override
    public Integer call() throws Exception {
        int world = tp * pp * dp;
        if (tp < 1 || pp < 1 || dp < 1 || iterations < 1 || warmup < 0) {
            throw new CommandLine.ParameterException(new CommandLine(this), "sizes and iterations must be positive");
        }
        out.printf(Locale.ROOT, "# jcomm init benchmark: world %d = TP %d x PP %d x DP %d, %d JVMs on this host%n",
                world, tp, pp, dp, world);
        out.printf(Locale.ROOT, "# broadcaster %s%s%s, concurrent groups %s, one step %s, %s hosts; cpu options %s; "
                        + "%d warm-up + %d measured iterations; host: %d CPUs, load %.1f, java %s%n", mq,
                mqAcrossHostsOnly ? " (across hosts only)" : "", mq ? (mqBackground ? " (in the background)" : " (during creation)") : "", concurrent,
                oneStep, distinctHosts ? "distinct" : "one", cpuOptions, warmup, iterations, Runtime.getRuntime().availableProcessors(),
                java.lang.management.ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage(),
                System.getProperty("java.version"));
        BlockingQueue<String> lines = new LinkedBlockingQueue<>();
        List<Process> procs = new ArrayList<>();
        try {
            for (int r = 0; r < world; r++) {
                procs.add(launch(r, world, lines));
            }
            for (int r = 0; r < world; r++) {
                expect(lines, "@@ready", TimeUnit.SECONDS.toNanos(120), procs);
            }
            out.printf("%-10s %10s %10s %10s %10s %12s %12s %10s%n", "# iter", "store ms", "world ms", "groups ms", "ready ms",
                    "start skew us", "cpu ms (all)", "bcast ms");
            List<double[]> measured = new ArrayList<>();
            double[] first = null;
            for (int it = 1; it <= warmup + iterations; it++) {
                double[] row = iteration(it, world, procs, lines);
                if (it == 1) {
                    first = row;
                }
                String label = it <= warmup ? "warm-up " + it : Integer.toString(it - warmup);
                out.printf(Locale.ROOT, "%-10s %10.2f %10.2f %10.2f %10.2f %12.0f %12.1f %10.2f%n", label, row[0], row[1],
                        row[2], row[3], row[4], row[5], row[6]);
                if (it > warmup) {
                    measured.add(row);
                }
            }
            summarise(first, measured);
            return 0;
        } finally {
            for (Process p : procs) {
                try (OutputStream o = p.getOutputStream()) {
                    o.write("quit\n".getBytes(StandardCharsets.US_ASCII));
                } catch (IOException ignored) {
                    // already gone
                }
            }
            for (Process p : procs) {
                if (!p.waitFor(10, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                }
            }
        }
    }

    private void summarise(double[] first, List<double[]> measured) {
        double[] ready = measured.stream().mapToDouble(r -> r[3]).sorted().toArray();
        double[] store = measured.stream().mapToDouble(r -> r[0]).sorted().toArray();
        double[] worldMs = measured.stream().mapToDouble(r -> r[1]).sorted().toArray();
        double[] cpu = measured.stream().mapToDouble(r -> r[5]).sorted().toArray();
        double[] bcast = measured.stream().mapToDouble(r -> r[6]).sorted().toArray();
        out.printf(Locale.ROOT, "# first iteration (cold JVMs): all groups ready after %.1f ms%n", first[3]);
        out.printf(Locale.ROOT, "# all groups ready, ms over %d iterations: median %.2f  min %.2f  p90 %.2f  max %.2f "
                        + "(store median %.2f, world median %.2f); CPU time of all ranks together: median %.1f ms%n",
                ready.length, pct(ready, 50), ready[0], pct(ready, 90), ready[ready.length - 1], pct(store, 50),
                pct(worldMs, 50), pct(cpu, 50));
        if (mq) {
            out.printf(Locale.ROOT, "# TP broadcasters ready on every rank (%s), ms after the start: median %.2f  p90 %.2f%n",
                    mqBackground ? "made in the background after the groups" : "made with the groups", pct(bcast, 50),
                    pct(bcast, 90));
        }
    }

    private static double pct(double[] sorted, double p) {
        int i = (int) Math.ceil(p / 100.0 * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
    }

    /**
     * Runs one iteration; returns {store, world, groups, ready, skew, cpu, broadcasters}: ms after the
     * start until the last rank had the store, the world, ..., the start skew in µs, the CPU time of
     * all ranks together until ready in ms, and ms until the last rank had its broadcasters (made in
     * the background: after "ready"; the same as ready when they are made during creation).
     */
    private double[] iteration(int it, int world, List<Process> procs, BlockingQueue<String> lines) throws Exception {
        int port = freePort();
        long startAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(50);
        String go = "go " + it + " " + port + " " + startAt + "\n";
        for (Process p : procs) {
            OutputStream o = p.getOutputStream();
            o.write(go.getBytes(StandardCharsets.US_ASCII));
            o.flush();
        }
        long limit = TimeUnit.MILLISECONDS.toNanos(timeoutMs) * 2 + TimeUnit.SECONDS.toNanos(10);
        Report[] reports = new Report[world];
        for (int i = 0; i < world; i++) {
            String[] f = expect(lines, "@@it " + it + " ", limit, procs).split(" ");
            Report r = new Report(it, Integer.parseInt(f[2]), Long.parseLong(f[3]), Long.parseLong(f[4]),
                    Long.parseLong(f[5]), Long.parseLong(f[6]), Long.parseLong(f[7]), Long.parseLong(f[8]));
            reports[r.rank()] = r;
        }
        for (int i = 0; i < world; i++) {
            expect(lines, "@@closed " + it, limit, procs);
        }
        double store = 0;
        double worldMs = 0;
        double groups = 0;
        long minStart = Long.MAX_VALUE;
        long maxStart = Long.MIN_VALUE;
        for (Report r : reports) {
            store = Math.max(store, ms(r.store() - startAt));
            worldMs = Math.max(worldMs, ms(r.world() - startAt));
            groups = Math.max(groups, ms(r.groups() - r.world()));
            minStart = Math.min(minStart, r.start());
            maxStart = Math.max(maxStart, r.start());
        }
        double ready = Arrays.stream(reports).mapToDouble(r -> ms(r.groups() - startAt)).max().orElse(0);
        double cpu = Arrays.stream(reports).mapToDouble(r -> ms(r.cpu())).sum();
        double broadcasters = Arrays.stream(reports).mapToDouble(r -> ms(r.broadcasters() - startAt)).max().orElse(0);
        return new double[] {store, worldMs, groups, ready, (maxStart - minStart) / 1000.0, cpu, broadcasters};
    }

    private static double ms(long nanos) {
        return nanos / 1e6;
    }

    /** Lines already read that no {@link #expect} has taken yet (they may arrive in any order). */
    private final List<String> pending = new ArrayList<>();

    private String expect(BlockingQueue<String> lines, String prefix, long timeoutNanos, List<Process> procs)
            throws InterruptedException {
        long end = System.nanoTime() + timeoutNanos;
        while (true) {
            for (int i = 0; i < pending.size(); i++) {
                if (pending.get(i).startsWith(prefix)) {
                    return pending.remove(i);
                }
            }
            String l = lines.poll(Math.max(1, end - System.nanoTime()), TimeUnit.NANOSECONDS);
            if (l == null) {
                for (Process p : procs) {
                    if (!p.isAlive()) {
                        throw new IllegalStateException("a worker exited with " + p.exitValue() + " while waiting for '"
                                + prefix + "' (run with --verbose)");
                    }
                }
                throw new IllegalStateException("timed out waiting for '" + prefix + "' (run with --verbose)");
            }
            pending.add(l);
        }
    }

    private Process launch(int rank, int world, BlockingQueue<String> lines) throws IOException {
        List<String> flags = new ArrayList<>(List.of("-XX:+UseSerialGC", "-XX:-UsePerfData", "-Xmx512m",
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"));
        flags.addAll(jvmArgs);
        List<String> cmd = WorkerJvms.javaCommand(flags, InitBenchWorker.class);
        cmd.addAll(List.of(Integer.toString(tp), Integer.toString(pp), Integer.toString(dp), Long.toString(timeoutMs),
                Boolean.toString(mq), Boolean.toString(concurrent), Boolean.toString(oneStep),
                Boolean.toString(mqAcrossHostsOnly), Boolean.toString(mqBackground)));
        cmd.addAll(cpuOptions);
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().put("RANK", Integer.toString(rank));
        pb.environment().put("WORLD_SIZE", Integer.toString(world));
        pb.environment().put("LOCAL_RANK", Integer.toString(rank));
        pb.environment().put("LOCAL_WORLD_SIZE", Integer.toString(world));
        pb.environment().put("MASTER_ADDR", "127.0.0.1");
        if (distinctHosts) {
            pb.environment().put(Settings.HOST_ID.name(), "bench-node-" + rank);
        } else {
            pb.environment().remove(Settings.HOST_ID.name());
        }
        Process p = pb.start();
        Thread pump = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                String l;
                while ((l = r.readLine()) != null) {
                    if (verbose) {
                        out.println("[rank " + rank + "] " + l);
                    }
                    if (l.startsWith("@@")) {
                        lines.add(l);
                    } else if (!verbose && (l.contains("Exception") || l.contains("ERROR"))) {
                        out.println("[rank " + rank + "] " + l);
                    }
                }
            } catch (IOException ignored) {
                // worker gone
            }
        }, "init-bench-out-" + rank);
        pump.setDaemon(true);
        pump.start();
        return p;
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            s.setReuseAddress(true);
            return s.getLocalPort();
        }
    }
}
