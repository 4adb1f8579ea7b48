package io.jcomm.tools.run;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.JvmFlags;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * commrun with real worker JVMs: the environment of each rank, failure propagation, SIGTERM
 * forwarding, workers dying with their launcher, and the clean-up of leftovers.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class CommRunTest {

    /** Output of an in-process run, also echoed to the test log. */
    private static final class Captured {
        final ByteArrayOutputStream outBytes = new ByteArrayOutputStream();
        final ByteArrayOutputStream errBytes = new ByteArrayOutputStream();
        final PrintStream out = new PrintStream(tee(outBytes, System.out), true, StandardCharsets.UTF_8);
        final PrintStream err = new PrintStream(tee(errBytes, System.err), true, StandardCharsets.UTF_8);

        String out() {
            return outBytes.toString(StandardCharsets.UTF_8);
        }

        String err() {
            return errBytes.toString(StandardCharsets.UTF_8);
        }

        private static OutputStream tee(OutputStream a, OutputStream b) {
            return new OutputStream() {
                @Override
                public synchronized void write(int c) throws java.io.IOException {
                    a.write(c);
                    b.write(c);
                }

                @Override
                public synchronized void write(byte[] buf, int off, int len) throws java.io.IOException {
                    a.write(buf, off, len);
                    b.write(buf, off, len);
                }
            };
        }
    }

    private static int run(Captured c, Map<String, String> env, String... args) {
        return CommRun.commandLine(new CommRun(env, c.out, c.err)).execute(args);
    }

    private static Map<String, String> env(String... kv) {
        Map<String, String> m = new HashMap<>(System.getenv());
        m.remove("JCOMM_TOKEN_FILE");
        for (int i = 0; i < kv.length; i += 2) {
            m.put(kv[i], kv[i + 1]);
        }
        return m;
    }

    @Test
    void everyRankGetsItsEnvironmentAndTheLauncherHostsTheStore(@TempDir Path dir) throws Exception {
        Path token = dir.resolve("job.token");
        Files.writeString(token, "0123456789abcdef0123456789abcdef\n");
        Captured c = new Captured();
        int code = run(c, env("JCOMM_TEST_MARK", "m1"), "--nproc-per-node", "3", "--token-file", token.toString(),
                JobWorker.class.getName(), "env", "--x", "y z");
        assertEquals(0, code, c.err());
        String out = c.out();
        for (int r = 0; r < 3; r++) {
            String env = line(out, "[rank " + r + "] ENV ");
            assertTrue(env.contains("RANK=" + r + ",") && env.contains("LOCAL_RANK=" + r + ",")
                    && env.contains("WORLD_SIZE=3") && env.contains("LOCAL_WORLD_SIZE=3")
                    && env.contains("MASTER_ADDR=127.0.0.1") && env.contains("JCOMM_LAUNCHER_STORE=1")
                    && env.contains("JCOMM_TEST_MARK=m1") && env.contains("JCOMM_TOKEN_FILE=" + token.toAbsolutePath()), env);
            assertTrue(env.contains("glibc.malloc.hugetlb="), "malloc's huge-page tunable: " + env);
            assertTrue(out.contains("[rank " + r + "] ARGS --x y z"), out);
            // all three met in the launcher's store, with the token: rank 0 did not host one
            assertTrue(out.contains("[rank " + r + "] MET 3"), out);
            assertTrue(c.err().contains("[rank " + r + "] bye from " + r), c.err());
        }
        Matcher port = Pattern.compile("MASTER_PORT=(\\d+)").matcher(out);
        assertTrue(port.find() && Integer.parseInt(port.group(1)) > 0);
        assertTrue(c.err().contains("commrun: 3 ranks exited 0"), c.err());
        assertTrue(c.err().contains("no processes or /dev/shm files left behind"), c.err());
    }

    @Test
    void withStoreDataTheHostedStoresKeysOutliveTheLauncher(@TempDir Path dir) throws Exception {
        Path data = dir.resolve("store-data");
        Captured c = new Captured();
        int code = run(c, env(), "--nproc-per-node", "2", "--store-data", data.toString(), JobWorker.class.getName(),
                "env");
        assertEquals(0, code, c.err());
        assertTrue(Files.exists(data.resolve("store.log")), "no data file in " + data);
        // a store started on the directory has the job's keys
        try (io.jcomm.cpu.store.TcpStoreServer server = io.jcomm.cpu.store.TcpStoreServer.start(
                io.jcomm.cpu.store.TcpStoreServerConfig.builder().dataDir(data).build());
             io.jcomm.cpu.store.TcpStore s = io.jcomm.cpu.store.TcpStore.connect(
                     io.jcomm.cpu.store.TcpStoreConfig.builder().port(server.port()).timeout(java.time.Duration.ofSeconds(10))
                             .build())) {
            assertEquals("2", new String(s.get("up"), StandardCharsets.UTF_8));
        }
    }

    @Test
    void workersLoadNettysLibraryFromTheLaunchersCopy(@TempDir Path dir) throws Exception {
        Path cache = dir.resolve("cache");
        for (int launch = 0; launch < 2; launch++) {
            Captured c = new Captured();
            int code = run(c, env("JCOMM_CACHE_DIR", cache.toString()), "--nproc-per-node", "2",
                    JobWorker.class.getName(), "native");
            assertEquals(0, code, c.err());
            for (int r = 0; r < 2; r++) {
                // loaded, mapped from the copy (Netty did not extract one of its own), first on the path
                String line = line(c.out(), "[rank " + r + "] NATIVE ");
                Path copies = cache.resolve(EpollLibraryCache.DIRECTORY);
                assertTrue(line.matches(Pattern.quote("[rank " + r + "] NATIVE true " + copies) + "/[0-9a-f]{16}/"
                        + "libnetty_transport_native_epoll_[a-z0-9_]+\\.so " + Pattern.quote(copies.toString()) + "/.*"), line);
            }
        }
        try (var libs = Files.walk(cache.resolve(EpollLibraryCache.DIRECTORY))) {
            assertEquals(1, libs.filter(p -> p.getFileName().toString().startsWith("libnetty_transport_native_epoll")).count());
        }
    }

    @Test
    void workersStartFromTheWorkerJarWithTheArchivedModuleGraph(@TempDir Path dir) throws Exception {
        Path cache = dir.resolve("cache");
        Captured c = new Captured();
        int code = run(c, env("JCOMM_CACHE_DIR", cache.toString()), "--nproc-per-node", "2", "--jvm-arg=-Xlog:cds=info",
                JobWorker.class.getName(), "jar");
        assertEquals(0, code, c.err());
        String out = c.out();
        for (int r = 0; r < 2; r++) {
            String jar = line(out, "[rank " + r + "] JAR ");
            assertTrue(jar.matches(Pattern.quote("[rank " + r + "] JAR " + cache.resolve(WorkerJar.DIRECTORY).toRealPath())
                    + "/commrun-worker-[0-9a-f]{16}\\.jar"), jar);
            // RunWorker put the class path back
            assertEquals("[rank " + r + "] CLASSPATH " + System.getProperty("java.class.path"), line(out, "[rank " + r + "] CLASSPATH "));
            assertEquals("[rank " + r + "] UNSAFE true", line(out, "[rank " + r + "] UNSAFE "));
        }
        // no --add-exports/--add-opens on the command line: the JVMs kept the archive's module graph
        long enabled = out.lines().filter(l -> l.contains("optimized module handling: enabled")).count();
        assertEquals(2, enabled, out);
        assertFalse(out.contains("optimized module handling: disabled"), out);
    }

    @Test
    void oversubscribedWorkersCompileLaterUnlessTheUserSaysOtherwise(@TempDir Path dir) {
        // 3 workers: oversubscribed on up to 5 CPUs (this machine and CI have 2)
        int cpus = Runtime.getRuntime().availableProcessors();
        String expected = 2 * 3 > cpus ? "2.0" : "1.0";
        Captured c = new Captured();
        Map<String, String> env = env("JCOMM_CACHE_DIR", dir.toString());
        assertEquals(0, run(c, env, "--nproc-per-node", "3", JobWorker.class.getName(), "jit"), c.err());
        for (int r = 0; r < 3; r++) {
            assertEquals("[rank " + r + "] SCALING " + expected, line(c.out(), "[rank " + r + "] SCALING "), c.out());
        }
        // the user's own value comes later on the command line and wins
        Captured d = new Captured();
        assertEquals(0, run(d, env, "--nproc-per-node", "3", "--jvm-arg=-XX:CompileThresholdScaling=1",
                JobWorker.class.getName(), "jit"), d.err());
        for (int r = 0; r < 3; r++) {
            assertEquals("[rank " + r + "] SCALING 1.0", line(d.out(), "[rank " + r + "] SCALING "), d.out());
        }
    }

    @Test
    void aStallIsReportedWithTheMissingRankAndWhatEveryRankDoes() {
        Captured c = new Captured();
        long t0 = System.nanoTime();
        int code = run(c, env(), "--nproc-per-node", "4", "--stall-report", "2", JobWorker.class.getName(), "stall", "2",
                "50", "7000");
        assertEquals(3, code, c.err());
        String err = c.err();
        int first = err.indexOf("commrun: stall report (no rank's operations advanced");
        assertTrue(first >= 0, err);
        String report = err.substring(first);
        assertTrue(report.contains("group world (4 ranks, 4 on this node)"), report);
        assertTrue(report.contains("verdict: rank 2 has not reached allReduce #50; rank 2: idle after allReduce #49"),
                report);
        for (int r : new int[] {0, 1, 3}) {
            assertTrue(report.contains("rank " + r + " (group rank " + r + "): in allReduce #50 for "), report);
        }
        assertTrue(report.contains("rank 2 (pid "), report);
        assertTrue(report.contains("\"main\""), "thread stacks: " + report);
        // printed again when the job failed (rank 2 exits 3 after its sleep; the others fail within
        // milliseconds, so what the second report still sees of them varies)
        int last = err.indexOf("commrun: stall report (rank 2 exited with 3", first);
        assertTrue(last > first, err);
        assertTrue(err.indexOf("not seen here: ranks [", last) > last || err.indexOf("no flight recorder found", last) > last,
                err);
        // the stall was reported within S + 5 s of it: the whole job took the sleep plus start-up
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(40), "took too long");
    }

    @Test
    void theOthersTimeoutsSayWhatTheMissingRankIsDoing() {
        Captured c = new Captured();
        int code = run(c, env(), "--nproc-per-node", "3", "--stall-report", "0", JobWorker.class.getName(), "stall", "2",
                "20", "30000", "3000");
        assertEquals(1, code, c.err());
        String err = c.err();
        for (int r : new int[] {0, 1}) {
            String line = err.lines().filter(l -> l.startsWith("[rank " + r + "]") && l.contains("did not complete before its "
                    + "deadline")).findFirst().orElseThrow(() -> new AssertionError("rank " + r + ": no timeout in\n" + err));
            assertTrue(line.contains("from rank 2 (rank 2: in no operation; last world allReduce #19 ended "), line);
        }
        assertFalse(err.contains("stall report"), "--stall-report 0 is off");
    }

    @Test
    void twoLaunchersAreTwoNodesOfOneJob() throws Exception {
        int port;
        try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        Captured node1 = new Captured();
        String p = Integer.toString(port);
        java.util.concurrent.CompletableFuture<Integer> second = java.util.concurrent.CompletableFuture.supplyAsync(
                () -> run(node1, env(), "--nnodes", "2", "--node-rank", "1", "--master-port", p, "--nproc-per-node", "2",
                        JobWorker.class.getName(), "env"));
        Captured node0 = new Captured();
        int first = run(node0, env(), "--nnodes", "2", "--node-rank", "0", "--master-port", p, "--nproc-per-node", "2",
                JobWorker.class.getName(), "env");
        assertEquals(0, first, node0.err());
        assertEquals(0, second.get(60, TimeUnit.SECONDS), node1.err());
        for (int r = 0; r < 4; r++) {
            Captured c = r < 2 ? node0 : node1;
            String env = line(c.out(), "[rank " + r + "] ENV ");
            assertTrue(env.contains("RANK=" + r + ",") && env.contains("LOCAL_RANK=" + (r % 2) + ",")
                    && env.contains("WORLD_SIZE=4") && env.contains("GROUP_RANK=" + (r / 2)) && env.contains("MASTER_PORT=" + port), env);
            assertTrue(c.out().contains("[rank " + r + "] MET 4"), c.out());
        }
    }

    /**
     * Two launchers as two nodes (distinct JCOMM_HOST_IDs: the ranks cannot read each other's recorder
     * files), one rank each; rank 1 stops before all-reduce #20. Node 0's stall report merges node 1's ranks
     * (written to the store by node 1's launcher) and rank 0's timeout names what rank 1 does, from the
     * summary rank 1's process published to the store.
     */
    @Test
    void severalNodesNode0MergesTheVerdictAndTimeoutsNameWhatARankOnAnotherHostDoes() throws Exception {
        int port;
        try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        String p = Integer.toString(port);
        Captured node1 = new Captured();
        java.util.concurrent.CompletableFuture<Integer> second = java.util.concurrent.CompletableFuture.supplyAsync(
                () -> run(node1, env("JCOMM_HOST_ID", "hostB"), "--nnodes", "2", "--node-rank", "1", "--master-port", p,
                        "--nproc-per-node", "1", "--stall-report", "2", JobWorker.class.getName(), "stall", "1", "20",
                        "12000", "6000"));
        Captured node0 = new Captured();
        int first = run(node0, env("JCOMM_HOST_ID", "hostA"), "--nnodes", "2", "--node-rank", "0", "--master-port", p,
                "--nproc-per-node", "1", "--stall-report", "2", JobWorker.class.getName(), "stall", "1", "20", "12000",
                "6000");
        int other = second.get(60, TimeUnit.SECONDS);
        String err0 = node0.err();
        assertEquals(1, first, err0);
        assertEquals(3, other, node1.err());
        // the merged verdict on node 0, within S + 5 s
        int at = err0.indexOf("commrun: stall report (no rank's operations advanced for");
        assertTrue(at >= 0, err0);
        String report = err0.substring(at);
        assertTrue(report.contains("; every node's ranks):"), report);
        assertTrue(report.contains("group world (2 ranks, 1 on this node, 1 on other nodes)"), report);
        assertTrue(report.contains("rank 0 (group rank 0): in allReduce #20 for "), report);
        assertTrue(report.contains("rank 1 (group rank 1, node 1): idle after allReduce #19, "), report);
        assertTrue(report.contains("verdict: rank 1 has not reached allReduce #20; rank 1 (node 1): idle after allReduce #19"),
                report);
        assertTrue(report.indexOf("commrun: stall report") < report.indexOf("did not complete before its deadline")
                || !report.contains("did not complete"), "reported before the timeout: " + report);
        // node 1's own rank is in no operation: no stall there
        assertFalse(node1.err().contains("stall report (no rank's"), node1.err());
        // rank 0's timeout names what rank 1 does on the other host, from the store
        String line = err0.lines().filter(l -> l.startsWith("[rank 0]") && l.contains("did not complete before its deadline"))
                .findFirst().orElseThrow(() -> new AssertionError("rank 0: no timeout in\n" + err0));
        assertTrue(line.contains(" from rank 1 (rank 1 on host hostB: in no operation; last world allReduce #19 ended "),
                line);
    }

    @Test
    void aFailingRankStopsTheOthersAndGivesTheJobItsExitCode() {
        Captured c = new Captured();
        long t0 = System.nanoTime();
        int code = run(c, env(), "--nproc-per-node", "3", "--grace", "5", JobWorker.class.getName(), "fail", "1", "7");
        assertEquals(7, code, c.err());
        assertTrue(TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - t0) < 60, "the others (sleeping 120 s) were stopped");
        String err = c.err();
        assertTrue(err.contains("commrun: rank 1 exited with 7; stopping the other ranks"), err);
        assertTrue(err.contains("rank 0=143, rank 1=7, rank 2=143"), "the others got SIGTERM: " + err);
        assertTrue(c.out().contains("[rank 1] failing with 7"), c.out());
    }

    @Test
    void withMaxLostTheOthersGoOnAndTheJobSucceedsUntilOneMoreFails() {
        Captured c = new Captured();
        int code = run(c, env(), "--nproc-per-node", "3", "--max-lost", "1", JobWorker.class.getName(), "lose", "1", "7",
                "1500");
        assertEquals(0, code, c.err());
        String err = c.err();
        assertTrue(err.contains("commrun: rank 1 exited with 7; lost 1 of at most 1 (--max-lost): the others go on"), err);
        assertTrue(err.contains("2 of 3 ranks exited 0, 1 lost (rank 1 exit 7; --max-lost 1)"), err);
        assertTrue(c.out().contains("[rank 0] done") && c.out().contains("[rank 2] done"), c.out());
        // a second failure is one too many: it stops the job with its code
        Captured d = new Captured();
        int code2 = run(d, env(), "--nproc-per-node", "3", "--max-lost", "1", "--grace", "5", JobWorker.class.getName(),
                "lose", "1,2", "9", "60000");
        assertEquals(9, code2, d.err());
        // ranks 1 and 2 fail at the same moment: whichever the launcher sees second stops the job
        assertTrue(d.err().matches("(?s).*commrun: rank [12] exited with 9; lost 1 of at most 1 \\(--max-lost\\): the others "
                + "go on.*commrun: rank [12] exited with 9; stopping the other ranks.*"), d.err());
    }

    @Test
    void workersThatFitTheCpusEachGetTheirOwnAndMoreWorkersAreLeftToTheScheduler() {
        List<Integer> mine = CpuBinding.allowed();
        org.junit.jupiter.api.Assumptions.assumeTrue(mine.size() >= 2 && CpuBinding.findTaskset() != null,
                "needs 2 CPUs and taskset");
        Captured c = new Captured();
        assertEquals(0, run(c, env(), "--nproc-per-node", "2", JobWorker.class.getName(), "cpus"), c.err());
        List<String> lists = new ArrayList<>();
        for (int r = 0; r < 2; r++) {
            Matcher m = Pattern.compile("\\[rank " + r + "\\] CPUS (\\S+)").matcher(c.out());
            assertTrue(m.find(), c.out());
            lists.add(m.group(1));
        }
        List<Integer> a = CpuBinding.parseList(lists.get(0));
        List<Integer> b = CpuBinding.parseList(lists.get(1));
        assertEquals(CpuBinding.slice(0, 2, mine), a);
        assertEquals(CpuBinding.slice(1, 2, mine), b);
        // more workers than CPUs, or --cpu-bind none: every worker may run on every CPU
        int many = mine.size() + 1;
        Captured d = new Captured();
        assertEquals(0, run(d, env(), "--nproc-per-node", Integer.toString(many), JobWorker.class.getName(), "cpus"),
                d.err());
        Captured e = new Captured();
        assertEquals(0, run(e, env(), "--nproc-per-node", "2", "--cpu-bind", "none", JobWorker.class.getName(), "cpus"),
                e.err());
        for (Captured x : List.of(d, e)) {
            Matcher m = Pattern.compile("CPUS (\\S+)").matcher(x.out());
            while (m.find()) {
                assertEquals(mine, CpuBinding.parseList(m.group(1)), x.out());
            }
        }
    }

    @Test
    void aMissingMainClassFailsClearly() {
        Captured c = new Captured();
        assertEquals(RunWorker.NO_MAIN_STATUS, run(c, env(), "--nproc-per-node", "1", "com.example.Nope"));
        assertTrue(c.err().contains("no class com.example.Nope on the class path"), c.err());
        Captured d = new Captured();
        assertEquals(2, run(d, env(), "--nproc-per-node", "1", "missing.jar"));
        assertTrue(d.err().contains("no such jar"), d.err());
    }

    @Test
    void leftoverProcessesAndSharedMemoryOfTheJobAreRemoved(@TempDir Path shm) throws Exception {
        Path other = Files.writeString(shm.resolve("jcomm-someone-else-1-named"), "keep");
        Captured c = new Captured();
        int code = run(c, env(), "--nproc-per-node", "2", "--shm-dir", shm.toString(), JobWorker.class.getName(),
                "litter", shm.toString(), "t1");
        assertEquals(0, code, c.err());
        List<Long> children = new ArrayList<>();
        Matcher m = Pattern.compile("CHILD (\\d+)").matcher(c.out());
        while (m.find()) {
            children.add(Long.parseLong(m.group(1)));
        }
        assertEquals(2, children.size(), c.out());
        for (long pid : children) {
            Optional<ProcessHandle> h = ProcessHandle.of(pid);
            assertFalse(h.isPresent() && h.get().isAlive() && h.get().info().command().orElse("").endsWith("sleep"),
                    "child " + pid + " of a worker was killed");
        }
        List<String> left;
        try (var s = Files.list(shm)) {
            left = s.map(p -> p.getFileName().toString()).sorted().toList();
        }
        assertEquals(List.of("jcomm-someone-else-1-named"), left, "only the job's entries were removed");
        assertEquals("keep", Files.readString(other));
        String err = c.err();
        assertTrue(err.contains("killed 2 leftover process(es) of the job"), err);
        assertTrue(err.contains("jcomm-test-mapped-t1-r0") && err.contains("jcomm-test-mapped-t1-r1"), err);
    }

    /** The launcher as its own JVM, so that it can be signalled. */
    private static Process launcher(String... args) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(JvmFlags.REQUIRED);
        cmd.addAll(List.of("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-cp", System.getProperty("java.class.path"),
                CommRun.class.getName()));
        cmd.addAll(List.of(args));
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
        pb.environment().remove("JCOMM_TOKEN_FILE");
        return pb.start();
    }

    /** Reads the launcher's output until {@code n} workers said READY; returns their pids. */
    private static List<Long> awaitReady(Process launcher, List<String> lines, int n) throws Exception {
        BufferedReader r = new BufferedReader(new InputStreamReader(launcher.getInputStream(), StandardCharsets.UTF_8));
        List<Long> pids = new ArrayList<>();
        Thread pump = new Thread(() -> {
            try {
                String line;
                while ((line = r.readLine()) != null) {
                    System.out.println("[launcher] " + line);
                    lines.add(line);
                }
            } catch (java.io.IOException ignored) {
                // gone
            }
        });
        pump.setDaemon(true);
        pump.start();
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
        while (pids.size() < n && System.nanoTime() < end) {
            pids.clear();
            synchronized (lines) {
                for (String l : lines) {
                    Matcher m = Pattern.compile("READY (\\d+)").matcher(l);
                    if (m.find()) {
                        pids.add(Long.parseLong(m.group(1)));
                    }
                }
            }
            Thread.sleep(20);
        }
        assertEquals(n, pids.size(), "workers did not start: " + lines);
        return pids;
    }

    private static boolean termLinesSeen(List<String> lines, List<Long> pids) {
        synchronized (lines) {
            return pids.stream().allMatch(pid -> lines.stream().anyMatch(l -> l.endsWith("TERM " + pid)))
                    && lines.stream().anyMatch(l -> l.contains("commrun: stopped on request"));
        }
    }

    private static void assertGone(List<Long> pids, long seconds) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        for (long pid : pids) {
            while (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false) && System.nanoTime() < end) {
                Thread.sleep(20);
            }
            assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "worker " + pid + " outlived its job");
        }
    }

    @Test
    void sigtermToTheLauncherIsForwardedToEveryWorker() throws Exception {
        Process p = launcher("--nproc-per-node", "2", "--grace", "5", JobWorker.class.getName(), "term");
        List<String> lines = Collections.synchronizedList(new ArrayList<>());
        try {
            List<Long> pids = awaitReady(p, lines, 2);
            p.toHandle().destroy(); // SIGTERM
            assertTrue(p.waitFor(30, TimeUnit.SECONDS));
            assertEquals(143, p.exitValue());
            assertGone(pids, 10);
            // the launcher's last lines may still be on their way through the pump thread
            long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
            while (System.nanoTime() < until && !termLinesSeen(lines, pids)) {
                Thread.sleep(20);
            }
            synchronized (lines) {
                for (long pid : pids) {
                    assertTrue(lines.stream().anyMatch(l -> l.endsWith("TERM " + pid)),
                            "worker " + pid + " ran its shutdown hook (got SIGTERM): " + lines);
                }
                assertTrue(lines.stream().anyMatch(l -> l.contains("commrun: stopped on request")), lines.toString());
            }
        } finally {
            p.toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
        }
    }

    @Test
    void workersDieWithAKilledLauncher() throws Exception {
        Process p = launcher("--nproc-per-node", "2", JobWorker.class.getName(), "sleep");
        List<String> lines = Collections.synchronizedList(new ArrayList<>());
        List<Long> pids = List.of();
        try {
            pids = awaitReady(p, lines, 2);
            p.toHandle().destroyForcibly(); // SIGKILL: no hook runs in the launcher
            assertTrue(p.waitFor(10, TimeUnit.SECONDS));
            assertGone(pids, 20);
        } finally {
            for (long pid : pids) {
                ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
            }
            p.destroyForcibly();
        }
    }

    private static String line(String out, String start) {
        for (String l : out.split("\n")) {
            if (l.startsWith(start)) {
                return l;
            }
        }
        throw new AssertionError("no line starting with '" + start + "' in\n" + out);
    }

    @Test
    void aFailedWorkerIsStartedAgainWithItsRankUntilTheRestartsAreUsedUp() {
        Captured c = new Captured();
        int code = run(c, env(), "--nproc-per-node", "3", "--max-restarts", "1", JobWorker.class.getName(), "replace", "1",
                "7", "1500");
        assertEquals(0, code, c.err());
        assertTrue(c.err().contains("commrun: rank 1 exited with 7; starting it again (restart 1 of 1, --max-restarts)"),
                c.err());
        assertTrue(c.out().contains("[rank 1] RESTARTED 1 count 1 recovery REPLACE"), c.out());
        assertTrue(c.err().contains("commrun: 3 ranks exited 0 (1 restart, --max-restarts 1)"), c.err());

        Captured twice = new Captured();
        code = run(twice, env(), "--nproc-per-node", "3", "--max-restarts", "1", "--grace", "1", JobWorker.class.getName(),
                "replace", "1", "7", "20000", "again");
        assertEquals(7, code, twice.err());
        assertTrue(twice.err().contains("commrun: rank 1 exited with 7; stopping the other ranks"), twice.err());
    }

    @Test
    void waitingSparesAreToldThroughTheStoreWhenTheWorkersAreDone() {
        Captured c = new Captured();
        long t0 = System.nanoTime();
        int code = run(c, env(), "--nproc-per-node", "2", "--spares", "2", JobWorker.class.getName(), "replace", "-1", "7",
                "500");
        double seconds = (System.nanoTime() - t0) / 1e9;
        assertEquals(0, code, c.err());
        for (int i = 0; i < 2; i++) {
            assertTrue(c.out().contains("[spare " + i + "] SPARE TOLD"), c.out());
        }
        assertTrue(c.err().contains("commrun: 2 ranks exited 0"), c.err());
        assertTrue(seconds < 9, "the spares exited by themselves, before the 10 s grace: " + seconds + " s");
        assertTrue(c.err().contains("no processes or /dev/shm files left behind"), c.err());

        Captured both = new Captured();
        assertEquals(2, run(both, env(), "--nproc-per-node", "2", "--spares", "1", "--max-restarts", "1",
                JobWorker.class.getName(), "replace", "-1", "7", "10"));
        assertTrue(both.err().contains("choose one"), both.err());
        Captured nodes = new Captured();
        assertEquals(2, run(nodes, env(), "--nproc-per-node", "2", "--nnodes", "2:x", JobWorker.class.getName(), "sleep"));
        assertTrue(nodes.err().contains("--nnodes must be N or MIN:MAX"), nodes.err());
    }
}
