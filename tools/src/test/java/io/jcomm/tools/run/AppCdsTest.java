package io.jcomm.tools.run;

import io.jcomm.api.config.Settings;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.FileTime;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.jar.JarEntry;
import java.util.jar.JarOutputStream;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Class-data archives of launched JVMs, made and used for real: commrun's workers ({@link AppCds}
 * through {@link LocalJob}) and {@code bin/_launch}'s JVM. Each JVM runs {@link CdsProbe}, which
 * reports the archives it has mapped, from a jar (JDK 17 archives classes from jars only).
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class AppCdsTest {

    private static final Pattern MAPPED = Pattern.compile(Pattern.quote(CdsProbe.MARK) + "\\[(.*)]");
    private static final Pattern CLASS_PATH = Pattern.compile(Pattern.quote(CdsProbe.CLASS_PATH) + "(.*)");

    @TempDir
    Path dir;

    @Test
    void commrunWritesTheArchiveOnceThenEveryRankMapsItAndANewJarMeansANewArchive() throws Exception {
        Path jar = probeJar(dir.resolve("app.jar"));
        Path cache = dir.resolve("cache");
        Map<String, String> env = Map.of(Settings.CACHE_DIR.name(), cache.toString());

        Job first = commrun(jar, env);
        assertEquals(AppCds.Mode.DUMP, first.mode, first.output);
        assertEquals(List.of("", ""), first.mapped, "no rank maps an archive while one is written: " + first.output);
        Path archive = first.archive;
        assertTrue(AppCds.isComplete(archive), "rank 0 wrote the archive at its exit: " + archive);
        assertEquals(List.of(archive), files(cache.resolve("cds")), "no lock or temporary file is left");

        Job second = commrun(jar, env);
        assertEquals(AppCds.Mode.USE, second.mode, second.output);
        assertEquals(archive, second.archive);
        assertEquals(List.of(archive.toString(), archive.toString()), second.mapped, "every rank mapped it");

        // a rebuilt jar (another modification time) is another key: a new archive replaces the old one
        Files.setLastModifiedTime(jar, FileTime.from(Instant.now().plusSeconds(5)));
        Job third = commrun(jar, env);
        assertEquals(AppCds.Mode.DUMP, third.mode, third.output);
        assertNotEquals(archive, third.archive);
        assertEquals(List.of("", ""), third.mapped, "the stale archive is not given to the JVMs: " + third.output);
        assertEquals(List.of(third.archive), files(cache.resolve("cds")), "the stale archive was removed");
        Job fourth = commrun(jar, env);
        assertEquals(List.of(third.archive.toString(), third.archive.toString()), fourth.mapped);

        // the workers start from a jar in the cache, which the archive records: written again (removed,
        // say), it is another key too, not an archive the JVMs would refuse
        List<Path> workerJars = files(cache.resolve(WorkerJar.DIRECTORY));
        assertEquals(1, workerJars.size(), workerJars.toString());
        Files.delete(workerJars.get(0));
        Thread.sleep(1100); // another modification time for the jar written again, on coarse clocks too
        Job fifth = commrun(jar, env);
        assertEquals(AppCds.Mode.DUMP, fifth.mode, fifth.output);
        Job sixth = commrun(jar, env);
        assertEquals(List.of(fifth.archive.toString(), fifth.archive.toString()), sixth.mapped, sixth.output);
    }

    @Test
    void withoutAWritableCacheOrWithAClassDirectoryTheJobRunsWithoutAnArchive() throws Exception {
        Path jar = probeJar(dir.resolve("app.jar"));
        Path file = Files.writeString(dir.resolve("not-a-directory"), "x");
        Job job = commrun(jar, Map.of(Settings.CACHE_DIR.name(), file.resolve("cache").toString()));
        assertEquals(AppCds.Mode.NONE, job.mode, job.output);
        assertTrue(job.reason.startsWith("cannot write"), job.reason);
        assertEquals(List.of("", ""), job.mapped, job.output);

        AppCds.Options settings = new AppCds.Options(true, dir.resolve("cds"));
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        AppCds.Launch classes = AppCds.prepare(settings, java, jar + ":" + dir, List.of(), "M");
        assertEquals(AppCds.Mode.NONE, classes.mode());
        assertTrue(classes.reason().contains("directory"), classes.reason());
        assertEquals(List.of(), classes.jvmArgs(true));
        assertEquals(AppCds.Mode.NONE, AppCds.prepare(settings, java, jar.toString(), List.of("-Xshare:off"), "M").mode());
        AppCds.Options off = AppCds.Options.fromEnvironment(Map.of(Settings.CDS.name(), "off", "HOME", "/h"));
        assertFalse(off.enabled());
        assertEquals(Path.of("/h/.cache/jcomm/cds"), off.directory());
        assertEquals(Path.of("/x/jcomm/cds"), AppCds.Options.fromEnvironment(Map.of("XDG_CACHE_HOME", "/x")).directory());
        assertEquals(AppCds.Mode.NONE, AppCds.prepare(off, java, jar.toString(), List.of(), "M").mode());
    }

    @Test
    void oneConcurrentLaunchWritesTheArchiveAndOnlyACompleteOneIsPutInPlace() throws Exception {
        Path jar = probeJar(dir.resolve("app.jar"));
        AppCds.Options settings = new AppCds.Options(true, dir.resolve("cds"));
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        AppCds.Launch a = AppCds.prepare(settings, java, jar.toString(), List.of(), "M");
        AppCds.Launch b = AppCds.prepare(settings, java, jar.toString(), List.of(), "M");
        assertEquals(AppCds.Mode.DUMP, a.mode());
        assertEquals(AppCds.Mode.NONE, b.mode(), "the lock is taken: " + b.reason());
        assertTrue(a.jvmArgs(true).get(0).startsWith("-XX:ArchiveClassesAtExit="), a.jvmArgs(true).toString());
        assertEquals(List.of(), a.jvmArgs(false), "one JVM of a launch writes the archive");
        // the dumping JVM died half-way (no header): nothing is put in place, the lock is released
        Path temp = Path.of(a.jvmArgs(true).get(0).substring("-XX:ArchiveClassesAtExit=".length()));
        Files.write(temp, new byte[4096]);
        a.finish(true);
        assertFalse(Files.exists(a.archive()));
        assertEquals(List.of(), files(settings.directory()));

        // a lock left by a launcher that is gone is taken over once it is a minute old
        Process gone = new ProcessBuilder(java.toString(), "-version").redirectErrorStream(true).start();
        gone.getInputStream().readAllBytes();
        gone.waitFor();
        AppCds.Launch c = AppCds.prepare(settings, java, jar.toString(), List.of(), "M");
        Path lock = c.archive().resolveSibling(c.archive().getFileName().toString().replace(".jsa", ".lock"));
        c.finish(false);
        Files.writeString(lock, gone.pid() + "\n");
        assertEquals(AppCds.Mode.NONE, AppCds.prepare(settings, java, jar.toString(), List.of(), "M").mode(), "too fresh");
        Files.setLastModifiedTime(lock, FileTime.from(Instant.now().minus(AppCds.STALE_LOCK_AGE).minusSeconds(1)));
        AppCds.Launch d = AppCds.prepare(settings, java, jar.toString(), List.of(), "M");
        assertEquals(AppCds.Mode.DUMP, d.mode(), d.reason());
        d.finish(false);
    }

    @Test
    void binLaunchWritesItsArchiveOnceReusesItAndRebuildsItForANewJar() throws Exception {
        Path root = launcherRoot();
        Path jar = probeJar(root.resolve("dist/target/jcomm-dist-0.jar"));
        Path cache = dir.resolve("cache");
        Path cds = cache.resolve("cds");

        // a help run writes none: its archive would hold only the classes of its text, for every later run
        assertEquals("", mapped(launch(root, cache, Map.of(), "--help")));
        assertEquals("", mapped(launch(root, cache, Map.of(), "sub", "-h")));
        try (var files = Files.list(cds)) {
            assertEquals(List.of(), files.toList(), "a help run took the lock or wrote an archive");
        } catch (java.nio.file.NoSuchFileException nothing) {
            // not even the directory
        }

        // three first launches at once: one writes the archive, the others run without; none fails
        List<Process> first = new ArrayList<>();
        for (int i = 0; i < 3; i++) {
            first.add(launch(root, cache));
        }
        for (Process p : first) {
            assertEquals("", mapped(p), "an archive cannot be mapped before it is written");
        }
        Path archive = awaitOnlyArchive(cds);
        assertEquals(archive.toString(), mapped(launch(root, cache)), "the second launch maps the archive");

        Files.setLastModifiedTime(jar, FileTime.from(Instant.now().plusSeconds(5)));
        assertEquals("", mapped(launch(root, cache)), "a rebuilt jar is another key");
        Path rebuilt = awaitOnlyArchive(cds);
        assertNotEquals(archive, rebuilt);
        assertFalse(Files.exists(archive), "the stale archive was removed");
        assertEquals(rebuilt.toString(), mapped(launch(root, cache)));

        Path file = Files.writeString(dir.resolve("not-a-directory"), "x");
        assertEquals("", mapped(launch(root, file.resolve("cache"))), "an unwritable cache: no archive, no failure");
    }

    @Test
    void binLaunchRunsOnTheAllJarWithTheExtrasAskedFor() throws Exception {
        Path root = launcherRoot();
        Path lib = root.resolve("dist/target/lib");
        Files.createDirectories(lib.resolve("charts"));
        Path thin = probeJar(root.resolve("dist/target/jcomm-dist-0.jar"));
        Path all = Files.copy(thin, root.resolve("dist/target/jcomm-dist-0-all.jar"));
        Path dep = Files.copy(thin, lib.resolve("dep.jar"));
        Path chart = Files.copy(thin, lib.resolve("charts/chart.jar"));
        Map<String, String> off = Map.of(Settings.CDS.name(), "off");

        assertEquals(all.toString(), classPath(launch(root, dir.resolve("cache"), off)), "the all jar alone");
        assertEquals(all + ":" + chart, classPath(launch(root, dir.resolve("cache"),
                Map.of(Settings.CDS.name(), "off", "JCOMM_LAUNCH_EXTRA", "charts/*.jar"))), "and the extras asked for");
        assertEquals(thin + ":" + dep, classPath(launch(root, dir.resolve("cache"),
                Map.of(Settings.CDS.name(), "off", "JCOMM_LAUNCH_LIBS", "dep.jar"))), "exactly the jars a launcher names");
        Files.setLastModifiedTime(all, FileTime.from(Files.getLastModifiedTime(thin).toInstant().minusSeconds(60)));
        assertEquals(thin + ":" + dep, classPath(launch(root, dir.resolve("cache"), off)),
                "an all jar older than the dist jar is stale: the dist jar and lib/*.jar");
    }

    /**
     * A copy of the repository's launcher ({@code bin/_launch} and its flags) under the test's
     * directory, with an empty {@code dist/target/lib}; skips the test where the repository has none.
     */
    private Path launcherRoot() throws IOException {
        Path repo = Path.of("").toAbsolutePath().getParent();
        assumeTrue(Files.isRegularFile(repo.resolve("bin/_launch")), "no bin/_launch under " + repo);
        Path root = dir.resolve("root");
        Files.createDirectories(root.resolve("bin"));
        Files.createDirectories(root.resolve("dist/target/lib"));
        for (String f : List.of("_launch", "jvm.flags")) {
            Files.copy(repo.resolve("bin").resolve(f), root.resolve("bin").resolve(f), StandardCopyOption.COPY_ATTRIBUTES);
        }
        return root;
    }

    /** The class path the probe run by {@code p} printed, once it exited 0. */
    private static String classPath(Process p) throws Exception {
        return probed(p, CLASS_PATH).trim();
    }

    /** What one commrun launch did: its archive mode, and what each rank mapped. */
    private record Job(AppCds.Mode mode, String reason, Path archive, List<String> mapped, String output) {
    }

    private Job commrun(Path jar, Map<String, String> env) throws Exception {
        RunPlan plan = RunPlan.builder().nprocPerNode(2).mainClass(CdsProbe.class.getName()).classPath(jar.toString())
                .build();
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        PrintStream out = new PrintStream(bytes, true, StandardCharsets.UTF_8);
        Path shm = Files.createDirectories(dir.resolve("shm"));
        LocalJob job = LocalJob.start(plan, env, out, out, true, shm);
        LocalJob.Result r = job.await(Duration.ofSeconds(60));
        String output = bytes.toString(StandardCharsets.UTF_8);
        assertEquals(LocalJob.Outcome.SUCCEEDED, r.outcome(), output);
        List<String> mapped = new ArrayList<>();
        for (int rank = 0; rank < 2; rank++) {
            Matcher m = Pattern.compile(Pattern.quote("[rank " + rank + "] ") + MAPPED.pattern()).matcher(output);
            assertTrue(m.find(), output);
            mapped.add(m.group(1));
        }
        AppCds.Launch cds = job.classDataArchive();
        return new Job(cds.mode(), cds.reason(), cds.archive(), mapped, output);
    }

    private static Process launch(Path root, Path cache) throws IOException {
        return launch(root, cache, Map.of());
    }

    private static Process launch(Path root, Path cache, Map<String, String> extraEnv, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of("bash", root.resolve("bin/_launch").toString(), CdsProbe.class.getName()));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        Map<String, String> env = pb.environment();
        env.put("JCOMM_NO_BUILD", "1");
        env.put("JAVA_HOME", System.getProperty("java.home"));
        env.put(Settings.CACHE_DIR.name(), cache.toString());
        env.remove(Settings.CDS.name());
        env.remove("JCOMM_JAVA_OPTS");
        env.remove("JCOMM_LAUNCH_LIBS");
        env.remove("JCOMM_LAUNCH_EXTRA");
        env.putAll(extraEnv);
        return pb.start();
    }

    /** The archive the probe run by {@code p} mapped ("" for none), once it exited 0. */
    private static String mapped(Process p) throws Exception {
        return probed(p, MAPPED);
    }

    /** What the probe run by {@code p} printed in {@code line}'s group 1, once it exited 0. */
    private static String probed(Process p, Pattern line) throws Exception {
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertEquals(0, p.waitFor(), out);
        Matcher m = line.matcher(out);
        assertTrue(m.find(), out);
        return m.group(1);
    }

    /** Waits until {@code cds} holds one archive and nothing else (the watcher of bin/_launch is done). */
    private static Path awaitOnlyArchive(Path cds) throws Exception {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
        List<Path> files = List.of();
        while (System.nanoTime() < end) {
            files = Files.isDirectory(cds) ? files(cds) : List.of();
            if (files.size() == 1 && files.get(0).toString().endsWith(".jsa")) {
                assertTrue(AppCds.isComplete(files.get(0)), files.toString());
                return files.get(0);
            }
            Thread.sleep(50);
        }
        throw new AssertionError("no archive alone in " + cds + ": " + files);
    }

    private static List<Path> files(Path d) throws IOException {
        try (Stream<Path> s = Files.list(d)) {
            return s.sorted().toList();
        }
    }

    /** A jar of {@link RunWorker} and {@link CdsProbe}, from the build's class directories. */
    private static Path probeJar(Path jar) throws Exception {
        Map<String, Path> entries = new HashMap<>();
        for (Class<?> c : List.of(RunWorker.class, CdsProbe.class)) {
            Path classes = Path.of(c.getProtectionDomain().getCodeSource().getLocation().toURI());
            String pkg = c.getPackageName().replace('.', '/');
            try (Stream<Path> s = Files.list(classes.resolve(pkg))) {
                s.filter(f -> f.getFileName().toString().matches(Pattern.quote(c.getSimpleName()) + "(\\$.*)?\\.class"))
                        .forEach(f -> entries.put(pkg + "/" + f.getFileName(), f));
            }
        }
        try (OutputStream os = Files.newOutputStream(jar); JarOutputStream jos = new JarOutputStream(os)) {
            for (Map.Entry<String, Path> e : entries.entrySet()) {
                jos.putNextEntry(new JarEntry(e.getKey()));
                Files.copy(e.getValue(), jos);
                jos.closeEntry();
            }
        }
        return jar;
    }
}
