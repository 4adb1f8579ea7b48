package io.jcomm.tools.run;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarOutputStream;
import java.util.zip.ZipEntry;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The cached copy of Netty's epoll library that commrun's workers find on their library path. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class EpollLibraryCacheTest {

    private static final String LIB = "libnetty_transport_native_epoll_x86_64.so";
    private static final String RESOURCE = "META-INF/native/" + LIB;

    private static Path jar(Path dir, String name, String entry, byte[] content) throws IOException {
        Path jar = dir.resolve(name);
        try (OutputStream o = Files.newOutputStream(jar); JarOutputStream j = new JarOutputStream(o)) {
            j.putNextEntry(new ZipEntry("some/Other.class"));
            j.write(new byte[] {1, 2, 3});
            if (entry != null) {
                j.putNextEntry(new ZipEntry(entry));
                j.write(content);
            }
        }
        return jar;
    }

    private static String cp(Path... entries) {
        StringBuilder sb = new StringBuilder();
        for (Path p : entries) {
            sb.append(sb.length() == 0 ? "" : File.pathSeparator).append(p);
        }
        return sb.toString();
    }

    @Test
    void theFirstJarWithTheLibraryIsCopiedOnceAndCheckedAtEveryLaunch(@TempDir Path tmp) throws Exception {
        Path cache = tmp.resolve("cache");
        Path without = jar(tmp, "a.jar", null, null);
        Path first = jar(tmp, "b.jar", RESOURCE, "first library".getBytes());
        Path second = jar(tmp, "c.jar", RESOURCE, "second library".getBytes());
        Path classes = Files.createDirectories(tmp.resolve("classes"));
        String cp = cp(classes, without, tmp.resolve("missing.jar"), first, second);

        Path dir = EpollLibraryCache.prepare(cache, cp, "Linux", "amd64");
        assertNotNull(dir);
        assertTrue(dir.startsWith(cache.resolve(EpollLibraryCache.DIRECTORY)), dir.toString());
        Path lib = dir.resolve(LIB);
        assertArrayEquals("first library".getBytes(), Files.readAllBytes(lib));
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(dir)));
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(lib)));

        // a second launch uses the copy as it is
        long written = Files.getLastModifiedTime(lib).toMillis();
        Files.setLastModifiedTime(lib, java.nio.file.attribute.FileTime.fromMillis(written - 10_000));
        assertEquals(dir, EpollLibraryCache.prepare(cache, cp, "Linux", "x86_64"));
        assertEquals(written - 10_000, Files.getLastModifiedTime(lib).toMillis(), "rewritten without need");

        // a copy that no longer matches the jar's entry is written again
        Files.write(lib, "tampered library".getBytes());
        assertEquals(dir, EpollLibraryCache.prepare(cache, cp, "Linux", "amd64"));
        assertArrayEquals("first library".getBytes(), Files.readAllBytes(lib));
        try (var files = Files.list(dir)) {
            assertEquals(List.of(lib), files.toList(), "no temporary file left");
        }

        // another library gets a directory of its own; the arguments put it first on the path
        List<String> args = EpollLibraryCache.jvmArgs(cache, cp(second, first), "Linux", "amd64", "/usr/lib:/lib");
        assertEquals(1, args.size());
        String path = args.get(0).substring("-Djava.library.path=".length());
        Path other = Path.of(path.substring(0, path.indexOf(File.pathSeparatorChar)));
        assertTrue(!other.equals(dir) && path.endsWith(File.pathSeparator + "/usr/lib:/lib"), args.toString());
        assertArrayEquals("second library".getBytes(), Files.readAllBytes(other.resolve(LIB)));
    }

    @Test
    void nothingIsGivenWhereNettyWouldFindItsLibraryElsewhereOrNone(@TempDir Path tmp) throws Exception {
        Path cache = tmp.resolve("cache");
        Path lib = jar(tmp, "b.jar", RESOURCE, "library".getBytes());
        // other systems and architectures
        assertEquals(List.of(), EpollLibraryCache.jvmArgs(cache, lib.toString(), "Mac OS X", "x86_64", ""));
        assertEquals(List.of(), EpollLibraryCache.jvmArgs(cache, lib.toString(), "Linux", "s390x", ""));
        assertNull(EpollLibraryCache.nettyArch("Linux", "ppc64le"));
        assertEquals("aarch_64", EpollLibraryCache.nettyArch("Linux", "aarch64"));
        // no jar with the library, an earlier directory that has it, a wildcard
        assertEquals(List.of(), EpollLibraryCache.jvmArgs(cache, jar(tmp, "a.jar", null, null).toString(), "Linux", "amd64", ""));
        Path classes = tmp.resolve("classes");
        Files.createDirectories(classes.resolve("META-INF/native"));
        Files.write(classes.resolve(RESOURCE), "own".getBytes());
        assertEquals(List.of(), EpollLibraryCache.jvmArgs(cache, cp(classes, lib), "Linux", "amd64", ""));
        assertEquals(List.of(), EpollLibraryCache.jvmArgs(cache, tmp + "/*" + File.pathSeparator + lib, "Linux", "amd64", ""));
        // a cache others may write to is not used
        Path shared = Files.createDirectories(tmp.resolve("shared"));
        Files.createDirectories(shared.resolve(EpollLibraryCache.DIRECTORY));
        Files.setPosixFilePermissions(shared.resolve(EpollLibraryCache.DIRECTORY), PosixFilePermissions.fromString("rwxrwxrwx"));
        assertEquals(List.of(), EpollLibraryCache.jvmArgs(shared, lib.toString(), "Linux", "amd64", ""));
        // and without a library path of its own the copy's directory is the whole path
        List<String> args = EpollLibraryCache.jvmArgs(cache, lib.toString(), "Linux", "amd64", null);
        assertEquals(1, args.size());
        assertTrue(args.get(0).matches("-Djava\\.library\\.path=[^" + File.pathSeparator + "]+"), args.toString());
    }
}
