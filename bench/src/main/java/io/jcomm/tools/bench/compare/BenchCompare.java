package io.jcomm.tools.bench.compare;

import io.jcomm.tools.bench.plot.BenchRun;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;

/**
 * Compares two sets of benchmark runs size by size. Runs are paired by operation (and by backend when
 * a side has several runs of one operation); sizes present on both sides are compared.
 *
 * <p>For bandwidth operations the table shows each side's time and bus bandwidth and the speed-up of
 * B over A ({@code timeA / timeB}: above 1 means B is faster); for latency operations, p50 and p99 of
 * each side and the p50 speed-up.
 */
public final class BenchCompare {

    private BenchCompare() {
    }

    /** One compared size. */
    public record Line(String op, long size, double a, double b, double speedup) {
    }

    /** The result: the text table and its lines. */
    public record Result(String table, List<Line> lines, List<String> unmatched) {
    }

    public static Result compare(List<BenchRun> a, String labelA, List<BenchRun> b, String labelB) {
        StringBuilder out = new StringBuilder();
        List<Line> lines = new ArrayList<>();
        List<String> unmatched = new ArrayList<>();
        out.append("# A = ").append(labelA).append('\n').append("# B = ").append(labelB).append('\n');
        out.append("# speed-up = A time / B time (above 1: B is faster)\n");
        for (BenchRun ra : a) {
            BenchRun rb = partner(ra, a, b);
            if (rb == null) {
                unmatched.add(ra.op() + " (" + ra.backend() + ") only in A");
                continue;
            }
            boolean latency = ra.latency();
            out.append('\n').append(String.format(Locale.ROOT, "# %s   A: %s   B: %s%n", ra.op(), ra.describe(), rb.describe()));
            if (latency) {
                out.append(String.format(Locale.ROOT, "#%13s %11s %11s %11s %11s %9s%n", "size(B)", "A p50(us)",
                        "B p50(us)", "A p99(us)", "B p99(us)", "speed-up"));
            } else {
                out.append(String.format(Locale.ROOT, "#%13s %11s %11s %12s %12s %9s%n", "size(B)", "A time(us)",
                        "B time(us)", "A busbw", "B busbw", "speed-up"));
            }
            Map<Long, BenchRun.Row> rowsB = new TreeMap<>();
            rb.rows().forEach(r -> rowsB.put(r.size(), r));
            for (BenchRun.Row x : ra.rows()) {
                BenchRun.Row y = rowsB.get(x.size());
                if (y == null) {
                    continue;
                }
                if (latency) {
                    double s = ratio(x.p50Us(), y.p50Us());
                    lines.add(new Line(ra.op(), x.size(), x.p50Us(), y.p50Us(), s));
                    out.append(String.format(Locale.ROOT, " %13d %11.1f %11.1f %11.1f %11.1f %8.2fx%n", x.size(), x.p50Us(),
                            y.p50Us(), x.p99Us(), y.p99Us(), s));
                } else {
                    double s = ratio(x.timeUs(), y.timeUs());
                    lines.add(new Line(ra.op(), x.size(), x.timeUs(), y.timeUs(), s));
                    out.append(String.format(Locale.ROOT, " %13d %11.1f %11.1f %12.3f %12.3f %8.2fx%n", x.size(), x.timeUs(),
                            y.timeUs(), x.busbwGBps(), y.busbwGBps(), s));
                }
            }
        }
        for (BenchRun rb : b) {
            if (partner(rb, b, a) == null) {
                unmatched.add(rb.op() + " (" + rb.backend() + ") only in B");
            }
        }
        for (String u : unmatched) {
            out.append("# not compared: ").append(u).append('\n');
        }
        return new Result(out.toString(), lines, unmatched);
    }

    /** The run of {@code other} for {@code r}'s operation: the only one, else the one of the same backend. */
    private static BenchRun partner(BenchRun r, List<BenchRun> own, List<BenchRun> other) {
        List<BenchRun> sameOp = other.stream().filter(o -> o.op().equals(r.op())).toList();
        long ownSameOp = own.stream().filter(o -> o.op().equals(r.op())).count();
        if (sameOp.size() == 1 && ownSameOp == 1) {
            return sameOp.get(0);
        }
        return sameOp.stream().filter(o -> o.backend().equals(r.backend())).findFirst().orElse(null);
    }

    private static double ratio(double a, double b) {
        return b > 0 ? a / b : Double.NaN;
    }
}
