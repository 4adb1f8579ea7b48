package io.jcomm.tools.run;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * Which CPUs each of a node's workers runs on. When the workers fit the CPUs the launcher may use
 * ({@code workers <= CPUs}), worker i gets its own contiguous slice of them ({@code taskset -c}), so that
 * two ranks never share one CPU while another stands idle.
 *
 * <p>Why: on a small host the scheduler often puts two ranks that wait for each other on the same CPU;
 * every hand-off between them is then a context switch (about 15 µs a small all-reduce on the 2-CPU
 * development machine instead of 1 µs), and the host's load balancer sees no reason to move one, because
 * the other CPU never has two runnable threads. It stays that way for tens of thousands of operations.
 * With each worker on its own CPU, a fresh job's first 10,000 small all-reduces had a p50 of 3.0 µs
 * against 15-18 µs unbound, and the steady state was the same (docs/PERFORMANCE.md, "Warm-up"). When the
 * workers outnumber the CPUs nothing is bound (a slice would hold less than one CPU). {@code --cpu-bind none}
 * turns it off; without {@code taskset} on the {@code PATH} nothing is bound either.
 */
public final class CpuBinding {

    private CpuBinding() {
    }

    /** The CPUs this process may run on ({@code Cpus_allowed_list} of {@code /proc/self/status}), or empty when unknown. */
    public static List<Integer> allowed() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"), StandardCharsets.US_ASCII)) {
                if (line.startsWith("Cpus_allowed_list:")) {
                    return parseList(line.substring(line.indexOf(':') + 1).trim());
                }
            }
        } catch (IOException | RuntimeException e) {
            // not Linux, or an unexpected format: no binding
        }
        return List.of();
    }

    /** Parses a kernel CPU list such as {@code 0-3,6,8-9}. */
    static List<Integer> parseList(String list) {
        List<Integer> cpus = new ArrayList<>();
        for (String part : list.split(",")) {
            String p = part.trim();
            if (p.isEmpty()) {
                continue;
            }
            int dash = p.indexOf('-');
            if (dash < 0) {
                cpus.add(Integer.parseInt(p));
            } else {
                int from = Integer.parseInt(p.substring(0, dash));
                int to = Integer.parseInt(p.substring(dash + 1));
                for (int c = from; c <= to; c++) {
                    cpus.add(c);
                }
            }
        }
        Collections.sort(cpus);
        return List.copyOf(cpus);
    }

    /**
     * The CPUs of worker {@code localRank} of {@code workers}: slice {@code localRank} of {@code cpus} cut in
     * {@code workers} contiguous parts (the first {@code cpus % workers} parts one CPU larger), or empty
     * when the workers outnumber the CPUs.
     */
    static List<Integer> slice(int localRank, int workers, List<Integer> cpus) {
        int n = cpus.size();
        if (workers < 1 || n < workers) {
            return List.of();
        }
        int base = n / workers;
        int extra = n % workers;
        int from = localRank * base + Math.min(localRank, extra);
        int size = base + (localRank < extra ? 1 : 0);
        return cpus.subList(from, from + size);
    }

    /** {@code taskset -c <slice>} for worker {@code localRank}, or nothing. */
    public static List<String> prefix(int localRank, int workers, List<Integer> cpus, String taskset) {
        List<Integer> mine = slice(localRank, workers, cpus);
        if (mine.isEmpty() || taskset == null) {
            return List.of();
        }
        StringBuilder sb = new StringBuilder();
        for (int c : mine) {
            sb.append(sb.length() > 0 ? "," : "").append(c);
        }
        return List.of(taskset, "-c", sb.toString());
    }

    /** {@code taskset} on the {@code PATH}, or null. */
    public static String findTaskset() {
        String path = System.getenv("PATH");
        for (String dir : (path == null ? "/usr/bin:/bin" : path).split(":")) {
            if (!dir.isEmpty() && Files.isExecutable(Path.of(dir, "taskset"))) {
                return Path.of(dir, "taskset").toString();
            }
        }
        return null;
    }
}
