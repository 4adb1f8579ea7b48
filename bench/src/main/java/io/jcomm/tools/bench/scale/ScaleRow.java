package io.jcomm.tools.bench.scale;

import java.util.List;
import java.util.Locale;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * One row of the scale table: N thread ranks over several JVMs, from the lines of their
 * {@link ScaleWorker}s and the store server's command count. Times are the slowest JVM's (each JVM
 * reports its slowest rank); sockets, store commands and CPU are the sum over the JVMs divided by N.
 * A figure a JVM could not measure (sockets outside Linux, CPU time where the OS does not say) is NaN.
 *
 * @param n ranks
 * @param readyMs until every group of every rank was ready
 * @param barrierMs the first world barrier
 * @param launchToBarrierMs from the JVMs' launch until the first world barrier returned on every rank (JVM start,
 *                          group creation and the barrier: what a job waits for before its first collective)
 * @param allReduceMs the world all-reduces (small and large) and the TP all-reduce that follow it
 * @param socketsReady sockets per rank that the groups opened, once every group was ready (store clients not counted)
 * @param socketsBarrier the same after the first world barrier
 * @param socketsAllReduce the same after the all-reduces
 * @param storeCommandsPerRank the store server's commands of the run (clients' connects included) per rank
 * @param cpuMsPerRank CPU time of the JVMs until every group was ready (JVM start included) per rank
 */
public record ScaleRow(int n, long readyMs, long barrierMs, long launchToBarrierMs, long allReduceMs, double socketsReady,
                       double socketsBarrier, double socketsAllReduce, double storeCommandsPerRank, double cpuMsPerRank) {

    /**
     * What one JVM reports; a negative socket count or CPU time means "not measured"; {@code barrierDoneEpochMs}:
     * the wall clock (epoch ms) when the first world barrier had returned on every rank of the JVM.
     */
    public record Jvm(int jvm, int ranks, long readyMs, long barrierMs, long allReduceMs, long socketsReady,
                      long socketsBarrier, long socketsAllReduce, long cpuMs, long barrierDoneEpochMs) {

        private static final String PREFIX = "@@scale ";
        private static final Pattern LINE = Pattern.compile(Pattern.quote(PREFIX)
                + "jvm=(\\d+) ranks=(\\d+) readyMs=(\\d+) barrierMs=(\\d+) allReduceMs=(\\d+) socketsReady=(-?\\d+) "
                + "socketsBarrier=(-?\\d+) socketsAllReduce=(-?\\d+) cpuMs=(-?\\d+) barrierDoneEpochMs=(\\d+)");

        /** The line a worker prints; {@link #parse} reads it back. */
        public String toLine() {
            return PREFIX + "jvm=" + jvm + " ranks=" + ranks + " readyMs=" + readyMs + " barrierMs=" + barrierMs
                    + " allReduceMs=" + allReduceMs + " socketsReady=" + socketsReady + " socketsBarrier=" + socketsBarrier
                    + " socketsAllReduce=" + socketsAllReduce + " cpuMs=" + cpuMs + " barrierDoneEpochMs=" + barrierDoneEpochMs;
        }

        /** Whether {@code line} is a report (possibly malformed) rather than other worker output. */
        public static boolean isReport(String line) {
            return line.startsWith(PREFIX);
        }

        /**
         * Reads a worker's line.
         *
         * @throws IllegalArgumentException when it is not one
         */
        public static Jvm parse(String line) {
            Matcher m = LINE.matcher(line.strip());
            if (!m.matches()) {
                throw new IllegalArgumentException("not a scale report: " + line);
            }
            return new Jvm(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)), Long.parseLong(m.group(3)),
                    Long.parseLong(m.group(4)), Long.parseLong(m.group(5)), Long.parseLong(m.group(6)),
                    Long.parseLong(m.group(7)), Long.parseLong(m.group(8)), Long.parseLong(m.group(9)),
                    Long.parseLong(m.group(10)));
        }
    }

    /**
     * The row of a run of {@code n} ranks from every JVM's report.
     *
     * @param storeCommands the store server's commands during the run
     * @param launchedEpochMs the wall clock (epoch ms) right before the JVMs were launched
     * @throws IllegalArgumentException when the reports do not cover {@code n} ranks, or a JVM reported twice
     */
    public static ScaleRow of(int n, List<Jvm> jvms, long storeCommands, long launchedEpochMs) {
        if (jvms.stream().mapToInt(Jvm::ranks).sum() != n
                || jvms.stream().mapToInt(Jvm::jvm).distinct().count() != jvms.size()) {
            throw new IllegalArgumentException("the JVMs' reports do not cover " + n + " ranks once: " + jvms);
        }
        long ready = 0;
        long barrier = 0;
        long allReduce = 0;
        long barrierDone = launchedEpochMs;
        for (Jvm j : jvms) {
            barrierDone = Math.max(barrierDone, j.barrierDoneEpochMs());
            ready = Math.max(ready, j.readyMs());
            barrier = Math.max(barrier, j.barrierMs());
            allReduce = Math.max(allReduce, j.allReduceMs());
        }
        return new ScaleRow(n, ready, barrier, barrierDone - launchedEpochMs, allReduce, perRank(jvms, Jvm::socketsReady, n),
                perRank(jvms, Jvm::socketsBarrier, n), perRank(jvms, Jvm::socketsAllReduce, n), (double) storeCommands / n,
                perRank(jvms, Jvm::cpuMs, n));
    }

    private static double perRank(List<Jvm> jvms, java.util.function.ToLongFunction<Jvm> f, int n) {
        long sum = 0;
        for (Jvm j : jvms) {
            long v = f.applyAsLong(j);
            if (v < 0) {
                return Double.NaN;
            }
            sum += v;
        }
        return (double) sum / n;
    }

    private static final String FORMAT = "%6s %9s %14s %16s %20s %16s %11s %19s %15s %12s";

    /** The table's header, two lines: a note on what the columns count, then their names. */
    public static String header() {
        return "# sockets: per rank, opened for its groups (its store client not counted), at ready, after the first world "
                + "barrier and after the all-reduces; store cmds: the server's commands per rank; launch->barrier: from the "
                + "JVMs' launch until the first world barrier returned everywhere\n"
                + String.format(Locale.ROOT, FORMAT, "N", "ready ms", "sockets ready", "sockets barrier",
                "sockets all-reduces", "store cmds/rank", "barrier ms", "launch->barrier ms", "all-reduces ms", "CPU ms/rank");
    }

    /** This row under {@link #header()}. */
    public String toTableRow() {
        return String.format(Locale.ROOT, FORMAT, n, readyMs, fixed(socketsReady), fixed(socketsBarrier),
                fixed(socketsAllReduce), fixed(storeCommandsPerRank), barrierMs, launchToBarrierMs, allReduceMs,
                fixed(cpuMsPerRank));
    }

    private static String fixed(double v) {
        return Double.isNaN(v) ? "-" : String.format(Locale.ROOT, "%.1f", v);
    }
}
