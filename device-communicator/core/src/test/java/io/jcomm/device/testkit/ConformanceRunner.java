package io.jcomm.device.testkit;

import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.DeviceCommunicator;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Runs {@link ConformanceCases#all()} on one rank, in order. After each case the ranks agree over the
 * CPU group whether every rank passed; once a failure left the communicator unusable on some rank,
 * the remaining cases are not run (so that no rank waits for peers that stopped). Each result is printed as one line,
 * {@code CONFORMANCE PASS <case>} or {@code CONFORMANCE FAIL <case>: <reason>}, which
 * {@link #parse(List)} reads back from a worker JVM's output.
 */
public final class ConformanceRunner {

    public static final String PASS = "CONFORMANCE PASS ";
    public static final String FAIL = "CONFORMANCE FAIL ";
    public static final String NOT_RUN = "not run: an earlier failure left the communicator unusable";

    private static final Pattern LINE = Pattern.compile(".*?(CONFORMANCE (PASS|FAIL) )(.*)$");

    private ConformanceRunner() {
    }

    /**
     * Runs every case on this rank.
     *
     * @return case name to {@code null} (passed) or the failure text, in case order
     */
    public static Map<String, String> run(DeviceCommunicator comm, DeviceMemory mem, ProcessGroup cpuGroup, PrintStream out) {
        Map<String, String> results = new LinkedHashMap<>();
        ConformanceCases.Rank rank = new ConformanceCases.Rank(comm, mem);
        boolean stop = false;
        for (ConformanceCases.Case c : ConformanceCases.all()) {
            if (stop) {
                results.put(c.name(), NOT_RUN);
                continue;
            }
            String failure = null;
            try {
                c.body().run(rank);
            } catch (Throwable t) {
                failure = describe(t);
            }
            // 0: passed; 1: failed, communicator still usable (go on); 2: failed and unusable (stop)
            Tensor flag = Tensor.ofInts(failure == null ? 0 : comm.isClosed() ? 2 : 1);
            try {
                cpuGroup.allReduce(flag, ReduceOp.MAX);
            } catch (RuntimeException e) {
                // the control plane itself failed (a peer died or timed out): nothing more can run
                flag.setLong(0, 2);
                failure = failure != null ? failure : "the CPU group failed after this case: " + e;
            }
            if (failure == null && flag.getLong(0) != 0) {
                failure = "passed here, but failed on another rank";
            }
            stop = flag.getLong(0) == 2;
            results.put(c.name(), failure);
            if (out != null) {
                out.println(failure == null ? PASS + c.name() : FAIL + c.name() + ": " + failure.replace('\n', ' '));
                out.flush();
            }
        }
        return results;
    }

    /**
     * Runs {@link ConformanceCases#shrinkCases()} on this rank, after {@link #run}: they abort {@code comm}
     * and shrink {@code cpuGroup}, so each rank reports for itself (no agreement over the CPU group).
     *
     * @return case name to {@code null} (passed) or the failure text
     */
    public static Map<String, String> runShrink(DeviceCommunicator comm, DeviceMemory mem, ProcessGroup cpuGroup,
                                                PrintStream out) {
        Map<String, String> results = new LinkedHashMap<>();
        ConformanceCases.Rank rank = new ConformanceCases.Rank(comm, mem, cpuGroup);
        for (ConformanceCases.Case c : ConformanceCases.shrinkCases()) {
            String failure = null;
            try {
                c.body().run(rank);
            } catch (Throwable t) {
                failure = describe(t);
            }
            results.put(c.name(), failure);
            if (out != null) {
                out.println(failure == null ? PASS + c.name() : FAIL + c.name() + ": " + failure.replace('\n', ' '));
                out.flush();
            }
        }
        return results;
    }

    /** The names of the shrink cases ({@link #runShrink}). */
    public static List<String> shrinkCaseNames() {
        List<String> names = new ArrayList<>();
        for (ConformanceCases.Case c : ConformanceCases.shrinkCases()) {
            names.add(c.name());
        }
        return names;
    }

    private static String describe(Throwable t) {
        StringWriter sw = new StringWriter();
        t.printStackTrace(new PrintWriter(sw));
        String[] lines = sw.toString().split("\n");
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < Math.min(8, lines.length); i++) {
            sb.append(i == 0 ? "" : " | ").append(lines[i].strip());
        }
        return sb.toString();
    }

    /** Case name to {@code null} (passed) or failure text, from a worker's output lines. */
    public static Map<String, String> parse(List<String> lines) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String l : lines) {
            Matcher m = LINE.matcher(l);
            if (!m.matches()) {
                continue;
            }
            String rest = m.group(3);
            if (m.group(2).equals("PASS")) {
                out.put(rest, null);
            } else {
                int colon = rest.indexOf(": ");
                out.put(colon < 0 ? rest : rest.substring(0, colon), colon < 0 ? "failed" : rest.substring(colon + 2));
            }
        }
        return out;
    }

    /** The names of every case, in order. */
    public static List<String> caseNames() {
        List<String> names = new ArrayList<>();
        for (ConformanceCases.Case c : ConformanceCases.all()) {
            names.add(c.name());
        }
        return names;
    }
}
