package io.jcomm.tools.bench.scale;

import java.io.PrintStream;
import java.lang.management.ManagementFactory;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code commbench scale}: group creation at scale. For each size N, a fresh jcomm store server in this
 * process and {@code --jvms} worker JVMs ({@link ScaleWorker}, each a host of its own) with N / JVMs thread
 * ranks each, TP × PP × DP; every rank makes all its groups in one step, then joins the first world
 * barrier and a few all-reduces. Prints a row per run ({@link ScaleRow}): the time until every group of
 * every rank was ready, sockets per rank at ready, after the barrier and after the all-reduces, store
 * commands per rank, the first world barrier, the all-reduces and CPU per rank; {@code --plot} draws them
 * against N ({@link ScaleChart}).
 */
@Command(name = "scale", mixinStandardHelpOptions = true,
        description = "Group creation at scale: ParallelState with N thread ranks over several JVMs (TP x PP x DP); "
                + "time until every group is ready, sockets and store commands per rank, the first world barrier.")
public final class ScaleBenchCommand implements Callable<Integer> {

    @Option(names = "--ranks", split = ",", defaultValue = "64,256",
            description = "world sizes, comma-separated, each a multiple of TP x PP and of --jvms (default ${DEFAULT-VALUE})")
    List<Integer> ranks;

    @Option(names = "--jvms", defaultValue = "4", description = "worker JVMs, each a pretend host (default ${DEFAULT-VALUE})")
    int jvms;

    @Option(names = "--tp", defaultValue = "8", description = "tensor parallel size (default ${DEFAULT-VALUE})")
    int tp;

    @Option(names = "--pp", defaultValue = "4", description = "pipeline parallel size (default ${DEFAULT-VALUE})")
    int pp;

    @Option(names = "--runs", defaultValue = "1",
            description = "runs per size, each with a fresh store server and fresh JVMs (default ${DEFAULT-VALUE})")
    int runs;

    @Option(names = "--timeout-s", defaultValue = "120",
            description = "timeout of every blocking step of a rank; a run gets 30 s more in all (default ${DEFAULT-VALUE})")
    long timeoutSeconds;

    @Option(names = "--plot", paramLabel = "PNG",
            description = "also draw the runs into this PNG: wall times and per-rank costs against N")
    Path plot;

    @Option(names = "--jvm-arg", description = "extra worker JVM argument (repeatable)")
    List<String> jvmArgs = new ArrayList<>();

    @Option(names = "--verbose", description = "echo the workers' output on stderr")
    boolean verbose;

    private final PrintStream out;
    private final PrintStream err;

    /** The command on {@code System.out} and {@code System.err}. */
    public ScaleBenchCommand() {
        this(System.out, System.err);
    }

    ScaleBenchCommand(PrintStream out, PrintStream err) {
        this.out = out;
        this.err = err;
    }

    /** Why the options cannot run, or {@code null} when they can. */
    static String check(List<Integer> ranks, int jvms, int tp, int pp, int runs, long timeoutSeconds) {
        if (ranks == null || ranks.isEmpty()) {
            return "--ranks: at least one size";
        }
        if (runs < 1) {
            return "--runs must be at least 1";
        }
        if (timeoutSeconds < 1) {
            return "--timeout-s must be at least 1";
        }
        for (int n : ranks) {
            String why = ScaleRun.check(n, jvms, tp, pp);
            if (why != null) {
                return why;
            }
        }
        return null;
    }

    @Override
    public Integer call() throws Exception {
        String why = check(ranks, jvms, tp, pp, runs, timeoutSeconds);
        if (why != null) {
            err.println("commbench scale: " + why);
            return 2;
        }
        String layout = String.format(Locale.ROOT, "TP%d x PP%d, %d JVMs", tp, pp, jvms);
        out.printf(Locale.ROOT, "# commbench scale: ParallelState, N thread ranks over %d JVMs (each a host of its own), "
                        + "TP %d x PP %d x DP N/%d, one jcomm store server; %d run(s) per size; host: %d CPUs, load %.1f, "
                        + "java %s%n", jvms, tp, pp, tp * pp, runs, Runtime.getRuntime().availableProcessors(),
                ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage(), System.getProperty("java.version"));
        out.println(ScaleRow.header());
        out.flush();
        List<ScaleRow> rows = new ArrayList<>();
        int exit = 0;
        for (int n : ranks) {
            for (int run = 1; run <= runs; run++) {
                ScaleRun r = new ScaleRun(n, jvms, tp, pp, Duration.ofSeconds(timeoutSeconds), jvmArgs);
                try {
                    ScaleRow row = r.run((jvm, line) -> {
                        if (verbose) {
                            err.println("[jvm " + jvm + "] " + line);
                        }
                    });
                    rows.add(row);
                    out.println(row.toTableRow());
                    out.flush();
                } catch (IllegalStateException e) {
                    err.println("commbench scale: " + e.getMessage());
                    exit = 1;
                }
            }
        }
        if (plot != null && !rows.isEmpty()) {
            ScaleChart.write(rows, layout, plot);
            err.println("commbench scale: chart written to " + plot);
        }
        return exit;
    }
}
