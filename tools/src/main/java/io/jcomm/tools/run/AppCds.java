package io.jcomm.tools.run;

import io.jcomm.api.config.Settings;
import io.jcomm.runtime.Fnv1a;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.regex.Pattern;

/**
 * Application class-data sharing (AppCDS) for the JVMs a launcher starts: the classes one run of a
 * program loaded, archived by the JVM at that run's exit ({@code -XX:ArchiveClassesAtExit}, JDK 17's
 * dynamic archive) and mapped by the following runs ({@code -XX:SharedArchiveFile}), which then load
 * them already parsed and verified.
 *
 * <p>An archive is keyed by everything that decides whether it still fits: the {@code java} (its
 * real path and the sizes and times of its module image and {@code libjvm.so}), the JVM arguments
 * ({@code -Xlog} ones aside), the main class and every class-path jar's path, size and modification
 * time. The key's hash is in the file name ({@code <program>-<hash>.jsa} in
 * {@link Options#directory()}), so a changed jar or JDK simply means another file; the archive of
 * the same program with another key is removed when the new one is written, and archives older
 * than {@link #MAX_AGE} are removed then too.
 *
 * <p>The archive is never required. Without one, the first launch that takes the lock file
 * ({@code <program>-<hash>.lock}, created atomically) has one JVM dump it to a temporary name, and
 * renames it into place only when that JVM exited 0 and the file has the archive's magic number (the
 * JVM writes the header last); concurrent launches find the lock and run without an archive. A JVM
 * given an archive that does not fit (another class path, another base archive) runs without it
 * ({@code -Xshare:auto}); the JVM's CDS messages are off ({@code -Xlog:cds*=off}; a later
 * {@code -Xlog:cds} on the command line turns them back on). Nothing is archived when the class
 * path holds a directory or a wildcard (JDK 17 archives classes from jars only), when the JVM
 * arguments already choose a sharing mode, when {@code JCOMM_CDS}{@code =off}, or when the cache
 * directory cannot be written (an existing archive there is still used).
 *
 * <p>{@code bin/_launch} does the same for the launchers' own JVMs, in shell.
 */
final class AppCds {

    /** Magic number at the start of a complete JDK 17 dynamic archive (little-endian u4). */
    static final int DYNAMIC_ARCHIVE_MAGIC = 0xf00baba8;
    /** A lock whose owner is gone and which is this old is taken over. */
    static final Duration STALE_LOCK_AGE = Duration.ofSeconds(60);
    /** Archives not rewritten for this long are removed when another archive is written. */
    static final Duration MAX_AGE = Duration.ofDays(30);
    private static final String SUFFIX = ".jsa";
    private static final String LOCK_SUFFIX = ".lock";
    private static final String TEMP_SUFFIX = ".tmp";
    /** JVM arguments that keep the JVM's own CDS messages off the program's output. */
    private static final String QUIET = "-Xlog:cds*=off";

    private AppCds() {
    }

    /** Whether archives are on, and where they live. */
    record Options(boolean enabled, Path directory) {

        Options {
            Objects.requireNonNull(directory, "directory");
        }

        /**
         * From an environment: {@code JCOMM_CDS}, and the directory
         * {@code ${JCOMM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/jcomm}/cds}.
         */
        static Options fromEnvironment(Map<String, String> env) {
            boolean enabled = !"off".equalsIgnoreCase(Settings.CDS.valueOr(env, ""));
            return new Options(enabled, cacheRoot(env).resolve("cds"));
        }

        /**
         * jcomm's cache directory in an environment:
         * {@code ${JCOMM_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/jcomm}}.
         */
        static Path cacheRoot(Map<String, String> env) {
            String base = Settings.CACHE_DIR.value(env).orElse(null);
            if (base != null) {
                return Path.of(base);
            }
            String xdg = nonBlank(env.get("XDG_CACHE_HOME"));
            String home = nonBlank(env.get("HOME"));
            Path cache = xdg != null ? Path.of(xdg)
                    : Path.of(home != null ? home : System.getProperty("user.home"), ".cache");
            return cache.resolve("jcomm");
        }

        private static String nonBlank(String s) {
            return s == null || s.isBlank() ? null : s.trim();
        }
    }

    /** What a launch does with its program's archive. */
    enum Mode {
        /** No archive: off, not archivable, or another launch is writing it. */
        NONE,
        /** Every JVM maps the archive. */
        USE,
        /** One JVM writes the archive at its exit; the others run without. */
        DUMP
    }

    /**
     * One launch's use of an archive: the JVM arguments per JVM, and {@link #finish} once the JVMs
     * have exited (which, when this launch writes the archive, puts it in place and releases the
     * lock). Not thread safe; one launch, one {@code finish}.
     */
    static final class Launch {
        private final Mode mode;
        private final String reason;
        private final Path archive;
        private final Path temp;
        private final Path lock;
        private boolean finished;

        private Launch(Mode mode, String reason, Path archive, Path temp, Path lock) {
            this.mode = mode;
            this.reason = reason;
            this.archive = archive;
            this.temp = temp;
            this.lock = lock;
        }

        static Launch none(String reason) {
            return new Launch(Mode.NONE, reason, null, null, null);
        }

        Mode mode() {
            return mode;
        }

        /** Why there is no archive ({@link Mode#NONE}), or what is used or written. */
        String reason() {
            return reason;
        }

        /** The archive's final path ({@code null} with {@link Mode#NONE}). */
        Path archive() {
            return archive;
        }

        /**
         * The JVM arguments of one JVM, to go after the required flags and before the user's own:
         * {@code dumper} is the JVM that writes the archive when this launch writes one (one per
         * launch).
         */
        List<String> jvmArgs(boolean dumper) {
            switch (mode) {
                case USE:
                    return List.of("-XX:SharedArchiveFile=" + archive, "-Xshare:auto", QUIET);
                case DUMP:
                    return dumper ? List.of("-XX:ArchiveClassesAtExit=" + temp, QUIET) : List.of();
                default:
                    return List.of();
            }
        }

        /**
         * After the JVMs exited: when this launch writes the archive and its dumping JVM exited 0 with
         * a complete file, renames it into place and removes older archives of the program; removes the
         * temporary file otherwise; releases the lock. Never throws.
         */
        void finish(boolean dumperSucceeded) {
            if (finished || mode != Mode.DUMP) {
                finished = true;
                return;
            }
            finished = true;
            try {
                if (dumperSucceeded && isComplete(temp)) {
                    Files.move(temp, archive, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
                    prune(archive);
                }
            } catch (IOException | RuntimeException ignored) {
                // never required: the next launch tries again
            } finally {
                deleteQuietly(temp);
                deleteQuietly(lock);
            }
        }

        @Override
        public String toString() {
            return mode + " (" + reason + ")";
        }
    }

    /**
     * Decides what a launch of {@code program} does: {@link Mode#USE} when its archive exists,
     * {@link Mode#DUMP} when this launch took the lock to write it, {@link Mode#NONE} otherwise.
     *
     * @param javaBinary the JVMs' {@code java}
     * @param classPath  their class path ({@link File#pathSeparator}-separated)
     * @param jvmArgs    their JVM arguments (before the archive's own)
     * @param program    what they run (the main class and whatever else decides the classes loaded)
     */
    static Launch prepare(Options settings, Path javaBinary, String classPath, List<String> jvmArgs, String program) {
        if (!settings.enabled()) {
            return Launch.none(Settings.CDS.name() + "=off");
        }
        for (String a : jvmArgs) {
            if (a.startsWith("-Xshare") || a.startsWith("-XX:SharedArchiveFile") || a.startsWith("-XX:ArchiveClassesAtExit")
                    || a.equals("-XX:-UseSharedSpaces")) {
                return Launch.none("the JVM arguments choose class-data sharing themselves (" + a + ")");
            }
        }
        String key;
        try {
            key = key(javaBinary, classPath, jvmArgs, program);
        } catch (IOException | IllegalArgumentException e) {
            return Launch.none(e.getMessage());
        }
        String base = fileName(program) + "-" + hash(key);
        Path dir = settings.directory();
        Path archive = dir.resolve(base + SUFFIX);
        if (isComplete(archive)) {
            return new Launch(Mode.USE, "mapping " + archive, archive, null, null);
        }
        Path lock = dir.resolve(base + LOCK_SUFFIX);
        long pid = ProcessHandle.current().pid();
        Path temp = dir.resolve(base + SUFFIX + "." + pid + TEMP_SUFFIX);
        try {
            Files.createDirectories(dir);
            if (!tryLock(lock, pid)) {
                if (!takeOverStale(lock, dir, base) || !tryLock(lock, pid)) {
                    return Launch.none("another launch is writing " + archive);
                }
            }
        } catch (IOException | RuntimeException e) {
            return Launch.none("cannot write " + dir + ": " + e);
        }
        deleteQuietly(temp);
        return new Launch(Mode.DUMP, "writing " + archive, archive, temp, lock);
    }

    /**
     * The key text of an archive (hashed into its name).
     *
     * @throws IllegalArgumentException when the class path cannot be archived (a directory, a
     *                                  wildcard, a missing entry)
     */
    static String key(Path javaBinary, String classPath, List<String> jvmArgs, String program) throws IOException {
        StringBuilder sb = new StringBuilder("jcomm-cds 1\n");
        Path java = javaBinary.toRealPath();
        sb.append("java ").append(java).append('\n');
        Path home = java.getParent() == null ? null : java.getParent().getParent();
        if (home != null) {
            for (String f : List.of("lib/modules", "lib/server/libjvm.so", "release")) {
                appendFile(sb, "jdk", home.resolve(f), false);
            }
        }
        sb.append("program ").append(program).append('\n');
        for (String a : jvmArgs) {
            if (!a.startsWith("-Xlog")) { // logging changes no class
                sb.append("arg ").append(a).append('\n');
            }
        }
        int jars = 0;
        for (String e : classPath.split(File.pathSeparator)) {
            if (e.isEmpty()) {
                continue;
            }
            if (e.contains("*")) {
                throw new IllegalArgumentException("the class path has a wildcard (" + e + ")");
            }
            Path p = Path.of(e).toAbsolutePath();
            if (Files.isDirectory(p)) {
                throw new IllegalArgumentException("the class path has a directory (" + e + "); JDK 17 archives jars only");
            }
            if (!Files.isRegularFile(p)) {
                throw new IllegalArgumentException("the class path has a missing entry (" + e + ")");
            }
            appendFile(sb, "cp", p, true);
            jars++;
        }
        if (jars == 0) {
            throw new IllegalArgumentException("the class path has no jar");
        }
        return sb.toString();
    }

    private static void appendFile(StringBuilder sb, String tag, Path p, boolean required) throws IOException {
        BasicFileAttributes a;
        try {
            a = Files.readAttributes(p, BasicFileAttributes.class);
        } catch (IOException e) {
            if (required) {
                throw e;
            }
            return;
        }
        sb.append(tag).append(' ').append(p).append(' ').append(a.size()).append(' ')
                .append(a.lastModifiedTime().toMillis()).append('\n');
    }

    /**
     * The key's 64-bit FNV-1a hash in 16 hex digits (not a digest: a launcher should not pay for
     * loading the security providers, and the JVM checks the class path of an archive itself).
     */
    static String hash(String key) {
        return Fnv1a.hex(Fnv1a.update(Fnv1a.EMPTY, key.getBytes(StandardCharsets.UTF_8)));
    }

    /** {@code program} as a file-name prefix: letters, digits, '.', '_' and '-' only. */
    static String fileName(String program) {
        String s = program.replaceAll("[^A-Za-z0-9._-]", "_");
        return s.length() > 100 ? s.substring(0, 100) : s;
    }

    /** Whether {@code f} is a complete dynamic archive (the JVM writes the header, with its magic, last). */
    static boolean isComplete(Path f) {
        try (InputStream in = Files.newInputStream(f)) {
            byte[] b = in.readNBytes(4);
            return b.length == 4 && ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN).getInt() == DYNAMIC_ARCHIVE_MAGIC;
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    private static boolean tryLock(Path lock, long pid) throws IOException {
        try {
            Files.write(lock, (pid + "\n").getBytes(StandardCharsets.US_ASCII), StandardOpenOption.CREATE_NEW,
                    StandardOpenOption.WRITE);
            return true;
        } catch (FileAlreadyExistsException e) {
            return false;
        }
    }

    /**
     * Removes {@code lock} and its owner's temporary file when the owner is gone and the lock older
     * than {@link #STALE_LOCK_AGE} (a launcher killed while its JVM wrote the archive).
     */
    private static boolean takeOverStale(Path lock, Path dir, String base) {
        try {
            Instant modified = Files.getLastModifiedTime(lock).toInstant();
            if (modified.plus(STALE_LOCK_AGE).isAfter(Instant.now())) {
                return false;
            }
            String text = Files.readString(lock, StandardCharsets.US_ASCII).trim();
            long owner = text.isEmpty() ? -1 : Long.parseLong(text);
            if (owner > 0 && ProcessHandle.of(owner).map(ProcessHandle::isAlive).orElse(false)) {
                return false;
            }
            if (owner > 0) {
                deleteQuietly(dir.resolve(base + SUFFIX + "." + owner + TEMP_SUFFIX));
            }
            Files.deleteIfExists(lock);
            return true;
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }

    /**
     * Removes the archives of the same program with another key, and every archive of the directory
     * older than {@link #MAX_AGE}.
     */
    static void prune(Path kept) {
        Path dir = kept.getParent();
        String name = kept.getFileName().toString();
        Pattern sameProgram = Pattern.compile(Pattern.quote(name.substring(0, name.lastIndexOf('-') + 1))
                + "[0-9a-f]{16}" + Pattern.quote(SUFFIX));
        Instant oldest = Instant.now().minus(MAX_AGE);
        List<Path> gone = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, "*" + SUFFIX)) {
            for (Path p : ds) {
                if (p.equals(kept)) {
                    continue;
                }
                if (sameProgram.matcher(p.getFileName().toString()).matches()
                        || Files.getLastModifiedTime(p).toInstant().isBefore(oldest)) {
                    gone.add(p);
                }
            }
        } catch (IOException | RuntimeException ignored) {
            return;
        }
        // a JVM that has an archive mapped keeps its pages; one that starts now runs without it
        gone.forEach(AppCds::deleteQuietly);
    }

    private static void deleteQuietly(Path p) {
        if (p == null) {
            return;
        }
        try {
            Files.deleteIfExists(p);
        } catch (IOException | RuntimeException ignored) {
            // best effort
        }
    }
}
