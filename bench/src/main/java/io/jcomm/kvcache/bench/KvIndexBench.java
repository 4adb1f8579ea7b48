package io.jcomm.kvcache.bench;

import io.jcomm.api.JvmFlags;
import io.jcomm.kvcache.BlockHash;
import io.jcomm.kvcache.BlockLocation;
import io.jcomm.kvcache.BlockOwner;
import io.jcomm.kvcache.HostBlockIndex;
import io.jcomm.kvcache.IndexOptions;
import io.jcomm.kvcache.KvSlice;
import io.jcomm.transfer.MemoryKind;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code commbench kv-index}: the host's KV-block index ({@link HostBlockIndex}) as serving processes use
 * it. It creates an index file (its bound a fifth above {@code --entries}: the bound holds per segment),
 * fills it with {@code --entries} blocks (of a live owner, this process),
 * reports its size (entries, the file's length, the pages it occupies, Chronicle's off-heap memory),
 * then starts {@code --processes} fresh JVMs at once that each open the file (timing their first open,
 * Chronicle's code generation included) and look up {@code --lookups} random keys ({@code --hit-ratio}
 * of them present) with one thread, timing every lookup (owner liveness check included) in an
 * HdrHistogram; each round prints every process's p50, p99 and rate, then the medians over the rounds
 * with their ranges. The file is deleted at the end.
 */
@Command(name = "kv-index", mixinStandardHelpOptions = true,
        description = "The host's KV-block index (Chronicle Map): fill it, its size, then lookup latency from several "
                + "processes at once and their first open.")
public final class KvIndexBench implements Callable<Integer> {

    @Option(names = "--entries", description = "blocks in the index (default ${DEFAULT-VALUE})")
    long entries = 1_000_000;

    @Option(names = "--processes", description = "processes looking up at once (default ${DEFAULT-VALUE})")
    int processes = 4;

    @Option(names = "--lookups", description = "timed lookups per process and round (default ${DEFAULT-VALUE})")
    int lookups = 200_000;

    @Option(names = "--hit-ratio", description = "share of lookups whose key is present (default ${DEFAULT-VALUE})")
    double hitRatio = 0.9;

    @Option(names = "--rounds", description = "rounds of lookups, each with new processes (default ${DEFAULT-VALUE})")
    int rounds = 3;

    @Option(names = "--dir", description = "directory of the index file (default ${DEFAULT-VALUE})")
    Path dir = Path.of("/dev/shm");

    @Option(names = "--timeout", description = "seconds a round may take (default ${DEFAULT-VALUE})")
    int timeoutSeconds = 300;

    private final PrintStream out;

    public KvIndexBench() {
        this(System.out);
    }

    KvIndexBench(PrintStream out) {
        this.out = out;
    }

    static BlockHash key(long i) {
        byte[] b = new byte[BlockHash.BYTES];
        SplittableRandom r = new SplittableRandom(i * 0x9E3779B97F4A7C15L + 17);
        for (int k = 0; k < b.length; k += 8) {
            long v = r.nextLong();
            for (int j = 0; j < 8; j++) {
                b[k + j] = (byte) (v >>> (8 * j));
            }
        }
        return BlockHash.of(b);
    }

    static BlockLocation location(long i, BlockOwner owner) {
        RemoteDescriptor d = new RemoteDescriptor("llama-kv-bench-" + (i % 8), 3, 11, MemoryKind.SHARED, (i % 4096) * 65536L,
                65536, Set.of(Permission.READ));
        KvSlice s = KvSlice.ofRank(8, 2, (int) (i % 2), 2, 0, 1);
        return new BlockLocation("bench", d, s, 16, new int[] {(int) i}, owner, i);
    }

    @Override
    public Integer call() throws Exception {
        if (entries < 1 || processes < 1 || lookups < 1 || rounds < 1 || hitRatio < 0 || hitRatio > 1) {
            throw new IllegalArgumentException("positive --entries, --processes, --lookups, --rounds; --hit-ratio in [0, 1]");
        }
        Path file = dir.resolve("jcomm-kv-index-bench-" + ProcessHandle.current().pid() + ".cmap");
        try {
            // the bound a fifth above the entries: the bound is per segment, and keys fill segments unevenly
            IndexOptions opts = IndexOptions.builder(file).maxEntries(Math.max(IndexOptions.MIN_MAX_ENTRIES, entries + entries / 5))
                    .sweepInterval(Duration.ZERO).build();
            long t0 = System.nanoTime();
            try (HostBlockIndex idx = HostBlockIndex.open(opts)) {
                long opened = System.nanoTime() - t0;
                BlockOwner me = BlockOwner.self();
                long t1 = System.nanoTime();
                for (long i = 0; i < entries; i++) {
                    idx.publish(key(i), location(i, me));
                }
                double fillSeconds = (System.nanoTime() - t1) / 1e9;
                HostBlockIndex.Stats s = idx.stats();
                out.printf(Locale.ROOT, "kv-index: created %s in %.2f s (this JVM's first Chronicle Map); filled %,d blocks in "
                                + "%.1f s (%.0f publishes/s)%n", file, opened / 1e9, s.entries(), fillSeconds,
                        entries / fillSeconds);
                long used = allocatedBytes(file);
                out.printf(Locale.ROOT, "kv-index: at %,d entries (bound %,d): file %.1f MB long, %.1f MB of it in use "
                                + "(%.0f bytes per entry), Chronicle off-heap %.1f MB; a location is %d bytes%n", s.entries(),
                        s.bound(), s.fileBytes() / 1e6, used / 1e6, used / (double) Math.max(1, s.entries()),
                        s.offHeapBytes() / 1e6, location(1, me).encode().length);
                double[][] p50 = new double[rounds][];
                double[][] p99 = new double[rounds][];
                double[][] open = new double[rounds][];
                double[] rate = new double[rounds];
                for (int r = 0; r < rounds; r++) {
                    double[][] res = round(file, r);
                    p50[r] = res[0];
                    p99[r] = res[1];
                    open[r] = res[2];
                    rate[r] = Arrays.stream(res[3]).sum();
                    out.printf(Locale.ROOT, "kv-index: round %d: %d processes at once: lookup p50 %s us, p99 %s us; first open "
                                    + "%s s; %.0f lookups/s in all%n", r + 1, processes, list(res[0], "%.2f"), list(res[1], "%.2f"),
                            list(res[2], "%.2f"), rate[r]);
                }
                out.printf(Locale.ROOT, "kv-index: summary (%,d entries, %d processes, %.0f %% hits): lookup p50 %.2f us [%s], "
                                + "p99 %.2f us [%s] (each the median over the processes of a round; rounds in brackets); "
                                + "first open %.2f s [%.2f-%.2f]; %.0f lookups/s [%s]%n", s.entries(), processes, 100 * hitRatio,
                        median(medians(p50)), list(medians(p50), "%.2f"), median(medians(p99)), list(medians(p99), "%.2f"),
                        median(flat(open)), min(flat(open)), max(flat(open)), median(rate), list(rate, "%.0f"));
            }
            return 0;
        } finally {
            Files.deleteIfExists(file);
        }
    }

    /** One round: per process p50 (us), p99 (us), first open (s), lookups/s. */
    private double[][] round(Path file, int round) throws IOException, InterruptedException {
        List<Process> ps = new ArrayList<>();
        try {
            for (int p = 0; p < processes; p++) {
                List<String> cmd = new ArrayList<>();
                cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
                cmd.addAll(JvmFlags.REQUIRED);
                cmd.addAll(List.of("-Xmx256m", "-XX:+UseSerialGC", "-cp", System.getProperty("java.class.path"),
                        Worker.class.getName(), file.toString(), Long.toString(entries), Integer.toString(lookups),
                        Double.toString(hitRatio), Long.toString(round * 1000L + p)));
                ps.add(new ProcessBuilder(cmd).redirectErrorStream(true).start());
            }
            double[][] res = new double[4][processes];
            for (int p = 0; p < processes; p++) {
                Process proc = ps.get(p);
                String line = null;
                try (BufferedReader r = new BufferedReader(new InputStreamReader(proc.getInputStream(), StandardCharsets.UTF_8))) {
                    String l;
                    while ((l = r.readLine()) != null) {
                        if (l.startsWith("@@kv-index ")) {
                            line = l;
                        }
                    }
                }
                if (!proc.waitFor(timeoutSeconds, TimeUnit.SECONDS) || proc.exitValue() != 0 || line == null) {
                    throw new IllegalStateException("lookup process " + p + " failed (exit "
                            + (proc.isAlive() ? "none" : proc.exitValue()) + ")");
                }
                String[] f = line.split(" ");
                for (int k = 0; k < 4; k++) {
                    res[k][p] = Double.parseDouble(f[k + 1]);
                }
            }
            return res;
        } finally {
            for (Process p : ps) {
                p.destroyForcibly();
            }
        }
    }

    private static long allocatedBytes(Path file) {
        try {
            Process p = new ProcessBuilder("du", "-B1", file.toString()).redirectErrorStream(true).start();
            String o = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
            if (p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0) {
                return Long.parseLong(o.split("\\s+")[0]);
            }
        } catch (IOException | NumberFormatException e) {
            // no du
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return -1;
    }

    private static double[] medians(double[][] rows) {
        double[] m = new double[rows.length];
        for (int i = 0; i < rows.length; i++) {
            m[i] = median(rows[i]);
        }
        return m;
    }

    private static double[] flat(double[][] rows) {
        return Arrays.stream(rows).flatMapToDouble(Arrays::stream).toArray();
    }

    private static double median(double[] v) {
        double[] s = v.clone();
        Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }

    private static double min(double[] v) {
        return Arrays.stream(v).min().orElse(0);
    }

    private static double max(double[] v) {
        return Arrays.stream(v).max().orElse(0);
    }

    private static String list(double[] v, String fmt) {
        StringBuilder b = new StringBuilder();
        for (double d : v) {
            b.append(b.length() == 0 ? "" : ", ").append(String.format(Locale.ROOT, fmt, d));
        }
        return b.toString();
    }

    /**
     * A lookup process: {@code FILE ENTRIES LOOKUPS HIT_RATIO SEED}; prints
     * {@code @@kv-index p50us p99us openSeconds lookupsPerSecond}.
     */
    public static final class Worker {
        private Worker() {
        }

        public static void main(String[] a) {
            Path file = Path.of(a[0]);
            long entries = Long.parseLong(a[1]);
            int lookups = Integer.parseInt(a[2]);
            double hit = Double.parseDouble(a[3]);
            SplittableRandom rnd = new SplittableRandom(Long.parseLong(a[4]));
            long t0 = System.nanoTime();
            try (HostBlockIndex idx = HostBlockIndex.open(IndexOptions.builder(file).sweepInterval(Duration.ZERO).build())) {
                double open = (System.nanoTime() - t0) / 1e9;
                Histogram h = new Histogram(3_600_000_000_000L, 3);
                int warm = Math.min(lookups, 50_000);
                long found = 0;
                long begin = 0;
                for (int i = -warm; i < lookups; i++) {
                    if (i == 0) {
                        begin = System.nanoTime();
                    }
                    long k = rnd.nextDouble() < hit ? rnd.nextLong(entries) : entries + rnd.nextLong(1L << 40);
                    BlockHash key = key(k);
                    long s = System.nanoTime();
                    boolean present = idx.lookup(key).isPresent();
                    long d = System.nanoTime() - s;
                    if (i >= 0) {
                        h.recordValue(d);
                        found += present ? 1 : 0;
                    }
                }
                double seconds = (System.nanoTime() - begin) / 1e9;
                if (found == 0 && hit > 0) {
                    throw new IllegalStateException("no lookup hit");
                }
                System.out.printf(Locale.ROOT, "@@kv-index %.3f %.3f %.3f %.0f%n", h.getValueAtPercentile(50) / 1e3,
                        h.getValueAtPercentile(99) / 1e3, open, lookups / seconds);
            }
        }
    }
}
