package io.jcomm.it.tools;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.testkit.FreePorts;
import io.jcomm.testkit.Requirements;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code examples/consumer}, a user's own Maven project that imports {@code jcomm-bom} and depends on
 * {@code parallel-state} alone, built by Maven against the installed artifacts and run as a 4-JVM
 * TP=2 x PP=2 job. Needs this build's artifacts installed ({@code mvn install}, which is the README's
 * test command); elsewhere it skips saying so, and fails where {@code JCOMM_REQUIRE} names
 * {@code consumer} ({@code .ci/run} does).
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class ConsumerProjectIT {

    static final Path ROOT = Path.of(System.getProperty("user.dir")).getParent();
    static final Path CONSUMER = ROOT.resolve("examples/consumer");

    @Test
    void theConsumerProjectBuildsAgainstTheBomAndRunsATpPpJobWithoutGlooOrJavaCpp() throws Exception {
        String version = projectVersion(Files.readString(ROOT.resolve("pom.xml"), UTF_8), "jcomm-parent");
        assertEquals(version, projectVersion(Files.readString(ROOT.resolve("bom/pom.xml"), UTF_8), "jcomm-bom"),
                "bom/pom.xml has no parent: its version must be kept equal to the project's");
        assertTrue(Files.readString(CONSUMER.resolve("pom.xml"), UTF_8)
                .contains("<jcomm.version>" + version + "</jcomm.version>"), "examples/consumer/pom.xml uses " + version);

        Path repo = localRepository();
        String stale = staleInstall(repo, version);
        Requirements.assume("consumer", stale == null, stale + " (run mvn install in the checkout first)");

        Path mvn = onPath("mvn");
        Requirements.assume("consumer", mvn != null, "no mvn on the PATH");
        Path cpFile = CONSUMER.resolve("target/classpath.txt");
        deleteTree(CONSUMER.resolve("target")); // not "mvn clean": offline, use only plugins this build used
        List<String> cmd = List.of(mvn.toString(), "-B", "-q", "-o", "-Dmaven.repo.local=" + repo,
                "-f", CONSUMER.resolve("pom.xml").toString(), "-DskipTests", "package",
                "dependency:build-classpath", "-Dmdep.outputFile=" + cpFile);
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String log = new String(p.getInputStream().readAllBytes(), UTF_8);
        assertTrue(p.waitFor(240, TimeUnit.SECONDS), "the consumer build did not finish");
        assertEquals(0, p.exitValue(), "the consumer build failed:\n" + log);

        // exactly what a CPU-only TP/PP user needs
        List<String> jars = Arrays.stream(Files.readString(cpFile, UTF_8).strip().split(":"))
                .map(s -> Path.of(s).getFileName().toString()).toList();
        for (String needed : List.of("parallel-state-", "cpu-group-" + version, "cpu-group-store-", "shm-message-queue-",
                "device-communicator-" + version, "comm-api-")) {
            assertTrue(jars.stream().anyMatch(j -> j.startsWith(needed)), needed + " missing from " + jars);
        }
        for (String absent : List.of("javacpp", "cuda-", "cpu-group-gloo", "device-communicator-nccl")) {
            assertFalse(jars.stream().anyMatch(j -> j.startsWith(absent)), absent + " on the consumer's class path: " + jars);
        }

        // 4 plain JVMs on the consumer's own class path (nothing of this build's test classes), as a user
        // would start them: the SDK's flags and torchrun's environment
        String classPath = CONSUMER.resolve("target/classes") + ":" + Files.readString(cpFile, UTF_8).strip();
        Path java = Path.of(System.getProperty("java.home"), "bin", "java");
        int port = FreePorts.find();
        List<Process> ranks = new ArrayList<>();
        List<CompletableFuture<String>> outputs = new ArrayList<>();
        try {
            for (int rank = 0; rank < 4; rank++) {
                ProcessBuilder pb = new ProcessBuilder(java.toString(), "@" + ROOT.resolve("bin/jvm.flags"), "-Xmx256m",
                        "-cp", classPath, "com.example.consumer.TpPpJob").redirectErrorStream(true);
                pb.environment().putAll(Map.of("RANK", "" + rank, "WORLD_SIZE", "4", "LOCAL_RANK", "" + rank,
                        "LOCAL_WORLD_SIZE", "4", "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", "" + port,
                        "JCOMM_TIMEOUT_MS", "30000"));
                Process proc = pb.start();
                ranks.add(proc);
                outputs.add(CompletableFuture.supplyAsync(() -> {
                    try {
                        return new String(proc.getInputStream().readAllBytes(), UTF_8);
                    } catch (IOException e) {
                        return "(output unreadable: " + e + ")";
                    }
                }));
            }
            for (int rank = 0; rank < 4; rank++) {
                Process proc = ranks.get(rank);
                assertTrue(proc.waitFor(120, TimeUnit.SECONDS), "rank " + rank + " did not finish");
                String out = outputs.get(rank).get(10, TimeUnit.SECONDS);
                System.out.print(out.lines().map(l -> "[consumer rank] " + l + "\n").reduce("", String::concat));
                assertEquals(0, proc.exitValue(), "rank " + rank + ":\n" + out);
                String ok = "consumer: rank " + rank + " ok (tp " + (rank % 2) + ", pp " + (rank / 2) + ")";
                assertTrue(out.lines().anyMatch(ok::equals), out + " should contain " + ok);
            }
        } finally {
            ranks.forEach(Process::destroyForcibly);
        }
    }

    private static String projectVersion(String pom, String artifactId) {
        Matcher m = Pattern.compile("<artifactId>" + Pattern.quote(artifactId) + "</artifactId>\\s*<version>([^<]+)</version>")
                .matcher(pom);
        assertTrue(m.find(), "no version of " + artifactId);
        return m.group(1);
    }

    private static Path localRepository() {
        String p = System.getProperty("maven.repo.local");
        return p != null && !p.isBlank() ? Path.of(p) : Path.of(System.getProperty("user.home"), ".m2", "repository");
    }

    /** Null when the installed jars of the consumer's artifacts are this build's, else why not. */
    private static String staleInstall(Path repo, String version) throws IOException {
        List<String[]> artifacts = new ArrayList<>();
        artifacts.add(new String[] {"parallel-state", "parallel-state"});
        artifacts.add(new String[] {"cpu-group", "cpu-group/core"});
        artifacts.add(new String[] {"cpu-group-store", "cpu-group/store"});
        artifacts.add(new String[] {"device-communicator", "device-communicator/core"});
        for (String[] a : artifacts) {
            String jar = a[0] + "-" + version + ".jar";
            Path built = ROOT.resolve(a[1]).resolve("target").resolve(jar);
            Path installed = repo.resolve("io/jcomm").resolve(a[0]).resolve(version).resolve(jar);
            if (!Files.isRegularFile(built) || !Files.isRegularFile(installed)) {
                return "no " + (Files.isRegularFile(built) ? installed : built);
            }
            if (Files.mismatch(built, installed) != -1) {
                return installed + " is not this build's " + built;
            }
        }
        if (!Files.isRegularFile(repo.resolve("io/jcomm/jcomm-bom").resolve(version).resolve("jcomm-bom-" + version + ".pom"))) {
            return "jcomm-bom " + version + " is not installed in " + repo;
        }
        return null;
    }

    private static void deleteTree(Path dir) throws IOException {
        if (!Files.exists(dir)) {
            return;
        }
        try (java.util.stream.Stream<Path> s = Files.walk(dir)) {
            for (Path p : s.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.delete(p);
            }
        }
    }

    private static Path onPath(String name) {
        for (String dir : System.getenv().getOrDefault("PATH", "").split(":")) {
            Path p = Path.of(dir.isEmpty() ? "." : dir).resolve(name);
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        return null;
    }
}
