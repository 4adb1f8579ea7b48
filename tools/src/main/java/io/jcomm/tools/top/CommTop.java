package io.jcomm.tools.top;

import io.jcomm.runtime.recorder.FlightRecorder;
import io.jcomm.runtime.recorder.RecorderReader;
import io.jcomm.runtime.recorder.RecorderReader.GroupState;
import io.jcomm.runtime.recorder.RecorderReader.Snapshot;
import io.jcomm.runtime.shm.ProcessIdentity;
import io.jcomm.runtime.shm.ShmFiles;
import io.jcomm.runtime.registry.JobRegistry;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.LocalTime;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code bin/commtop}: every jcomm job of this host, one line per rank and group: the current (or
 * latest) operation with its sequence number and state, how long a running one has been stuck, and
 * the group's operations and bytes per second (the bytes of each operation's larger buffer on that rank, as
 * the flight recorder counts them). Ranks come from the host's job registry
 * ({@link JobRegistry}: job, rank, pid, groups, flight recorder file); what they do comes from their
 * flight recorders. Entries of dead processes are reported and deleted. Processes with a flight
 * recorder but no registry entry (no parallel state, {@code JCOMM_REGISTRY=off}, or the registry cannot
 * be opened) are listed from the recorder files, their rank taken from their world group.
 *
 * <p>Refreshes every {@code --interval} seconds like {@code top} until interrupted; {@code --once}
 * prints one table (from two reads half a second apart, for the rates) and exits.
 */
@Command(name = "commtop", mixinStandardHelpOptions = true,
        description = {"Lists every jcomm job on this host: ranks, current operation per group, how long it has been "
                + "stuck, operations and bytes per second.",
                "BYTES/S counts, per operation, this rank's larger buffer of the call (k, M, G: powers of 1000)."})
public final class CommTop implements Callable<Integer> {

    private static final DateTimeFormatter CLOCK = DateTimeFormatter.ofPattern("HH:mm:ss", Locale.ROOT);
    private static final long ONCE_GAP_MILLIS = 500;

    @Option(names = "--once", description = "print one table and exit (for scripts)")
    boolean once;

    @Option(names = "--interval", defaultValue = "1", paramLabel = "S",
            description = "seconds between refreshes (default ${DEFAULT-VALUE})")
    double interval;

    @Option(names = "--no-registry", description = "do not open the job registry: list the flight recorder files only")
    boolean noRegistry;

    private final Map<String, String> env;
    private final PrintStream out;
    private final PrintStream err;

    /** On the process's environment and standard streams. */
    public CommTop() {
        this(System.getenv(), System.out, System.err);
    }

    /** On the given environment ({@code JCOMM_REGISTRY}, {@code JCOMM_RECORDER_DIR}) and streams (tests). */
    public CommTop(Map<String, String> env, PrintStream out, PrintStream err) {
        this.env = Map.copyOf(env);
        this.out = out;
        this.err = err;
    }

    /** The command line of {@code top}. */
    public static CommandLine commandLine(CommTop top) {
        return new CommandLine(top);
    }

    /** Entry point of {@code bin/commtop}. */
    public static void main(String[] args) {
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        System.exit(commandLine(new CommTop()).execute(args));
    }

    /** One process as listed: from the registry (job, rank) or from its recorder file alone. */
    record Proc(String job, int rank, int worldSize, long pid, boolean registered, Snapshot snapshot) {
    }

    /** One read of everything. */
    record Sample(long nanos, List<Proc> procs, List<JobRegistry.Entry> dead) {
    }

    @Override
    public Integer call() throws InterruptedException {
        if (!(interval > 0)) {
            err.println("commtop: --interval must be positive");
            return 2;
        }
        JobRegistry registry = noRegistry ? null : openRegistry();
        try {
            if (once) {
                Sample a = sample(registry);
                Thread.sleep(ONCE_GAP_MILLIS);
                Sample b = sample(registry);
                List<JobRegistry.Entry> dead = new ArrayList<>(a.dead());
                dead.addAll(b.dead());
                out.print(render(a, new Sample(b.nanos(), b.procs(), dead), registry));
                out.flush();
                return 0;
            }
            Sample prev = null;
            while (!Thread.currentThread().isInterrupted()) {
                if (registry == null && !noRegistry && JobRegistry.configuredDirectory(env).map(Files::exists).orElse(false)) {
                    registry = openRegistry(); // a job registered since the start
                }
                Sample now = sample(registry);
                out.print("\033[H\033[2J");
                out.print(render(prev, now, registry));
                out.flush();
                prev = now;
                Thread.sleep(Math.max(50, (long) (interval * 1000)));
            }
            return 0;
        } finally {
            if (registry != null) {
                registry.close();
            }
        }
    }

    private JobRegistry openRegistry() {
        Optional<Path> dir = JobRegistry.configuredDirectory(env);
        if (dir.isEmpty()) {
            return null;
        }
        try {
            Optional<JobRegistry> r = JobRegistry.openIfExists(dir.get());
            if (r.isEmpty()) {
                err.println("commtop: no job registry at " + dir.get() + " (no job registered yet): listing flight recorders");
            }
            return r.orElse(null);
        } catch (RuntimeException e) {
            err.println("commtop: cannot open the job registry " + dir.get() + " (" + e + "): listing flight recorders");
            return null;
        }
    }

    private Path recorderDir() {
        return FlightRecorder.directory(env);
    }

    Sample sample(JobRegistry registry) {
        List<Proc> procs = new ArrayList<>();
        List<JobRegistry.Entry> dead = List.of();
        Set<Path> seen = new HashSet<>();
        if (registry != null) {
            try {
                JobRegistry.Scan scan = registry.scan();
                dead = scan.dead();
                for (JobRegistry.Entry e : scan.live()) {
                    Snapshot s = e.recorder().flatMap(RecorderReader::read).orElse(null);
                    e.recorder().ifPresent(p -> seen.add(p.toAbsolutePath()));
                    procs.add(new Proc(e.job(), e.rank(), e.worldSize(), e.pid(), true, s));
                }
            } catch (RuntimeException e) {
                err.println("commtop: reading the job registry failed: " + e);
            }
        }
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(recorderDir(), FlightRecorder.PREFIX + "*")) {
            for (Path f : ds) {
                if (seen.contains(f.toAbsolutePath())) {
                    continue;
                }
                Optional<Snapshot> s = RecorderReader.read(f);
                if (s.isEmpty() || !ProcessIdentity.of(s.get().pid()).alive()) {
                    continue;
                }
                Optional<GroupState> world = s.get().group("world");
                procs.add(new Proc(tagOf(f, s.get().pid()), world.map(GroupState::rank).orElse(-1),
                        world.map(GroupState::size).orElse(-1), s.get().pid(), false, s.get()));
            }
        } catch (IOException e) {
            // no recorder directory
        }
        procs.sort(Comparator.comparing(Proc::job).thenComparingInt(Proc::rank).thenComparingLong(Proc::pid));
        return new Sample(System.nanoTime(), procs, dead);
    }

    /** The job tag of a recorder file {@code jcomm-rec-<tag>-<pid>-<hex>} ({@code JCOMM_RUN_ID}, else "job"). */
    static String tagOf(Path file, long pid) {
        String n = file.getFileName().toString().substring(FlightRecorder.PREFIX.length());
        int at = n.lastIndexOf("-" + pid + "-");
        return (at > 0 ? n.substring(0, at) : "?") + " (unregistered)";
    }

    /** The table: header, one line per rank and group, then the dead entries cleaned. */
    String render(Sample prev, Sample now, JobRegistry registry) {
        Map<String, GroupState> before = new HashMap<>();
        if (prev != null) {
            for (Proc p : prev.procs()) {
                if (p.snapshot() != null) {
                    List<GroupState> gs = p.snapshot().groups();
                    for (int i = 0; i < gs.size(); i++) {
                        before.put(rateKey(p, i, gs.get(i)), gs.get(i));
                    }
                }
            }
        }
        double dt = prev == null ? 0 : (now.nanos() - prev.nanos()) / 1e9;
        Set<String> jobs = new HashSet<>();
        List<String[]> rows = new ArrayList<>();
        rows.add(new String[] {"JOB", "RANK", "PID", "GROUP", "OPERATION", "STATE", "STUCK FOR", "OPS/S", "BYTES/S"});
        for (Proc p : now.procs()) {
            jobs.add(p.job());
            String rank = (p.rank() < 0 ? "?" : Integer.toString(p.rank())) + "/"
                    + (p.worldSize() < 0 ? "?" : Integer.toString(p.worldSize()));
            if (p.snapshot() == null || p.snapshot().groups().isEmpty()) {
                rows.add(new String[] {p.job(), rank, Long.toString(p.pid()), "-",
                        p.snapshot() == null ? "(no flight recorder)" : "(no group yet)", "-", "-", "-", "-"});
                continue;
            }
            List<GroupState> gs = p.snapshot().groups();
            for (int i = 0; i < gs.size(); i++) {
                GroupState g = gs.get(i);
                GroupState was = before.get(rateKey(p, i, g));
                boolean rated = was != null && dt > 0 && g.finished() >= was.finished() && g.bytes() >= was.bytes();
                String rate = rated ? String.format(Locale.ROOT, "%.1f", (g.finished() - was.finished()) / dt) : "-";
                String byteRate = rated ? bytes((g.bytes() - was.bytes()) / dt) : "-";
                rows.add(new String[] {p.job(), rank, Long.toString(p.pid()), g.group(),
                        g.seq() == 0 ? "-" : g.op() + " #" + g.seq() + (g.async() ? " (async)" : ""), state(g),
                        g.running() ? seconds(now.nanos() - g.startNanos()) : "-", rate, byteRate});
            }
        }
        StringBuilder sb = new StringBuilder("commtop ").append(LocalTime.now().format(CLOCK)).append(" - ")
                .append(jobs.size()).append(jobs.size() == 1 ? " job, " : " jobs, ").append(now.procs().size())
                .append(now.procs().size() == 1 ? " rank" : " ranks").append(" on this host (")
                .append(registry != null ? "registry " + registry.directory() : "no registry: flight recorders of " + recorderDir())
                .append(")\n");
        int[] width = new int[rows.get(0).length];
        for (String[] r : rows) {
            for (int i = 0; i < r.length; i++) {
                width[i] = Math.max(width[i], r[i].length());
            }
        }
        for (String[] r : rows) {
            StringBuilder line = new StringBuilder();
            for (int i = 0; i < r.length; i++) {
                line.append(r[i]);
                if (i < r.length - 1) {
                    line.append(" ".repeat(width[i] - r[i].length() + 2));
                }
            }
            sb.append(line.toString().stripTrailing()).append('\n');
        }
        for (JobRegistry.Entry d : now.dead()) {
            sb.append("dead: rank ").append(d.rank()).append(" of ").append(d.job()).append(" (pid ").append(d.pid())
                    .append(") is gone; its registry entry was deleted\n");
        }
        return sb.toString();
    }

    /** A group slot of a process (slots are never reused; one process may hold several groups of one name). */
    private static String rateKey(Proc p, int slot, GroupState g) {
        return p.pid() + "/" + p.rank() + "/" + slot + "/" + g.group();
    }

    private static String state(GroupState g) {
        if (g.seq() == 0) {
            return "idle";
        }
        return switch (g.state()) {
            case FlightRecorder.RUNNING -> "running";
            case FlightRecorder.FAILED -> "failed";
            default -> "idle";
        };
    }

    /** A byte rate as {@code 0}, {@code 950}, {@code 12.3k}, {@code 4.5M}, {@code 1.2G} (powers of 1000). */
    static String bytes(double perSecond) {
        if (perSecond < 1000) {
            return Long.toString(Math.round(perSecond));
        }
        String[] units = {"k", "M", "G", "T"};
        double v = perSecond / 1000;
        int u = 0;
        while (v >= 1000 && u < units.length - 1) {
            v /= 1000;
            u++;
        }
        return String.format(Locale.ROOT, "%.1f%s", v, units[u]);
    }

    private static String seconds(long nanos) {
        return String.format(Locale.ROOT, "%.1f s", Math.max(0, nanos) / 1e9);
    }
}
