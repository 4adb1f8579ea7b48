package io.jcomm.tools.run;

import io.jcomm.runtime.shm.ProcessIdentity;
import io.jcomm.runtime.shm.ShmFiles;
import io.jcomm.runtime.registry.JobRegistry;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Consumer;
import java.util.stream.Stream;

/**
 * Knows which processes and which shared-memory files belong to one {@code commrun} job on this node,
 * so that after the job nothing of it is left behind, and nothing of anyone else's is touched.
 *
 * <p>While the job runs, {@link #sample} (called periodically) records every descendant process of
 * the workers and every entry of the shared-memory directory ({@code /dev/shm}) that a job process
 * has mapped or open (read from {@code /proc/<pid>/maps} and {@code /proc/<pid>/fd}). After the job:
 * {@link #leftoverProcesses()} are the recorded processes still alive; {@link #leftoverShm()} are the
 * recorded entries still there, plus entries whose name carries a job pid as a {@code -}-separated
 * token (this SDK names its files {@code jcomm-...-<pid>-...}); a recorded directory whose owner
 * marker names a live process outside the job is another job's and never a leftover (a peer job's
 * kv-transfer region that a worker mapped to write into). Only entries whose name starts with
 * {@value #OWN_PREFIX} are ever deleted; others (e.g. a user library's) are reported. The host's job
 * registry ({@link JobRegistry}) is shared by every job and is never a leftover: its entries of dead
 * processes are removed through the registry ({@link #cleanRegistry}).
 */
final class JobJanitor {

    /** Name prefix of every shared-memory entry this SDK creates. */
    static final String OWN_PREFIX = "jcomm";

    private final Path shmDir;
    /** The job registry's directory, or null when it is off. */
    private final Path registry;
    /** Its name when it lies in {@link #shmDir}, which is never recorded as the job's; else null. */
    private final String registryName;
    private final Map<Long, ProcessHandle> processes = new ConcurrentHashMap<>();
    private final Set<String> shmEntries = ConcurrentHashMap.newKeySet();
    /** {@link #sample}'s buffer for a process's memory map (one sampling thread). */
    private final byte[] mapsBuffer = new byte[256 * 1024];

    JobJanitor(Path shmDir) {
        this(shmDir, null);
    }

    /** @param registry the host's job registry directory ({@link JobRegistry#configuredDirectory}), or null */
    JobJanitor(Path shmDir, Path registry) {
        this.shmDir = shmDir;
        this.registry = registry;
        Path abs = registry == null ? null : registry.toAbsolutePath().normalize();
        this.registryName = abs != null && abs.getParent() != null && abs.getFileName() != null
                && abs.getParent().equals(shmDir.toAbsolutePath().normalize()) ? abs.getFileName().toString() : null;
    }

    /** Starts tracking a worker. */
    void add(ProcessHandle worker) {
        processes.put(worker.pid(), worker);
    }

    /**
     * Records the live job processes' descendants and, with {@code scanShm}, their shared-memory
     * entries. Called from one thread at a time.
     *
     * <p>Each {@link ProcessHandle#descendants()} reads the whole process table ({@code /proc/<every
     * pid>/stat}); once per worker per sample, that cost the launcher ~10 ms of CPU every 150 ms on
     * an idle 2-core host (more on a busy node), while the workers started. The workers are this
     * JVM's children, so one walk of this JVM's descendants finds theirs; a tracked process outside
     * that tree (not started here) still gets a walk of its own.
     *
     * <p>The shared-memory scan reads every job process's memory map and open files (~10 ms of CPU for
     * four JVMs), which the launcher skips while the workers start, when they need the CPUs most;
     * entries made then that carry a worker's pid in their name, as the SDK's all do, are found
     * without it.
     */
    void sample(boolean scanShm) {
        Set<Long> ours = new HashSet<>();
        try (Stream<ProcessHandle> d = ProcessHandle.current().descendants()) {
            // parents come before their children in this stream
            d.forEach(h -> {
                ours.add(h.pid());
                if (!processes.containsKey(h.pid())
                        && h.parent().map(p -> processes.containsKey(p.pid())).orElse(false)) {
                    processes.putIfAbsent(h.pid(), h);
                }
            });
        }
        for (ProcessHandle p : List.copyOf(processes.values())) {
            if (!ours.contains(p.pid()) && p.isAlive()) {
                try (Stream<ProcessHandle> d = p.descendants()) {
                    d.forEach(c -> processes.putIfAbsent(c.pid(), c));
                }
            }
        }
        if (!scanShm) {
            return;
        }
        for (ProcessHandle p : List.copyOf(processes.values())) {
            if (p.isAlive()) {
                recordShm(p.pid());
            }
        }
    }

    private void recordShm(long pid) {
        String prefix = shmDir.toString() + "/";
        Path proc = Path.of("/proc", Long.toString(pid));
        try (InputStream in = Files.newInputStream(proc.resolve("maps"))) {
            scanMaps(in, mapsBuffer, prefix, this::addEntry);
        } catch (IOException | RuntimeException ignored) {
            // the process exited meanwhile, or /proc is not readable: nothing to record
        }
        try (DirectoryStream<Path> fds = Files.newDirectoryStream(proc.resolve("fd"))) {
            for (Path fd : fds) {
                try {
                    String target = Files.readSymbolicLink(fd).toString();
                    if (target.startsWith(prefix) && !target.endsWith("(deleted)")) {
                        addEntry(target.substring(prefix.length()));
                    }
                } catch (IOException | RuntimeException ignored) {
                    // closed meanwhile
                }
            }
        } catch (IOException | RuntimeException ignored) {
            // exited
        }
    }

    /**
     * Calls {@code found} with the part after {@code prefix} of every line of a memory map ({@code
     * /proc/<pid>/maps}) that maps a file under {@code prefix} and not a deleted one. The map (~100 KB
     * for a JVM, read every 150 ms) is scanned as bytes in {@code buffer}, reused: only the matching
     * lines become strings. procfs gives no size, so a larger map is read in pieces; a line cut at a
     * piece's end is moved to the front and read whole with the next piece; a line longer than the
     * buffer is skipped (it is no path of ours).
     */
    static void scanMaps(InputStream in, byte[] buffer, String prefix, Consumer<String> found) throws IOException {
        byte[] pre = prefix.getBytes(StandardCharsets.ISO_8859_1);
        int kept = 0;
        boolean skipping = false;
        while (true) {
            int end = kept + in.readNBytes(buffer, kept, buffer.length - kept);
            boolean last = end < buffer.length;
            int lineStart = 0;
            for (int i = 0; i < end; i++) {
                if (buffer[i] == '\n') {
                    if (!skipping) {
                        matchLine(buffer, lineStart, i, pre, found);
                    }
                    skipping = false;
                    lineStart = i + 1;
                }
            }
            if (last) {
                if (!skipping) {
                    matchLine(buffer, lineStart, end, pre, found);
                }
                return;
            }
            kept = end - lineStart;
            if (kept == buffer.length) {
                kept = 0; // a line longer than the buffer: skip it up to its end
                skipping = true;
            } else {
                System.arraycopy(buffer, lineStart, buffer, 0, kept);
            }
        }
    }

    private static void matchLine(byte[] b, int from, int to, byte[] pre, Consumer<String> found) {
        outer:
        for (int i = from; i <= to - pre.length; i++) {
            for (int j = 0; j < pre.length; j++) {
                if (b[i + j] != pre[j]) {
                    continue outer;
                }
            }
            String rest = new String(b, i + pre.length, to - i - pre.length, StandardCharsets.ISO_8859_1);
            if (!rest.endsWith("(deleted)")) {
                found.accept(rest);
            }
            return;
        }
    }

    private void addEntry(String relative) {
        int slash = relative.indexOf('/');
        String top = slash < 0 ? relative : relative.substring(0, slash);
        if (!top.isEmpty() && !top.equals(registryName)) {
            shmEntries.add(top);
        }
    }

    /** Pids of every process recorded so far (the workers and their descendants). */
    Set<Long> pids() {
        return Set.copyOf(processes.keySet());
    }

    /** Recorded job processes that are still alive. */
    List<ProcessHandle> leftoverProcesses() {
        List<ProcessHandle> out = new ArrayList<>();
        for (ProcessHandle p : processes.values()) {
            if (p.isAlive()) {
                out.add(p);
            }
        }
        return out;
    }

    /** Kills the leftover processes (SIGKILL) and waits for them, bounded. */
    List<ProcessHandle> killLeftovers(Duration wait) {
        List<ProcessHandle> left = leftoverProcesses();
        left.forEach(ProcessHandle::destroyForcibly);
        long end = System.nanoTime() + wait.toNanos();
        for (ProcessHandle p : left) {
            while (p.isAlive() && System.nanoTime() < end) {
                try {
                    Thread.sleep(5);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return left;
                }
            }
        }
        return left;
    }

    /** Entries of the shared-memory directory that belong to this job and still exist. */
    Set<String> leftoverShm() {
        Set<String> out = new TreeSet<>();
        for (String e : shmEntries) {
            Path p = shmDir.resolve(e);
            if (Files.exists(p) && !ownedByAnotherLiveProcess(p)) {
                out.add(e);
            }
        }
        Set<String> pidTokens = new TreeSet<>();
        for (Long pid : processes.keySet()) {
            pidTokens.add(Long.toString(pid));
        }
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(shmDir, OWN_PREFIX + "*")) {
            for (Path p : ds) {
                String name = p.getFileName().toString();
                if (namesPid(name, pidTokens) && !name.equals(registryName)) {
                    out.add(name);
                }
            }
        } catch (IOException ignored) {
            // no shared-memory directory: nothing can be left there
        }
        return out;
    }

    /**
     * Removes the registry entries of processes that are gone (a worker killed before it could remove
     * its own), through the registry's own scan; whatever fails is left to the next scan. The number
     * removed.
     */
    int cleanRegistry() {
        if (registry == null) {
            return 0;
        }
        try {
            Optional<JobRegistry> opened = JobRegistry.openIfExists(registry);
            if (opened.isEmpty()) {
                return 0;
            }
            try (JobRegistry r = opened.get()) {
                return r.scan().dead().size();
            }
        } catch (RuntimeException e) {
            return 0;
        }
    }

    /**
     * Whether {@code entry} is a directory whose owner marker ({@link ShmFiles#readOwner}) names a live
     * process that is not one of the job's: another job's, such as the shared-memory region of a peer
     * job that a worker wrote into with kv-transfer (the writer maps the peer's file). A job process
     * mapped it, but it is not this job's to delete while its owner lives.
     */
    private boolean ownedByAnotherLiveProcess(Path entry) {
        Optional<ProcessIdentity> owner = Files.isDirectory(entry, LinkOption.NOFOLLOW_LINKS) ? ShmFiles.readOwner(entry)
                : Optional.empty();
        return owner.isPresent() && !processes.containsKey(owner.get().pid()) && owner.get().alive();
    }

    static boolean namesPid(String name, Collection<String> pids) {
        for (String token : name.split("-")) {
            if (pids.contains(token)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Deletes the leftover entries named with {@value #OWN_PREFIX} (recursively) once no job process is
     * alive, and returns what was left: {deleted, kept (not ours to delete)}.
     */
    List<Set<String>> cleanShm() {
        Set<String> deleted = new TreeSet<>();
        Set<String> kept = new TreeSet<>();
        if (!leftoverProcesses().isEmpty()) {
            kept.addAll(leftoverShm()); // never pull files from under a live process
            return List.of(deleted, kept);
        }
        for (String e : leftoverShm()) {
            if (e.startsWith(OWN_PREFIX) && !e.contains("/") && !e.equals("..")) {
                ShmFiles.deleteRecursively(shmDir.resolve(e));
                deleted.add(e);
            } else {
                kept.add(e);
            }
        }
        return List.of(deleted, kept);
    }
}
