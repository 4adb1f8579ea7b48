package io.jcomm.runtime.shm;

import io.jcomm.runtime.Entropy;
import io.jcomm.runtime.mem.DirectBuffers;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.reflect.Field;
import java.nio.ByteBuffer;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.nio.file.attribute.FileAttribute;
import java.nio.file.attribute.PosixFilePermissions;
import java.nio.file.attribute.UserPrincipal;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The one lifecycle of jcomm's shared-memory files (tcp rings and staging regions, the message
 * queue's media directories, the node-local channel): naming, creation, mapping, removal, and the
 * clean-up of what a dead process left behind.
 *
 * <ul>
 *   <li><b>Owned names</b> {@code <prefix><tag>-<pid>-<8 hex>} ({@link #ownedName}): a file or
 *   directory made by one process. A directory also holds an owner marker ({@value #OWNER_FILE}:
 *   the owner's {@link ProcessIdentity}), so a recycled pid is not taken for its owner.
 *   {@link #cleanStale} removes entries with a given prefix whose owner is dead; nothing without
 *   our prefix and name pattern is ever touched.</li>
 *   <li><b>Creation</b> ({@link #createMapped}): {@code 0600}, never over an existing file, checked
 *   for free space, and allocated by writing through the file before it is mapped, so that a full
 *   tmpfs fails there with an {@link IOException} (ENOSPC) instead of a SIGBUS on first touch.</li>
 *   <li><b>Sharing</b> by path: a peer maps an offered path only when it lies directly in the
 *   expected directory with the expected prefix ({@link #offered}); once every party mapped a file,
 *   its name is removed ({@link #unlink}), so nothing is left if a process dies later.</li>
 *   <li><b>Release</b> ({@link #unmap}) at once when the caller guarantees nobody reads the mapping
 *   any more; otherwise the garbage collector releases it.</li>
 * </ul>
 */
public final class ShmFiles {

    /** Name of the owner marker file inside an owned directory. */
    public static final String OWNER_FILE = "jcomm-owner";
    /** Where shared-memory files go unless configured otherwise. */
    public static final Path DEFAULT_DIR = Path.of("/dev/shm");
    /** Free space left over when a file is created (other users of the tmpfs). */
    public static final long MARGIN_BYTES = 16L << 20;

    private static final Pattern NAME = Pattern.compile("^([a-z-]+?)([A-Za-z0-9_.]{1,40})-(\\d{1,10})-([0-9a-f]{8})$");
    /**
     * The zeros {@link #allocate} writes, shared by every call (each writes from a duplicate; nothing
     * writes into it). One 64 KiB buffer per process instead of a fresh one of up to 1 MiB per file: a
     * fresh direct buffer is zeroed by the JDK, a page fault per 4 KiB (12-17 µs each on the development
     * VM), and every group's shared-memory files were created that way before its groups were ready.
     */
    private static final ByteBuffer ZEROS = ByteBuffer.allocateDirect(64 << 10).asReadOnlyBuffer();
    private static final FileAttribute<?> FILE_OWNER_ONLY =
            PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------"));
    private static final FileAttribute<?> DIR_OWNER_ONLY =
            PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------"));

    private ShmFiles() {
    }

    // ------------------------------------------------------------------ names

    /** Keeps letters, digits, {@code _} and {@code .} of a tag (at most 40 characters; {@code job} if none). */
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

    /** A fresh owned name {@code <prefix><tag>-<pid>-<8 hex>} for this process ({@code prefix}: {@code [a-z-]+}). */
    public static String ownedName(String prefix, String tag) {
        byte[] r = new byte[4];
        Entropy.nextBytes(r);
        return prefix + sanitizeTag(tag) + "-" + ProcessHandle.current().pid() + "-" + HexFormat.of().formatHex(r);
    }

    /**
     * {@code offered} as a path if it is an owned name with {@code prefix} directly inside {@code dir}
     * (the check a peer's offer of a file to map must pass), else null.
     */
    public static Path offered(Path dir, String offered, String prefix) {
        Path abs;
        try {
            abs = Path.of(offered).toAbsolutePath().normalize();
        } catch (RuntimeException e) {
            return null;
        }
        Path name = abs.getFileName();
        if (name == null || !dir.toAbsolutePath().normalize().equals(abs.getParent())) {
            return null;
        }
        String n = name.toString();
        return n.startsWith(prefix) && NAME.matcher(n).matches() ? abs : null;
    }

    // ------------------------------------------------------------------ owners

    /** Creates a fresh {@code 0700} directory {@code base/}{@link #ownedName} with this process's owner marker. */
    public static Path createOwnedDirectory(Path base, String prefix, String tag) {
        Path dir = base.resolve(ownedName(prefix, tag));
        try {
            Files.createDirectory(dir, DIR_OWNER_ONLY);
            Files.writeString(dir.resolve(OWNER_FILE), ProcessIdentity.self().marker() + "\n", StandardCharsets.US_ASCII);
        } catch (IOException e) {
            deleteRecursively(dir);
            throw new UncheckedIOException("cannot create " + dir + ": " + e.getMessage(), e);
        }
        return dir;
    }

    /** The owner in a directory's marker, if readable. */
    public static Optional<ProcessIdentity> readOwner(Path dir) {
        try {
            return Optional.ofNullable(ProcessIdentity.parseMarker(
                    Files.readString(dir.resolve(OWNER_FILE), StandardCharsets.US_ASCII)));
        } catch (IOException e) {
            return Optional.empty();
        }
    }

    /**
     * Whether the owner of an owned file or directory lives: a directory's marker names it (pid and
     * start time), else the pid in the name does. Anything else is never taken for stale (true).
     */
    public static boolean ownerAlive(Path p) {
        Optional<ProcessIdentity> owner = Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS) ? readOwner(p) : Optional.empty();
        if (owner.isPresent()) {
            return owner.get().alive();
        }
        Matcher m = NAME.matcher(p.getFileName().toString());
        if (!m.matches()) {
            return true;
        }
        return new ProcessIdentity(Long.parseLong(m.group(3)), -1).alive();
    }

    /**
     * Removes the files and directories {@code base/<prefix>*} with owned names whose owner is dead;
     * returns what it removed. Entries of live owners, and anything without our prefix and name
     * pattern, are left alone. Best effort: an unreadable directory means nothing to clean.
     */
    public static List<Path> cleanStale(Path base, String prefix) {
        List<Path> removed = new ArrayList<>();
        if (!Files.isDirectory(base)) {
            return removed;
        }
        Map<Long, Boolean> pids = new HashMap<>(); // one look per owner process: thousands of files may share a few
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(base, prefix + "*")) {
            for (Path p : ds) {
                String n = p.getFileName().toString();
                Matcher m = NAME.matcher(n);
                if (!n.startsWith(prefix) || !m.matches()) {
                    continue;
                }
                boolean alive = Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS) ? ownerAlive(p)
                        : pids.computeIfAbsent(Long.parseLong(m.group(3)), pid -> new ProcessIdentity(pid, -1).alive());
                if (alive) {
                    continue;
                }
                if (deleteRecursively(p)) {
                    removed.add(p);
                }
            }
        } catch (IOException | UncheckedIOException e) {
            // best effort
        }
        return removed;
    }

    /** Deletes {@code p} and everything below it (no symlink following). True if it is gone. */
    public static boolean deleteRecursively(Path p) {
        if (!Files.exists(p, LinkOption.NOFOLLOW_LINKS)) {
            return true;
        }
        try {
            Files.walkFileTree(p, new SimpleFileVisitor<>() {
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
        return !Files.exists(p, LinkOption.NOFOLLOW_LINKS);
    }

    private static void deleteQuietly(Path p) throws IOException {
        try {
            Files.delete(p);
        } catch (NoSuchFileException ignored) {
            // already gone
        }
    }

    /** Removes a file name (idempotent, quiet); mappings of it stay valid. True if it is gone. */
    public static boolean unlink(Path p) {
        try {
            Files.deleteIfExists(p);
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    // ------------------------------------------------------------------ space

    /** Usable bytes of the file store holding {@code dir}, or {@code Long.MAX_VALUE} if unknown. */
    public static long usableBytes(Path dir) {
        try {
            return Files.getFileStore(dir).getUsableSpace();
        } catch (IOException e) {
            return Long.MAX_VALUE;
        }
    }

    /**
     * Message for a space shortage, or empty when {@code needed <= usable}: how much {@code what}
     * needs, how much is free, and what to do ({@code smaller}: the option that asks for less).
     */
    public static Optional<String> spaceProblem(Path dir, long needed, long usable, String what, String smaller) {
        if (needed <= usable) {
            return Optional.empty();
        }
        return Optional.of(String.format("not enough shared memory in %s for %s: need %.1f MiB, %.1f MiB free. "
                        + "Enlarge it (docker run --shm-size=256m, or mount -o remount,size=256m %s), free stale files, "
                        + "or use %s",
                dir, what, needed / 1048576.0, usable / 1048576.0, dir, smaller));
    }

    // ------------------------------------------------------------------ files

    /**
     * Creates {@code file} ({@code 0600}; it must not exist), allocates {@code bytes} by writing
     * through the file, and maps it read-write. Checks first that its directory is writable and keeps
     * {@link #MARGIN_BYTES} free. On any failure nothing is left behind.
     *
     * @param smaller the option that asks for less, for the message of a space shortage
     * @throws IOException with a message that says what to do (not writable, too small, ENOSPC)
     */
    public static MappedByteBuffer createMapped(Path file, long bytes, String what, String smaller) throws IOException {
        try (Partial p = create(file, bytes, what, smaller, true)) {
            return p.map();
        }
    }

    /**
     * A file made by {@link #createPartly}: its read-write mapping, and the open channel through which
     * the caller allocates the rest ({@link #allocate}) before it touches it.
     *
     * @param map the mapping of the whole file
     * @param channel the file, open for writing; closing it leaves the mapping valid
     */
    public record Partial(MappedByteBuffer map, FileChannel channel) implements java.io.Closeable {

        /**
         * Allocates {@code [from, from + length)} by writing zeros through the file, so that touching it
         * later cannot raise a SIGBUS on a full tmpfs.
         *
         * @throws IOException on ENOSPC or a closed channel
         */
        public void allocate(long from, long length) throws IOException {
            ShmFiles.allocate(channel, from, length);
        }

        /** Closes the channel (the mapping stays). */
        @Override
        public void close() throws IOException {
            channel.close();
        }
    }

    /**
     * {@link #createMapped}, but allocates nothing yet: the file has its full length (and the same checks
     * of the directory and of free space for all of it), and the caller allocates each range through
     * {@link Partial#allocate} before any process touches it (a page touched first through a mapping
     * of a full tmpfs is a SIGBUS). For regions most of which may never be used.
     */
    public static Partial createPartly(Path file, long bytes, String what, String smaller) throws IOException {
        return create(file, bytes, what, smaller, false);
    }

    private static Partial create(Path file, long bytes, String what, String smaller, boolean allocateAll)
            throws IOException {
        Path dir = file.toAbsolutePath().getParent();
        if (dir == null || !Files.isDirectory(dir) || !Files.isWritable(dir)) {
            throw new IOException(dir + " is not a writable directory");
        }
        Optional<String> space = spaceProblem(dir, bytes + MARGIN_BYTES, usableBytes(dir), what, smaller);
        if (space.isPresent()) {
            throw new IOException(space.get());
        }
        boolean created = false;
        FileChannel fc = null;
        try {
            fc = FileChannel.open(file, Set.of(StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                    StandardOpenOption.WRITE), FILE_OWNER_ONLY);
            created = true;
            if (allocateAll) {
                allocate(fc, 0, bytes); // ENOSPC here, never SIGBUS later
            } else {
                allocate(fc, bytes - 1, 1); // the length (and its last page)
            }
            return new Partial(fc.map(FileChannel.MapMode.READ_WRITE, 0, bytes), fc);
        } catch (FileAlreadyExistsException e) {
            throw e;
        } catch (IOException | RuntimeException e) {
            if (fc != null) {
                try {
                    fc.close();
                } catch (IOException ignored) {
                    // the failure below says what went wrong
                }
            }
            if (created) {
                unlink(file);
            }
            throw new IOException("cannot create " + file + " (" + (bytes >> 20) + " MiB) for " + what + ": " + e
                    + " (is " + dir + " large enough? e.g. docker --shm-size; or use " + smaller + ")", e);
        }
    }

    /**
     * Creates {@code file} or opens it if another process came first (every party asks for the same
     * length: growing is idempotent), and maps it read-write. Refuses a file of another user or a
     * symbolic link.
     */
    public static MappedByteBuffer openOrCreateMapped(Path file, long bytes) throws IOException {
        try (FileChannel fc = FileChannel.open(file, Set.of(StandardOpenOption.CREATE, StandardOpenOption.READ,
                StandardOpenOption.WRITE, LinkOption.NOFOLLOW_LINKS), FILE_OWNER_ONLY)) {
            UserPrincipal owner = Files.getOwner(file, LinkOption.NOFOLLOW_LINKS);
            if (!owner.getName().equals(System.getProperty("user.name"))) {
                throw new IOException(file + " belongs to " + owner + ", not to this user");
            }
            if (fc.size() < bytes) {
                fc.write(ByteBuffer.allocate(1), bytes - 1);
            }
            return fc.map(FileChannel.MapMode.READ_WRITE, 0, bytes);
        }
    }

    /**
     * Maps an existing file whose size lies in {@code [minBytes, maxBytes]}.
     *
     * @throws IOException when it cannot be opened or has another size
     */
    public static MappedByteBuffer mapExisting(Path file, boolean writable, long minBytes, long maxBytes)
            throws IOException {
        Set<StandardOpenOption> open = writable ? Set.of(StandardOpenOption.READ, StandardOpenOption.WRITE)
                : Set.of(StandardOpenOption.READ);
        try (FileChannel fc = FileChannel.open(file, open.toArray(new StandardOpenOption[0]))) {
            long size = fc.size();
            if (size < minBytes || size > maxBytes) {
                throw new IOException(file + " has " + size + " bytes, expected " + minBytes
                        + (maxBytes == minBytes ? "" : " to " + maxBytes));
            }
            return fc.map(writable ? FileChannel.MapMode.READ_WRITE : FileChannel.MapMode.READ_ONLY, 0, size);
        }
    }

    /**
     * Allocates {@code [from, from + length)} of {@code fc} by writing zeros through the file (not
     * through a mapping): on a full tmpfs this fails with ENOSPC where touching an unallocated page of
     * a mapping would kill the process with SIGBUS. It also pre-faults the pages off the data path.
     */
    static void allocate(FileChannel fc, long from, long length) throws IOException {
        ByteBuffer zeros = ZEROS.duplicate();
        long at = from;
        long end = from + length;
        while (at < end) {
            zeros.clear();
            zeros.limit((int) Math.min(zeros.capacity(), end - at));
            while (zeros.hasRemaining()) {
                at += fc.write(zeros, at);
            }
        }
        fc.force(false);
    }

    // ------------------------------------------------------------------ release

    /**
     * Releases a mapping at once ({@link DirectBuffers#free}); without it the mapping goes when the buffer is
     * collected. The caller guarantees that no thread touches the buffer afterwards.
     */
    public static void unmap(MappedByteBuffer m) {
        DirectBuffers.free(m);
    }
}
