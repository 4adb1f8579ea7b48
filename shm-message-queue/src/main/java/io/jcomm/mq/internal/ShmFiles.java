package io.jcomm.mq.internal;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.PosixFilePermissions;
import java.security.SecureRandom;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Job directories under {@code /dev/shm}: created {@code 0700} with an owner marker, checked for
 * free space, removed on close, and cleaned up when their owner process is dead.
 *
 * <p>Directory names are {@code <prefix><tag>-<pid>-<random>}; the marker file {@value #OWNER_FILE}
 * holds the owner's pid and start time so that a recycled pid is not mistaken for the owner.
 * Only names with our prefix are ever touched.
 */
public final class ShmFiles {

    /** Name of the owner marker file inside a job directory. */
    public static final String OWNER_FILE = "jcomm-owner";

    private static final Pattern NAME = Pattern.compile("^([a-z-]+?)([A-Za-z0-9_.]{1,40})-(\\d{1,10})-([0-9a-f]{8})$");
    private static final SecureRandom RANDOM = new SecureRandom();

    private ShmFiles() {
    }

    /** Keeps letters, digits, {@code _} and {@code .} of a user-chosen tag (max 40 characters). */
    public static String sanitizeTag(String tag) {
        StringBuilder sb = new StringBuilder();
        for (char c : tag.toCharArray()) {
            if (sb.length() >= 40) {
                break;
            }
            if (Character.isLetterOrDigit(c) && c < 128 || c == '_' || c == '.') {
                sb.append(c);
            }
        }
        return sb.length() == 0 ? "job" : sb.toString();
    }

    /**
     * Creates a fresh {@code 0700} directory {@code base/<prefix><tag>-<pid>-<random>} with the owner
     * marker of this process.
     */
    public static Path createOwnedDirectory(Path base, String prefix, String tag) {
        long pid = ProcessHandle.current().pid();
        byte[] r = new byte[4];
        RANDOM.nextBytes(r);
        Path dir = base.resolve(prefix + sanitizeTag(tag) + "-" + pid + "-" + HexFormat.of().formatHex(r));
        try {
            Files.createDirectory(dir, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
            Files.writeString(dir.resolve(OWNER_FILE), pid + " " + startMillis(ProcessHandle.current()) + "\n",
                    StandardCharsets.US_ASCII);
        } catch (IOException e) {
            deleteRecursively(dir);
            throw new UncheckedIOException("cannot create " + dir + ": " + e.getMessage(), e);
        }
        return dir;
    }

    private static long startMillis(ProcessHandle p) {
        return p.info().startInstant().map(Instant::toEpochMilli).orElse(-1L);
    }

    /** Usable bytes of the file store holding {@code dir}, or {@code Long.MAX_VALUE} if unknown. */
    public static long usableBytes(Path dir) {
        try {
            return Files.getFileStore(dir).getUsableSpace();
        } catch (IOException e) {
            return Long.MAX_VALUE;
        }
    }

    /**
     * Message for a space shortage, or empty when {@code needed <= usable}: says how much is needed
     * and what to do about it.
     */
    public static Optional<String> spaceProblem(Path dir, long needed, long usable, String what) {
        if (needed <= usable) {
            return Optional.empty();
        }
        return Optional.of(String.format("not enough shared memory in %s for %s: need %.1f MiB, %.1f MiB free. "
                        + "Enlarge it (docker run --shm-size=256m, or mount -o remount,size=256m %s), free stale files, "
                        + "or use smaller term lengths (MessageQueueOptions.ipcTermLength/udpTermLength)",
                dir, what, needed / 1048576.0, usable / 1048576.0, dir));
    }

    /** True if the directory's owner marker names a live process (same pid and start time). */
    public static boolean ownerAlive(Path dir) {
        Optional<long[]> owner = readOwner(dir);
        if (owner.isEmpty()) {
            Matcher m = NAME.matcher(dir.getFileName().toString());
            if (!m.matches()) {
                return true; // not ours: never treat as stale
            }
            long pid = Long.parseLong(m.group(3));
            return ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
        }
        long pid = owner.get()[0];
        long start = owner.get()[1];
        Optional<ProcessHandle> h = ProcessHandle.of(pid);
        if (h.isEmpty() || !h.get().isAlive()) {
            return false;
        }
        long actual = startMillis(h.get());
        return start < 0 || actual < 0 || Math.abs(actual - start) < 2000;
    }

    /** The owner pid and start time (epoch ms) in the marker, if readable. */
    public static Optional<long[]> readOwner(Path dir) {
        try {
            String s = Files.readString(dir.resolve(OWNER_FILE), StandardCharsets.US_ASCII).trim();
            String[] p = s.split(" ");
            if (p.length != 2) {
                return Optional.empty();
            }
            return Optional.of(new long[] {Long.parseLong(p[0]), Long.parseLong(p[1])});
        } catch (IOException | NumberFormatException e) {
            return Optional.empty();
        }
    }

    /**
     * Deletes directories {@code base/<prefix>*} whose owner process is dead. Returns the removed
     * paths. Directories of live owners, and anything without our prefix, are left alone.
     */
    public static List<Path> cleanStale(Path base, String prefix) {
        List<Path> removed = new ArrayList<>();
        if (!Files.isDirectory(base)) {
            return removed;
        }
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(base, prefix + "*")) {
            for (Path p : ds) {
                if (!NAME.matcher(p.getFileName().toString()).matches() || !p.getFileName().toString().startsWith(prefix)) {
                    continue;
                }
                if (Files.isDirectory(p, java.nio.file.LinkOption.NOFOLLOW_LINKS) && !ownerAlive(p)) {
                    if (deleteRecursively(p)) {
                        removed.add(p);
                    }
                }
            }
        } catch (IOException e) {
            // best effort: an unreadable base directory just means nothing to clean
        }
        return removed;
    }

    /** Deletes {@code dir} and everything below it (no symlink following). True if it is gone. */
    public static boolean deleteRecursively(Path dir) {
        if (!Files.exists(dir, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            return true;
        }
        try {
            Files.walkFileTree(dir, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult visitFile(Path file, BasicFileAttributes attrs) throws IOException {
                    deleteQuietly(file);
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult visitFileFailed(Path file, IOException exc) {
                    return FileVisitResult.CONTINUE;
                }

                @Override
                public FileVisitResult postVisitDirectory(Path d, IOException exc) throws IOException {
                    deleteQuietly(d);
                    return FileVisitResult.CONTINUE;
                }
            });
        } catch (IOException e) {
            // fall through to the existence check
        }
        return !Files.exists(dir, java.nio.file.LinkOption.NOFOLLOW_LINKS);
    }

    private static void deleteQuietly(Path p) throws IOException {
        try {
            Files.delete(p);
        } catch (NoSuchFileException ignored) {
            // already gone
        }
    }
}
