package io.jcomm.runtime.registry;

import io.jcomm.api.config.Setting;
import io.jcomm.api.config.Settings;
import io.jcomm.api.OpContext;
import io.jcomm.api.StoreException;
import io.jcomm.runtime.shm.ProcessIdentity;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.SeekableByteChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryNotEmptyException;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.OpenOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * The host-wide registry of jcomm processes: a directory shared by every process of the host (default
 * {@value #DEFAULT_DIRECTORY}, {@code JCOMM_REGISTRY} overrides it, {@code off} disables it) with one small
 * text file per registered parallel state. Each process registers one {@link Entry} per parallel state
 * (job, rank, pid, groups, flight recorder file) and removes it when it closes; {@code bin/commtop}
 * lists them. Entries of processes that are gone (their {@link ProcessIdentity} is not alive: exited,
 * killed, pid reused) are reported as dead by {@link #scan()} and deleted there.
 *
 * <p>Writes are atomic: an entry is written to a temporary file in the directory and renamed over its
 * name, so a reader sees the old or the new entry, never a torn one, and a process killed at any point
 * leaves no lock behind (a stopped or killed writer cannot block the others). The directory is made
 * {@code 0700} and its files {@code 0600}; a symbolic link in its place, or a directory of another user,
 * is refused. Readers trust
 * nothing in it: files other than regular ones, larger than {@value #MAX_ENTRY_BYTES} bytes, of another
 * format or whose content does not match their name are skipped, and a scan looks at no more than
 * {@value #MAX_FILES} files. The directory is removed when its last entry is, and made again by the
 * next registration.
 *
 * <p>Opening costs nothing measurable (a directory check). Thread safe.
 */
public final class JobRegistry implements AutoCloseable {

    /** The default registry directory. */
    public static final String DEFAULT_DIRECTORY = "/dev/shm/jcomm-registry";
    /** The largest entry file a reader accepts. */
    public static final int MAX_ENTRY_BYTES = 16 * 1024;
    /** The most files one scan looks at. */
    public static final int MAX_FILES = 4096;

    /** Tries of one write against the directory's removal by the last process to leave. */
    static final int MAX_WRITE_ATTEMPTS = 16;

    static final String KEY_PREFIX = "proc-";
    static final String TEMP_PREFIX = ".tmp-";
    private static final String FORMAT = "jcomm-registry-v1";
    private static final java.util.regex.Pattern KEY = java.util.regex.Pattern.compile(
            java.util.regex.Pattern.quote(KEY_PREFIX) + "(\\d{1,19})-(-?\\d{1,19})-(-?\\d{1,10})");

    private final Path directory;
    private volatile boolean closed;

    private JobRegistry(Path directory) {
        this.directory = directory;
    }

    /**
     * The registry directory configured by {@code env} ({@code JCOMM_REGISTRY}: a path, or {@code off}/{@code 0}/
     * {@code false} to disable); {@value #DEFAULT_DIRECTORY} when unset; empty when disabled.
     */
    public static Optional<Path> configuredDirectory(Map<String, String> env) {
        Optional<String> v = Settings.REGISTRY.value(env);
        if (v.isEmpty()) {
            return Optional.of(Path.of(DEFAULT_DIRECTORY));
        }
        return Setting.isOff(v.get()) ? Optional.empty() : Optional.of(Path.of(v.get()));
    }

    /**
     * Opens the registry in {@code directory}, making it ({@code 0700}) if it does not exist; its parent
     * must exist.
     *
     * @throws StoreException if the directory cannot be made, or its path is a symbolic link or a file
     */
    public static JobRegistry open(Path directory) {
        Objects.requireNonNull(directory, "directory");
        checkDirectory(directory, OpContext.of("registry", -1, "open"), true);
        return new JobRegistry(directory);
    }

    /**
     * {@link #open} for readers ({@code commtop}, the launcher's clean-up): the same checks, but a
     * directory that does not exist is not made (no registered process; a reader that made it would
     * leave an empty one behind). Empty then.
     *
     * @throws StoreException if its path is a symbolic link, a file or another user's directory
     */
    public static Optional<JobRegistry> openIfExists(Path directory) {
        Objects.requireNonNull(directory, "directory");
        return checkDirectory(directory, OpContext.of("registry", -1, "open"), false)
                ? Optional.of(new JobRegistry(directory)) : Optional.empty();
    }

    /** The registry directory. */
    public Path directory() {
        return directory;
    }

    /**
     * Adds or replaces {@code entry} (atomically: readers see the previous entry or this one).
     *
     * @throws StoreException if it cannot be written, or its text is longer than {@value #MAX_ENTRY_BYTES} bytes
     */
    public void register(Entry entry) {
        Objects.requireNonNull(entry, "entry");
        checkOpen();
        OpContext ctx = OpContext.of("registry", entry.rank(), "register");
        byte[] bytes = entry.encode();
        if (bytes.length > MAX_ENTRY_BYTES) {
            throw new StoreException(ctx, "entry of " + bytes.length + " bytes is larger than " + MAX_ENTRY_BYTES);
        }
        for (int attempt = 0; ; attempt++) {
            Path tmp = directory.resolve(TEMP_PREFIX + entry.key());
            try {
                try (SeekableByteChannel ch = Files.newByteChannel(tmp, Set.<OpenOption>of(StandardOpenOption.CREATE,
                        StandardOpenOption.TRUNCATE_EXISTING, StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS),
                        PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")))) {
                    ByteBuffer b = ByteBuffer.wrap(bytes);
                    while (b.hasRemaining()) {
                        ch.write(b);
                    }
                }
                Files.move(tmp, directory.resolve(entry.key()), StandardCopyOption.ATOMIC_MOVE,
                        StandardCopyOption.REPLACE_EXISTING);
                return;
            } catch (NoSuchFileException e) {
                // the last process to leave removed the directory meanwhile: make it again (bounded: each
                // try loses only to a removal that came between the making and the write)
                if (attempt >= MAX_WRITE_ATTEMPTS - 1) {
                    throw new StoreException(ctx, "cannot write " + tmp + ": " + e, e);
                }
                checkDirectory(directory, ctx, true);
            } catch (IOException e) {
                deleteQuietly(tmp);
                throw new StoreException(ctx, "cannot write " + tmp + ": " + e, e);
            }
        }
    }

    /** Removes {@code entry}; whether it was there. Removes the directory when it is left empty. */
    public boolean remove(Entry entry) {
        Objects.requireNonNull(entry, "entry");
        checkOpen();
        boolean was;
        try {
            was = Files.deleteIfExists(directory.resolve(entry.key()));
        } catch (IOException e) {
            throw new StoreException(OpContext.of("registry", entry.rank(), "remove"), "cannot remove "
                    + directory.resolve(entry.key()) + ": " + e, e);
        }
        deleteQuietly(directory.resolve(TEMP_PREFIX + entry.key()));
        removeDirectoryIfEmpty();
        return was;
    }

    /**
     * Every entry, split into those of live processes and those of dead ones; the dead ones are deleted
     * from the registry, with the temporary files their writers left. Files that are not entries of this
     * format are left alone and skipped. A directory that does not exist (yet) holds no entries.
     */
    public Scan scan() {
        checkOpen();
        List<Entry> live = new ArrayList<>();
        List<Entry> dead = new ArrayList<>();
        int seen = 0;
        boolean deleted = false;
        try (DirectoryStream<Path> files = Files.newDirectoryStream(directory)) {
            for (Path p : files) {
                if (++seen > MAX_FILES) {
                    break;
                }
                String name = p.getFileName().toString();
                if (name.startsWith(TEMP_PREFIX)) {
                    ProcessIdentity writer = writerOf(name.substring(TEMP_PREFIX.length()));
                    if (writer != null && !writer.alive()) {
                        deleted |= deleteQuietly(p);
                    }
                    continue;
                }
                if (!name.startsWith(KEY_PREFIX)) {
                    continue;
                }
                Entry entry = read(p);
                if (entry == null || !entry.key().equals(name)) {
                    continue;
                }
                if (entry.identity().alive()) {
                    live.add(entry);
                } else {
                    dead.add(entry);
                    deleted |= deleteQuietly(p);
                }
            }
        } catch (NoSuchFileException e) {
            // no process has registered since the last one left
        } catch (IOException | java.nio.file.DirectoryIteratorException e) {
            throw new StoreException(OpContext.of("registry", -1, "scan"), "cannot list " + directory + ": " + e, e);
        }
        if (deleted) {
            removeDirectoryIfEmpty();
        }
        Comparator<Entry> order = Comparator.comparing(Entry::job).thenComparingInt(Entry::rank).thenComparingLong(Entry::pid)
                .thenComparingInt(Entry::serial);
        live.sort(order);
        dead.sort(order);
        return new Scan(List.copyOf(live), List.copyOf(dead));
    }

    /** Marks the registry closed (the directory stays: it is shared by the host). Idempotent. */
    @Override
    public void close() {
        closed = true;
    }

    @Override
    public String toString() {
        return "JobRegistry{" + directory + "}";
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("job registry " + directory + " is closed");
        }
    }

    /**
     * Checks the registry directory, making it first when {@code create}; whether it exists (always
     * true when {@code create}).
     */
    private static boolean checkDirectory(Path directory, OpContext ctx, boolean create) {
        if (create) {
            Path parent = directory.toAbsolutePath().getParent();
            if (parent == null || !Files.isDirectory(parent)) {
                throw new StoreException(ctx, "directory of " + directory + " does not exist");
            }
            try {
                Files.createDirectory(directory, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            } catch (FileAlreadyExistsException e) {
                // a directory, a link or a file: checked below
            } catch (IOException e) {
                throw new StoreException(ctx, "cannot make " + directory + ": " + e, e);
            }
        }
        // one look at what is there now (the last process to leave may remove it at any moment)
        BasicFileAttributes there;
        try {
            there = Files.readAttributes(directory, BasicFileAttributes.class, LinkOption.NOFOLLOW_LINKS);
        } catch (NoSuchFileException e) {
            return create; // absent for a reader; gone again for a writer, whose write makes it again
        } catch (IOException e) {
            throw new StoreException(ctx, "cannot look at " + directory + ": " + e, e);
        }
        if (there.isSymbolicLink()) {
            throw new StoreException(ctx, directory + " is a symbolic link; refusing to use it as the job registry");
        }
        if (!there.isDirectory()) {
            throw new StoreException(ctx, directory + " exists and is not a directory");
        }
        // another user's directory (made first, perhaps to read or plant entries) is not this user's registry
        try {
            Object owner = Files.getAttribute(directory, "unix:uid", LinkOption.NOFOLLOW_LINKS);
            Object self = Files.getAttribute(Path.of("/proc/self"), "unix:uid");
            if (!owner.equals(self)) {
                throw new StoreException(ctx, directory + " belongs to uid " + owner + ", not to this process's uid " + self);
            }
        } catch (IOException | UnsupportedOperationException | IllegalArgumentException e) {
            // no unix attributes or no /proc: the permissions checks of the file system remain
        }
        return true;
    }

    /** The entry in {@code file}, or null when it is not a regular file of at most the limit holding an entry. */
    private static Entry read(Path file) {
        if (!Files.isRegularFile(file, LinkOption.NOFOLLOW_LINKS)) {
            return null;
        }
        try (InputStream in = Files.newInputStream(file, LinkOption.NOFOLLOW_LINKS)) {
            byte[] bytes = in.readNBytes(MAX_ENTRY_BYTES + 1);
            return bytes.length > MAX_ENTRY_BYTES ? null : Entry.decode(bytes);
        } catch (IOException e) {
            return null; // removed meanwhile, or unreadable
        }
    }

    /** The process of a key ({@code proc-<pid>-<start ticks>-<serial>}), or null when it is not one. */
    static ProcessIdentity writerOf(String key) {
        java.util.regex.Matcher m = KEY.matcher(key);
        if (!m.matches()) {
            return null;
        }
        try {
            long pid = Long.parseLong(m.group(1));
            return pid > 0 ? new ProcessIdentity(pid, Long.parseLong(m.group(2))) : null;
        } catch (NumberFormatException e) {
            return null; // out of range
        }
    }

    private void removeDirectoryIfEmpty() {
        try {
            Files.deleteIfExists(directory);
        } catch (DirectoryNotEmptyException e) {
            // other processes are registered
        } catch (IOException e) {
            // not ours to remove, or busy: it stays
        }
    }

    /** Deletes {@code p}; whether it was there. */
    private static boolean deleteQuietly(Path p) {
        try {
            return Files.deleteIfExists(p);
        } catch (IOException e) {
            return false; // a reader or the next scan retries
        }
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
