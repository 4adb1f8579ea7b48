package io.jcomm.tools.run;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.JvmFlags;
import java.io.File;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.FileTime;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.jar.Attributes;
import java.util.jar.JarInputStream;
import java.util.jar.Manifest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The jar commrun's workers start from: module flags and class path in its manifest. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class WorkerJarTest {

    @Test
    void theManifestCarriesTheModuleFlagsAndTheClassPathRelativeToTheJar(@TempDir Path tmp) throws Exception {
        Path jarDir = Files.createDirectories(tmp.resolve("cache/jars"));
        Path lib = Files.createDirectories(tmp.resolve("lib dir"));
        Path a = Files.write(lib.resolve("a 100%.jar"), new byte[] {1});
        Path classes = Files.createDirectories(tmp.resolve("classes"));
        Manifest m = WorkerJar.manifest(jarDir, a + File.pathSeparator + classes + File.pathSeparator
                + File.pathSeparator + tmp.resolve("missing.jar"), JvmFlags.REQUIRED);
        assertNotNull(m);
        Attributes at = m.getMainAttributes();
        assertEquals(RunWorker.class.getName(), at.getValue(Attributes.Name.MAIN_CLASS));
        assertEquals("java.base/jdk.internal.misc java.base/jdk.internal.ref java.base/sun.nio.ch "
                + "jdk.compiler/com.sun.tools.javac.file", at.getValue("Add-Exports"));
        assertEquals("java.base/java.lang java.base/java.lang.reflect java.base/java.nio java.base/sun.nio.ch",
                at.getValue("Add-Opens"));
        assertEquals("../../lib%20dir/a%20100%25.jar ../../classes/ ../../missing.jar",
                at.getValue(Attributes.Name.CLASS_PATH));
        // what stays on the command line: the system properties
        List<String> rest = WorkerJar.commandLineFlags(JvmFlags.REQUIRED);
        assertTrue(rest.stream().allMatch(f -> f.startsWith("-D")), rest.toString());
        assertEquals(JvmFlags.REQUIRED.stream().filter(f -> f.startsWith("-D")).count(), rest.size());
        assertEquals(List.of("-Dx=1"), WorkerJar.commandLineFlags(List.of("--add-opens=java.base/java.io=ALL-UNNAMED", "-Dx=1")));
    }

    @Test
    void whatTheManifestCannotSayKeepsTheClassicCommandLine(@TempDir Path tmp) throws Exception {
        Path jar = Files.write(tmp.resolve("a.jar"), new byte[] {1});
        assertNull(WorkerJar.manifest(tmp, tmp + "/*", JvmFlags.REQUIRED), "a wildcard");
        assertNull(WorkerJar.manifest(tmp, "", JvmFlags.REQUIRED), "no class path");
        assertNull(WorkerJar.manifest(tmp, jar.toString(), List.of("--add-reads", "java.base=ALL-UNNAMED")));
        assertNull(WorkerJar.manifest(tmp, jar.toString(), List.of("--add-exports", "java.base/sun.nio.ch=some.module")));
        assertNull(WorkerJar.manifest(tmp, jar.toString(), List.of("--add-opens")));
        assertNotNull(WorkerJar.manifest(tmp, jar.toString(), List.of("--add-opens=java.base/java.io=ALL-UNNAMED")));
        // an entry in the jar's own directory, whose name could read as a URL scheme
        Path odd = Files.write(tmp.resolve("c:odd.jar"), new byte[] {1});
        assertEquals("./c:odd.jar", WorkerJar.relative(tmp.toRealPath(), odd.toString()));
    }

    @Test
    void theJarIsWrittenOnceAndRewrittenWhenItsManifestDiffers(@TempDir Path tmp) throws Exception {
        Path a = Files.write(tmp.resolve("a.jar"), new byte[] {1});
        Path cache = tmp.resolve("cache");
        Path jar = WorkerJar.prepare(cache, a.toString());
        assertNotNull(jar);
        assertEquals(cache.resolve(WorkerJar.DIRECTORY).toRealPath(), jar.getParent());
        assertTrue(jar.getFileName().toString().matches("commrun-worker-[0-9a-f]{16}\\.jar"), jar.toString());
        try (InputStream in = Files.newInputStream(jar); JarInputStream j = new JarInputStream(in)) {
            assertEquals("../../a.jar", j.getManifest().getMainAttributes().getValue(Attributes.Name.CLASS_PATH));
        }
        // the same plan again: the same file, untouched (the workers' class-data archive records its time)
        Files.setLastModifiedTime(jar, FileTime.fromMillis(1_000_000_000_000L));
        assertEquals(jar, WorkerJar.prepare(cache, a.toString()));
        assertEquals(1_000_000_000_000L, Files.getLastModifiedTime(jar).toMillis());
        // a damaged file is written again; another class path is another jar
        Files.write(jar, new byte[] {'P', 'K'});
        assertEquals(jar, WorkerJar.prepare(cache, a.toString()));
        assertNotEquals(1_000_000_000_000L, Files.getLastModifiedTime(jar).toMillis());
        Path b = Files.write(tmp.resolve("b.jar"), new byte[] {1});
        assertNotEquals(jar, WorkerJar.prepare(cache, a + File.pathSeparator + b));
        try (var files = Files.list(jar.getParent())) {
            assertEquals(2, files.count(), "two jars and no temporary file");
        }
        // writing a jar removes the old ones that name a class path entry gone; an old one in use stays
        Path gone = Files.write(tmp.resolve("gone.jar"), new byte[] {1});
        Path stale = WorkerJar.prepare(cache, gone.toString());
        Files.delete(gone);
        Path damaged = jar.getParent().resolve("commrun-worker-0000000000000000.jar");
        Files.write(damaged, new byte[] {1});
        java.time.Instant longAgo = java.time.Instant.now().minus(AppCds.MAX_AGE).minusSeconds(60);
        for (Path p : List.of(stale, damaged, jar)) {
            Files.setLastModifiedTime(p, FileTime.from(longAgo));
        }
        Path c = Files.write(tmp.resolve("c.jar"), new byte[] {1});
        assertTrue(Files.exists(WorkerJar.prepare(cache, c.toString())));
        assertTrue(!Files.exists(stale) && !Files.exists(damaged), "the stale jars were removed");
        assertTrue(Files.exists(jar), "a jar whose class path is there stays");
        // a jar directory others may write to is not used
        Path shared = Files.createDirectories(tmp.resolve("shared/" + WorkerJar.DIRECTORY));
        Files.setPosixFilePermissions(shared, java.nio.file.attribute.PosixFilePermissions.fromString("rwxrwxrwx"));
        assertNull(WorkerJar.prepare(shared.getParent(), a.toString()));
        // a cache that cannot be written: the classic command line
        Path blocked = Files.write(tmp.resolve("blocked"), new byte[0]);
        assertNull(WorkerJar.prepare(blocked, a.toString()));
    }
}
