package io.jcomm.tools.bench;

import java.util.List;
import java.util.Locale;

/**
 * One row of a benchmark table: the median time of one operation at one size, its algorithm and bus
 * bandwidth, and latency percentiles. Travels from rank 0's worker to the launcher as one line
 * ({@link #toLine()} / {@link #parse}).
 */
record BenchResult(long bytes, long count, String dtype, double medianUs, double algbw, double busbw,
                   double p50Us, double p99Us, double p999Us, int iters, double cpuUs) {

    static final String PREFIX = "RESULT ";
    /** Prefix of rank 0's informational lines (printed with the table as comments). */
    static final String NOTE_PREFIX = "NOTE ";

    String toLine() {
        return PREFIX + String.format(Locale.ROOT, "%d %d %s %.3f %.6f %.6f %.3f %.3f %.3f %d %.3f", bytes, count, dtype,
                medianUs, algbw, busbw, p50Us, p99Us, p999Us, iters, cpuUs);
    }

    static BenchResult parse(String line) {
        String[] f = line.substring(PREFIX.length()).trim().split(" ");
        return new BenchResult(Long.parseLong(f[0]), Long.parseLong(f[1]), f[2], Double.parseDouble(f[3]),
                Double.parseDouble(f[4]), Double.parseDouble(f[5]), Double.parseDouble(f[6]), Double.parseDouble(f[7]),
                Double.parseDouble(f[8]), Integer.parseInt(f[9]), Double.parseDouble(f[10]));
    }

    static String header(boolean latency) {
        if (latency) {
            return String.format(Locale.ROOT, "#%13s %12s %6s %11s %11s %11s %8s %9s", "size(B)", "count", "dtype",
                    "p50(us)", "p99(us)", "p99.9(us)", "iters", "cpu(us)");
        }
        return String.format(Locale.ROOT, "#%13s %12s %6s %11s %12s %12s %9s", "size(B)", "count", "dtype", "time(us)",
                "algbw(GB/s)", "busbw(GB/s)", "cpu(us)");
    }

    String row(boolean latency) {
        if (latency) {
            return String.format(Locale.ROOT, " %13d %12d %6s %11.1f %11.1f %11.1f %8d %9.1f", bytes, count, dtype, p50Us,
                    p99Us, p999Us, iters, cpuUs);
        }
        return String.format(Locale.ROOT, " %13d %12d %6s %11.1f %12.3f %12.3f %9.1f", bytes, count, dtype, medianUs, algbw,
                busbw, cpuUs);
    }

    String json() {
        return String.format(Locale.ROOT, "{\"size\": %d, \"count\": %d, \"dtype\": \"%s\", \"time_us\": %.3f, "
                + "\"algbw_gbps\": %.6f, \"busbw_gbps\": %.6f, \"p50_us\": %.3f, \"p99_us\": %.3f, \"p999_us\": %.3f, "
                + "\"iters\": %d, \"cpu_us\": %.3f}", bytes, count, dtype, medianUs, algbw, busbw, p50Us, p99Us, p999Us, iters,
                cpuUs);
    }

    /**
     * One run as JSON; {@code api} (null: none) and the shared-memory {@code floor} (null or not
     * measured: none) are written only when given.
     */
    static String json(String tool, String op, String backend, String api, int nproc, String options,
                       ShmFloor.Result floor, List<BenchResult> rows) {
        StringBuilder sb = new StringBuilder();
        sb.append("{\n  \"tool\": \"").append(tool).append("\",\n  \"op\": \"").append(op).append("\",\n  \"backend\": \"")
                .append(backend).append('"');
        if (api != null) {
            sb.append(",\n  \"api\": \"").append(api).append('"');
        }
        sb.append(",\n  \"nproc\": ").append(nproc).append(",\n  \"options\": \"")
                .append(options.replace("\\", "\\\\").replace("\"", "\\\"")).append('"');
        if (floor != null && floor.measured()) {
            sb.append(String.format(Locale.ROOT, ",\n  \"shm_floor_p50_us\": %.4f,\n  \"shm_floor_p99_us\": %.4f",
                    floor.p50Us(), floor.p99Us()));
        }
        sb.append(",\n  \"results\": [");
        for (int i = 0; i < rows.size(); i++) {
            sb.append(i == 0 ? "\n    " : ",\n    ").append(rows.get(i).json());
        }
        sb.append("\n  ]\n}\n");
        return sb.toString();
    }
}
