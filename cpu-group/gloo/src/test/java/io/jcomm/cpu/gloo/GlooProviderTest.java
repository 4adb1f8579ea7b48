package io.jcomm.cpu.gloo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.jcomm.api.Availability;
import io.jcomm.cpu.gloo.internal.GlooLibrary;
import io.jcomm.cpu.spi.CpuBackendProvider;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.ArrayList;
import java.util.List;
import java.util.ServiceLoader;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

@Timeout(60)
class GlooProviderTest {

    @Test
    void discoveredByServiceLoaderWithAReason() {
        CpuBackendProvider gloo = null;
        for (CpuBackendProvider p : ServiceLoader.load(CpuBackendProvider.class)) {
            if (p.name().equals("gloo")) {
                gloo = p;
            }
        }
        assertNotNull(gloo, "gloo provider listed in META-INF/services");
        Availability a = gloo.availability();
        assertSameVerdict(a, gloo.availability());
        if (a.available()) {
            assertTrue(a.reason().contains("libgloo"), a.reason());
        } else {
            assertTrue(a.reason().startsWith(GlooLibrary.NOT_FOUND), a.reason());
        }
    }

    private static void assertSameVerdict(Availability a, Availability b) {
        assertTrue(a == b, "the verdict is computed once and cached");
    }

    /** Main of the child JVM: prints the verdict. */
    public static final class PrintAvailability {
        public static void main(String[] args) {
            System.out.println("VERDICT " + GlooBackend.availability());
        }
    }

    /** The library is found inside a jar (as when tools run from bin/_launch): extracted, loaded, deleted. */
    @Test
    void loadsFromAJar(@TempDir Path tmp) throws Exception {
        ThreadRanks.assumeGloo();
        Path classes = Path.of(GlooLibrary.class.getProtectionDomain().getCodeSource().getLocation().toURI());
        assumeTrue(Files.isDirectory(classes), "classes are already in a jar: " + classes);
        Path jar = tmp.resolve("cpu-group.jar");
        jarUp(classes, jar);
        List<String> cp = new ArrayList<>();
        cp.add(jar.toString());
        cp.add(testClasses().toString());
        for (String e : System.getProperty("java.class.path").split(java.io.File.pathSeparator)) {
            if (!Path.of(e).toAbsolutePath().equals(classes.toAbsolutePath())) {
                cp.add(e);
            }
        }
        Path tmpdir = Files.createDirectory(tmp.resolve("t"));
        ProcessBuilder pb = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-Djava.io.tmpdir=" + tmpdir, "-cp", String.join(java.io.File.pathSeparator, cp),
                PrintAvailability.class.getName());
        pb.redirectErrorStream(true);
        Process p = pb.start();
        String out;
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            out = r.lines().collect(Collectors.joining("\n"));
        }
        assertTrue(p.waitFor(30, TimeUnit.SECONDS));
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("VERDICT available:") && out.contains("jar:file:"), out);
        try (var left = Files.list(tmpdir)) {
            assertFalse(left.findAny().isPresent(), "the extracted library is deleted after loading");
        }
    }

    private static Path testClasses() throws URISyntaxException {
        return Path.of(GlooProviderTest.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    }

    private static void jarUp(Path dir, Path jar) throws IOException {
        try (OutputStream fo = Files.newOutputStream(jar); JarOutputStream jo = new JarOutputStream(fo)) {
            Files.walkFileTree(dir, new SimpleFileVisitor<>() {
                @Override
                public FileVisitResult visitFile(Path f, BasicFileAttributes attrs) throws IOException {
                    jo.putNextEntry(new JarEntry(dir.relativize(f).toString().replace('\\', '/')));
                    Files.copy(f, jo);
                    jo.closeEntry();
                    return FileVisitResult.CONTINUE;
                }
            });
        }
    }
}
