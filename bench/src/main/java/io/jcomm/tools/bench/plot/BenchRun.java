package io.jcomm.tools.bench.plot;

import io.jcomm.tools.bench.BenchOp;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * One benchmark run as written by {@code commbench --json}: an operation on one backend with a row
 * per message size. {@link #backend()} carries the API when it is not the process group
 * ({@code tcp/coordinator}), so that plots and comparisons keep the two apart. A file holds one run (an object) or several (an array of objects, e.g. from
 * {@code --backend tcp,gloo}).
 *
 * @param source where the run came from (a file name), for labels
 */
public record BenchRun(String tool, String op, String backend, int nproc, String options, List<Row> rows, String source) {

    /** One size of a run; times in microseconds, bandwidths in GB/s (10^9 bytes per second). */
    public record Row(long size, long count, String dtype, double timeUs, double algbwGBps, double busbwGBps,
                      double p50Us, double p99Us, double p999Us, long iters) {
    }

    public BenchRun {
        rows = List.copyOf(rows);
    }

    /**
     * Whether the run reports latency percentiles rather than bandwidth: the operation is one of
     * commbench's latency operations, or (for an unknown op) no row has a bandwidth.
     */
    public boolean latency() {
        try {
            return BenchOp.parse(op).latency();
        } catch (IllegalArgumentException e) {
            return rows.stream().allMatch(r -> r.busbwGBps() == 0 && r.algbwGBps() == 0);
        }
    }

    /** "tcp, 4 ranks" plus the options when there are any. */
    public String describe() {
        return backend + ", " + nproc + (nproc == 1 ? " rank" : " ranks") + (options.isEmpty() ? "" : ", " + options);
    }

    /** Reads every run of a JSON file. */
    public static List<BenchRun> read(Path file) throws IOException {
        if (Files.size(file) > Json.MAX_CHARS) {
            throw new IOException(file + " is larger than " + Json.MAX_CHARS + " bytes");
        }
        try {
            return parse(Files.readString(file, StandardCharsets.UTF_8), file.getFileName().toString());
        } catch (IllegalArgumentException e) {
            throw new IOException(file + ": " + e.getMessage(), e);
        }
    }

    /** Parses one run (an object) or several (an array of objects). */
    public static List<BenchRun> parse(String json, String source) {
        Object v = Json.parse(json);
        List<BenchRun> out = new ArrayList<>();
        if (v instanceof List<?> list) {
            for (Object o : list) {
                out.add(fromObject(o, source));
            }
        } else {
            out.add(fromObject(v, source));
        }
        return out;
    }

    private static BenchRun fromObject(Object o, String source) {
        Map<?, ?> m = asMap(o, "a run");
        Object results = m.get("results");
        if (!(results instanceof List<?> list)) {
            throw new IllegalArgumentException("a run has no \"results\" array");
        }
        List<Row> rows = new ArrayList<>();
        for (Object r : list) {
            Map<?, ?> row = asMap(r, "a result");
            rows.add(new Row((long) num(row, "size"), (long) num(row, "count"), str(row, "dtype", ""),
                    num(row, "time_us"), num(row, "algbw_gbps"), num(row, "busbw_gbps"), num(row, "p50_us"),
                    num(row, "p99_us"), num(row, "p999_us"), (long) num(row, "iters")));
        }
        // a run through another API than the process group is told apart by it: "tcp/coordinator"
        String api = str(m, "api", "process-group");
        String backend = str(m, "backend", "?") + (api.equals("process-group") ? "" : "/" + api);
        return new BenchRun(str(m, "tool", "commbench"), str(m, "op", "?").toLowerCase(Locale.ROOT), backend,
                (int) num(m, "nproc"), str(m, "options", ""), rows, source);
    }

    private static Map<?, ?> asMap(Object o, String what) {
        if (!(o instanceof Map<?, ?> m)) {
            throw new IllegalArgumentException(what + " is not a JSON object");
        }
        return m;
    }

    private static double num(Map<?, ?> m, String k) {
        Object v = m.get(k);
        return v instanceof Double d ? d : 0;
    }

    private static String str(Map<?, ?> m, String k, String dflt) {
        Object v = m.get(k);
        return v instanceof String s ? s : dflt;
    }

    /** Sizes as commbench writes them: 512, 4K, 64M, 1G. */
    public static String humanSize(double bytes) {
        long b = Math.round(bytes);
        if (b >= (1L << 30) && b % (1L << 30) == 0) {
            return (b >> 30) + "G";
        }
        if (b >= (1L << 20) && b % (1L << 20) == 0) {
            return (b >> 20) + "M";
        }
        if (b >= (1L << 10) && b % (1L << 10) == 0) {
            return (b >> 10) + "K";
        }
        return Long.toString(b);
    }

    /** Several runs' JSON documents (as commbench writes one run) as one JSON array. */
    public static String jsonArray(List<String> runs) {
        StringBuilder sb = new StringBuilder("[\n");
        for (int i = 0; i < runs.size(); i++) {
            sb.append(runs.get(i).strip()).append(i + 1 < runs.size() ? ",\n" : "\n");
        }
        return sb.append("]\n").toString();
    }
}
