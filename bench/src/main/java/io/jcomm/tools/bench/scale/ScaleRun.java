package io.jcomm.tools.bench.scale;

import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import io.jcomm.tools.bench.WorkerJvms;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;

/**
 * One run of the scale measurement: a jcomm store server in this JVM, {@code jvms} {@link ScaleWorker}
 * JVMs on this host with {@code n / jvms} thread ranks each (TP × PP × DP, DP = n / (TP × PP)), and the
 * {@link ScaleRow} of their reports and of the server's command count. {@code commbench scale} and the
 * scale test both run it.
 *
 * @param n ranks
 * @param jvms worker JVMs, each a host of its own
 * @param tp tensor parallel size
 * @param pp pipeline parallel size
 * @param timeout every blocking step of a rank; the run as a whole gets 30 s more
 * @param jvmArgs extra worker JVM arguments
 */
public record ScaleRun(int n, int jvms, int tp, int pp, Duration timeout, List<String> jvmArgs) {

    /** Worker JVM flags: 1,024 threads a JVM need small stacks, and the ranks' shared-memory rings direct memory. */
    static final List<String> WORKER_FLAGS = List.of("-XX:+UseSerialGC", "-XX:-UsePerfData", "-Xmx1g", "-Xss512k",
            "-XX:MaxDirectMemorySize=6g", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn");

    /** Lines of a worker's output kept for the message of a failed run. */
    private static final int TAIL_LINES = 40;

    /**
     * A run.
     *
     * @throws IllegalArgumentException when the sizes do not fit ({@link #check})
     */
    public ScaleRun {
        String why = check(n, jvms, tp, pp);
        if (why != null) {
            throw new IllegalArgumentException(why);
        }
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("the timeout must be positive: " + timeout);
        }
        jvmArgs = List.copyOf(jvmArgs);
    }

    /**
     * Why {@code n} ranks cannot be laid out as TP × PP × DP over {@code jvms} JVMs with the same number of
     * ranks each, or {@code null} when they can.
     */
    public static String check(int n, int jvms, int tp, int pp) {
        if (tp < 1 || pp < 1 || jvms < 1) {
            return "--tp, --pp and --jvms must be at least 1";
        }
        if (n < 1 || n % ((long) tp * pp) != 0) {
            return n + " ranks: not a positive multiple of TP x PP = " + (long) tp * pp;
        }
        if (n % jvms != 0) {
            return n + " ranks: not a multiple of " + jvms + " JVMs";
        }
        return null;
    }

    /**
     * Runs it.
     *
     * @param output every output line of the workers that is not a report, with the JVM's index
     *               ({@code (jvm, line) -> {}} to drop them)
     * @throws IllegalStateException when a worker fails or the time runs out (the message has the end of
     *                               each worker's output)
     */
    public ScaleRow run(BiConsumer<Integer, String> output) throws IOException, InterruptedException {
        List<String> flags = new ArrayList<>(WORKER_FLAGS);
        flags.addAll(jvmArgs);
        List<String> cmd = WorkerJvms.javaCommand(flags, ScaleWorker.class);
        List<ScaleRow.Jvm> reports = new ArrayList<>();
        List<Deque<String>> tails = new ArrayList<>();
        String[] failures = new String[jvms];
        for (int j = 0; j < jvms; j++) {
            tails.add(new ArrayDeque<>());
        }
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().name("scale")
                .maxPendingConnections(4 * n).build())) {
            List<String> args = List.of(Integer.toString(n), Integer.toString(jvms), Integer.toString(tp),
                    Integer.toString(pp), Integer.toString(server.port()), Long.toString(timeout.toSeconds()));
            long commandsBefore = server.stats().commands();
            long launched = System.currentTimeMillis();
            int exit;
            try (WorkerJvms workers = WorkerJvms.start(jvms, j -> {
                List<String> c = new ArrayList<>(cmd);
                c.addAll(args);
                return c;
            }, server.port(), Map.of(), (jvm, line) -> {
                if (ScaleRow.Jvm.isReport(line)) {
                    synchronized (reports) {
                        reports.add(ScaleRow.Jvm.parse(line));
                    }
                    return;
                }
                Deque<String> tail = tails.get(jvm);
                synchronized (tail) {
                    if (line.startsWith(ScaleWorker.FAILED) && failures[jvm] == null) {
                        failures[jvm] = line;
                    }
                    if (tail.size() == TAIL_LINES) {
                        tail.removeFirst();
                    }
                    tail.addLast(line);
                }
                output.accept(jvm, line);
            }, "scale-out")) {
                exit = workers.await(timeout.toSeconds() + 30, "commbench scale, " + n + " ranks");
            }
            long commands = server.stats().commands() - commandsBefore;
            synchronized (reports) {
                if (exit != 0 || reports.size() != jvms) {
                    throw new IllegalStateException(n + " ranks over " + jvms + " JVMs failed (" + reports.size()
                            + " of " + jvms + " JVMs reported)" + tails(tails, failures));
                }
                return ScaleRow.of(n, reports, commands, launched);
            }
        }
    }

    /** Each JVM's failure (the first line of its message) and the last lines of its output. */
    private static String tails(List<Deque<String>> tails, String[] failures) {
        StringBuilder sb = new StringBuilder();
        for (int j = 0; j < tails.size(); j++) {
            Deque<String> t = tails.get(j);
            synchronized (t) {
                if (failures[j] != null) {
                    sb.append("\nJVM ").append(j).append(": ").append(failures[j]);
                }
                if (!t.isEmpty()) {
                    sb.append("\n--- the last lines of JVM ").append(j).append(" ---\n").append(String.join("\n", t));
                }
            }
        }
        return sb.toString();
    }
}
