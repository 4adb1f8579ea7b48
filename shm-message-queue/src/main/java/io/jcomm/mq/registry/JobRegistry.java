package io.jcomm.mq.registry;

import io.jcomm.api.internal.shm.ProcessIdentity;
import io.jcomm.mq.store.ChronicleMapStore;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * The host-wide registry of jcomm processes, in a {@link ChronicleMapStore} file shared by every
 * process of the host (default {@value #DEFAULT_FILE}, {@value #ENV} overrides it, {@code off}
 * disables it). Each process registers one {@link Entry} per parallel state (job, rank, pid, groups,
 * flight recorder file) and removes it when it closes; {@code bin/commtop} lists them. Entries of
 * processes that are gone (their {@link ProcessIdentity} is not alive: exited, killed, pid reused)
 * are reported as dead by {@link #scan()} and deleted there.
 *
 * <p>Opening costs seconds the first time in a JVM (Chronicle Map compiles code at run time):
 * processes register from a background thread ({@link JobRegistration}), never on their
 * initialisation path. Thread safe.
 */
public final class JobRegistry implements AutoCloseable {

    /** Environment variable naming the registry file; {@code off} disables the registry. */
    public static final String ENV = "JCOMM_REGISTRY";
    /** The default registry file. */
    public static final String DEFAULT_FILE = "/dev/shm/jcomm-registry.cm";

    static final String KEY_PREFIX = "proc/";
    private static final String FORMAT = "jcomm-registry-v1";

    private final ChronicleMapStore store;

    private JobRegistry(ChronicleMapStore store) {
        this.store = store;
    }

    /**
     * The registry file configured by {@code env} ({@value #ENV}: a path, or {@code off}/{@code 0}/
     * {@code false} to disable); {@value #DEFAULT_FILE} when unset; empty when disabled.
     */
    public static Optional<Path> configuredFile(Map<String, String> env) {
        String v = env.get(ENV);
        if (v == null || v.isBlank()) {
            return Optional.of(Path.of(DEFAULT_FILE));
        }
        if (v.equalsIgnoreCase("off") || v.equals("0") || v.equalsIgnoreCase("false")) {
            return Optional.empty();
        }
        return Optional.of(Path.of(v));
    }

    /**
     * Opens (creating if needed) the registry in {@code file}. Takes seconds the first time in a JVM.
     *
     * @throws io.jcomm.api.StoreException if the file cannot be created or mapped
     */
    public static JobRegistry open(Path file) {
        ChronicleMapStore.Options options = ChronicleMapStore.Options.builder()
                .entries(2048).averageKeyBytes(48).averageValueBytes(512).maxValueBytes(16 * 1024)
                .timeout(Duration.ofSeconds(5)).build();
        return new JobRegistry(ChronicleMapStore.open(file, options, false));
    }

    /** The registry file. */
    public Path file() {
        return store.file();
    }

    /** Adds or replaces {@code entry}. */
    public void register(Entry entry) {
        store.set(entry.key(), entry.encode());
    }

    /** Removes {@code entry}; whether it was there. */
    public boolean remove(Entry entry) {
        return store.deleteKey(entry.key());
    }

    /**
     * Every entry, split into those of live processes and those of dead ones; the dead ones are deleted
     * from the registry. Entries that cannot be decoded (another version) are left alone and skipped.
     */
    public Scan scan() {
        List<Entry> live = new ArrayList<>();
        List<Entry> dead = new ArrayList<>();
        for (Map.Entry<String, byte[]> e : store.entries(KEY_PREFIX).entrySet()) {
            Entry entry = Entry.decode(e.getValue());
            if (entry == null) {
                continue;
            }
            if (entry.identity().alive()) {
                live.add(entry);
            } else {
                dead.add(entry);
                store.deleteKey(e.getKey());
            }
        }
        Comparator<Entry> order = Comparator.comparing(Entry::job).thenComparingInt(Entry::rank).thenComparingLong(Entry::pid)
                .thenComparingInt(Entry::serial);
        live.sort(order);
        dead.sort(order);
        return new Scan(List.copyOf(live), List.copyOf(dead));
    }

    /** Unmaps the registry (the file stays: it is shared by the host). Idempotent. */
    @Override
    public void close() {
        store.close();
    }

    @Override
    public String toString() {
        return "JobRegistry{" + store.file() + "}";
    }

    /**
     * What {@link #scan()} found.
     *
     * @param live entries of live processes
     * @param dead entries of processes that are gone (deleted by the scan)
     */
    public record Scan(List<Entry> live, List<Entry> dead) {
    }

    /**
     * One registered parallel state of one process.
     *
     * @param job          the job's identity (see {@link #jobOf})
     * @param rank         global rank
     * @param worldSize    world size
     * @param pid          process id
     * @param startTicks   the process's start time ({@link ProcessIdentity#startTicks()})
     * @param serial       distinguishes several states of one process (ranks run as threads in tests)
     * @param groups       the names of its live groups
     * @param recorderFile its flight recorder file, or empty when it has none
     * @param registeredMillis when it registered (epoch milliseconds)
     */
    public record Entry(String job, int rank, int worldSize, long pid, long startTicks, int serial, List<String> groups,
                        String recorderFile, long registeredMillis) {

        /** Validates and copies. */
        public Entry {
            Objects.requireNonNull(job, "job");
            groups = List.copyOf(groups);
            recorderFile = recorderFile == null ? "" : recorderFile;
        }

        /**
         * The job identity shown for a configuration: {@code jobId} when it is not the default
         * ({@code JCOMM_JOB_ID}, {@code TORCHELASTIC_RUN_ID}), followed by the master address and port
         * that tell apart jobs of the same name.
         */
        public static String jobOf(String jobId, String defaultJobId, String masterAddr, int masterPort) {
            String master = masterAddr + ":" + masterPort;
            return jobId == null || jobId.equals(defaultJobId) ? master : jobId + "@" + master;
        }

        /** The process as it can be checked for liveness. */
        public ProcessIdentity identity() {
            return new ProcessIdentity(pid, startTicks);
        }

        /** The recorder file, if any. */
        public Optional<Path> recorder() {
            return recorderFile.isEmpty() ? Optional.empty() : Optional.of(Path.of(recorderFile));
        }

        String key() {
            return KEY_PREFIX + pid + "-" + startTicks + "-" + serial;
        }

        /** The value's text: a format line, then one {@code name=value} line per field ({@code group=} repeats). */
        byte[] encode() {
            StringBuilder sb = new StringBuilder(FORMAT).append('\n');
            line(sb, "job", job);
            line(sb, "rank", Integer.toString(rank));
            line(sb, "world", Integer.toString(worldSize));
            line(sb, "pid", Long.toString(pid));
            line(sb, "start", Long.toString(startTicks));
            line(sb, "serial", Integer.toString(serial));
            line(sb, "recorder", recorderFile);
            line(sb, "registered", Long.toString(registeredMillis));
            for (String g : groups) {
                line(sb, "group", g);
            }
            return sb.toString().getBytes(StandardCharsets.UTF_8);
        }

        private static void line(StringBuilder sb, String name, String value) {
            sb.append(name).append('=').append(value.replace('\n', ' ').replace('\r', ' ')).append('\n');
        }

        /** Parses {@link #encode()}'s text; null when it is not an entry of this format. */
        static Entry decode(byte[] bytes) {
            String[] lines = new String(bytes, StandardCharsets.UTF_8).split("\n");
            if (lines.length == 0 || !lines[0].equals(FORMAT)) {
                return null;
            }
            String job = null;
            String recorder = "";
            long rank = -1;
            long world = -1;
            long pid = -1;
            long start = -1;
            long serial = 0;
            long registered = 0;
            List<String> groups = new ArrayList<>();
            try {
                for (int i = 1; i < lines.length; i++) {
                    int eq = lines[i].indexOf('=');
                    if (eq < 0) {
                        continue;
                    }
                    String v = lines[i].substring(eq + 1);
                    switch (lines[i].substring(0, eq)) {
                        case "job" -> job = v;
                        case "rank" -> rank = Long.parseLong(v);
                        case "world" -> world = Long.parseLong(v);
                        case "pid" -> pid = Long.parseLong(v);
                        case "start" -> start = Long.parseLong(v);
                        case "serial" -> serial = Long.parseLong(v);
                        case "recorder" -> recorder = v;
                        case "registered" -> registered = Long.parseLong(v);
                        case "group" -> groups.add(v);
                        default -> {
                            // a field of a later version: ignored
                        }
                    }
                }
            } catch (NumberFormatException e) {
                return null;
            }
            if (job == null || pid <= 0) {
                return null;
            }
            return new Entry(job, (int) rank, (int) world, pid, start, (int) serial, groups, recorder, registered);
        }
    }
}
