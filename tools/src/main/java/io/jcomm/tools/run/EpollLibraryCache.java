package io.jcomm.tools.run;

import io.jcomm.runtime.Fnv1a;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.zip.CRC32;
import java.util.zip.ZipEntry;
import java.util.zip.ZipFile;

/**
 * Netty's epoll library for commrun's workers, extracted once into jcomm's cache directory and put in
 * front of the workers' {@code java.library.path}.
 *
 * <p>Without it, every worker's Netty first fails to find the library on {@code java.library.path},
 * then copies it out of its jar into a temporary file whose name comes from a {@code SecureRandom}:
 * the file's writing, the failed attempt and the set-up of the JDK's security providers (30-40 ms of
 * a cold JVM's CPU) all happened before the rank's groups were ready. With the library on the path,
 * Netty's first attempt ({@code System.loadLibrary}) finds it.
 *
 * <p>The library is the one Netty itself would load: the first class-path jar that holds
 * {@code META-INF/native/libnetty_transport_native_epoll_<arch>.so}. It is copied to
 * {@code <cache>/native/<hash>/}, where the hash covers the entry's name, size and CRC, so that jars
 * rebuilt with the same Netty share one copy. Each launch checks the copy's size and CRC against the
 * jar's entry and writes it again (to a temporary name, then renamed) when they differ; the
 * directories are the user's own and not writable by others, or the cache is not used. Never
 * required: on another OS or architecture, with a wildcard or a directory that holds the library before
 * the jar on the class path, or when anything here fails, the workers run as before and Netty extracts the library itself.
 * A {@code --jvm-arg=-Djava.library.path=...} of the user comes later on the command line and wins.
 */
final class EpollLibraryCache {

    /** The cache's subdirectory. */
    static final String DIRECTORY = "native";
    private static final Set<PosixFilePermission> OWNER_ONLY_DIR = PosixFilePermissions.fromString("rwx------");
    private static final Set<PosixFilePermission> OWNER_ONLY_FILE = PosixFilePermissions.fromString("rw-------");
    private static final Set<PosixFilePermission> OTHERS_WRITE =
            EnumSet.of(PosixFilePermission.GROUP_WRITE, PosixFilePermission.OTHERS_WRITE);
    /** A library larger than this is not copied (Netty's epoll library is ~100 KiB). */
    static final long MAX_BYTES = 16L << 20;

    private EpollLibraryCache() {
    }

    /**
     * The JVM arguments that give the workers the cached library: {@code -Djava.library.path=<copy's
     * directory>:<libraryPath>}, or none.
     *
     * @param cacheRoot   jcomm's cache directory
     * @param classPath   the workers' class path
     * @param osName      their {@code os.name}
     * @param osArch      their {@code os.arch}
     * @param libraryPath their {@code java.library.path} otherwise (the launcher's own; may be null)
     */
    static List<String> jvmArgs(Path cacheRoot, String classPath, String osName, String osArch, String libraryPath) {
        try {
            Path dir = prepare(cacheRoot, classPath, osName, osArch);
            if (dir == null) {
                return List.of();
            }
            String rest = libraryPath == null || libraryPath.isEmpty() ? "" : File.pathSeparator + libraryPath;
            return List.of("-Djava.library.path=" + dir + rest);
        } catch (IOException | RuntimeException e) {
            return List.of(); // never required
        }
    }

    /**
     * The directory that holds a verified copy of the epoll library the workers' class path offers,
     * copying it there first when needed; null when there is none to give.
     */
    static Path prepare(Path cacheRoot, String classPath, String osName, String osArch) throws IOException {
        String arch = nettyArch(osName, osArch);
        if (arch == null) {
            return null;
        }
        String fileName = "libnetty_transport_native_epoll_" + arch + ".so";
        String resource = "META-INF/native/" + fileName;
        for (String e : classPath.split(File.pathSeparator)) {
            if (e.isEmpty()) {
                continue;
            }
            if (e.contains("*")) {
                return null; // the JVM expands it; leave the library to Netty
            }
            Path p = Path.of(e);
            if (Files.isDirectory(p)) {
                if (Files.exists(p.resolve(resource))) {
                    return null; // Netty finds the library there first; leave it to Netty
                }
                continue;
            }
            if (!Files.isRegularFile(p)) {
                continue;
            }
            try (ZipFile zip = new ZipFile(p.toFile())) {
                ZipEntry entry = zip.getEntry(resource);
                if (entry == null) {
                    continue;
                }
                if (entry.getSize() < 0 || entry.getSize() > MAX_BYTES || entry.getCrc() < 0) {
                    return null;
                }
                return copy(zip, entry, cacheRoot, fileName);
            }
        }
        return null;
    }

    /** Netty's name for the architecture of its Linux libraries, or null when it has none here. */
    static String nettyArch(String osName, String osArch) {
        if (osName == null || !osName.toLowerCase(Locale.ROOT).startsWith("linux") || osArch == null) {
            return null;
        }
        switch (osArch.toLowerCase(Locale.ROOT)) {
            case "amd64":
            case "x86_64":
                return "x86_64";
            case "aarch64":
                return "aarch_64";
            case "riscv64":
                return "riscv64";
            default:
                return null;
        }
    }

    private static Path copy(ZipFile zip, ZipEntry entry, Path cacheRoot, String fileName) throws IOException {
        String key = entry.getName() + "\n" + entry.getSize() + "\n" + entry.getCrc() + "\n";
        Path parent = cacheRoot.resolve(DIRECTORY);
        Path dir = parent.resolve(Fnv1a.hex(Fnv1a.update(Fnv1a.EMPTY, key.getBytes(StandardCharsets.UTF_8))));
        ownDirectory(cacheRoot); // may be a link (e.g. under a linked ~/.cache)
        ownDirectory(parent, LinkOption.NOFOLLOW_LINKS);
        ownDirectory(dir, LinkOption.NOFOLLOW_LINKS);
        Path lib = dir.resolve(fileName);
        if (matches(lib, entry)) {
            return dir;
        }
        Path tmp = dir.resolve(fileName + "." + ProcessHandle.current().pid() + ".tmp");
        try {
            Files.deleteIfExists(tmp);
            Files.createFile(tmp, PosixFilePermissions.asFileAttribute(OWNER_ONLY_FILE));
            try (InputStream in = zip.getInputStream(entry); OutputStream out = Files.newOutputStream(tmp)) {
                in.transferTo(out);
            }
            if (!matches(tmp, entry)) {
                return null;
            }
            Files.move(tmp, lib, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } finally {
            Files.deleteIfExists(tmp);
        }
        return dir; // the copy was checked before its atomic rename into place
    }

    /**
     * Creates {@code dir} (owner only) when missing; fails when it is not the user's own or others may
     * write it (what the workers load from jcomm's cache must be the user's own: {@link WorkerJar} too).
     */
    static void ownDirectory(Path dir, LinkOption... links) throws IOException {
        if (!Files.isDirectory(dir, links)) {
            Files.createDirectories(dir);
            Files.setPosixFilePermissions(dir, OWNER_ONLY_DIR);
        }
        String owner = Files.getOwner(dir, links).getName();
        if (!owner.equals(System.getProperty("user.name"))) {
            throw new IOException(dir + " belongs to " + owner);
        }
        Set<PosixFilePermission> perms = Files.getPosixFilePermissions(dir, links);
        if (perms.stream().anyMatch(OTHERS_WRITE::contains)) {
            throw new IOException(dir + " is writable by others");
        }
    }

    /** Whether {@code f} is a regular file (not a link) with the entry's size and CRC. */
    static boolean matches(Path f, ZipEntry entry) throws IOException {
        if (!Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS) || Files.size(f) != entry.getSize()) {
            return false;
        }
        CRC32 crc = new CRC32();
        crc.update(Files.readAllBytes(f));
        return crc.getValue() == entry.getCrc();
    }
}
