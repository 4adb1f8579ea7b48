package io.jcomm.it.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.tools.bench.WorkerJvms;
import io.jcomm.tools.demo.PipelineDemo;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * jcomm jobs started by a real Slurm ({@link SlurmCluster}: two nodes in network namespaces), unchanged: the
 * demo's JVMs read their rank, their node and rank 0's address from what {@code srun} gives each task.
 * Both shapes of a Slurm job: one task per rank ({@code srun java ... PipelineDemo}), and one
 * {@code bin/commrun} per node ({@code srun --ntasks-per-node 1 bin/commrun}, here from an {@code sbatch}
 * script); a rank killed with SIGKILL, with the other ranks failing typed or, with {@code --elastic},
 * recovering; after each job no task or step daemon is left. Logs in {@code target/slurm-*.log}.
 */
@Timeout(value = 600)
class SlurmIT {

    private static final Pattern TYPED = Pattern.compile("io\\.jcomm\\.api\\.(CommTimeoutException|PeerFailureException"
            + "|CommClosedException|StoreException)");
    private static SlurmCluster cluster;

    @BeforeAll
    static void startCluster() throws Exception {
        cluster = SlurmCluster.start("jsl" + ProcessHandle.current().pid() % 10_000);
    }

    @AfterAll
    static void stopCluster() throws Exception {
        if (cluster != null) {
            cluster.close();
            cluster = null;
        }
    }

    /** {@code java ... PipelineDemo <args>} as a Slurm task runs it: the test's class path and JVM. */
    private static List<String> demoTask(String... args) {
        List<String> cmd = new ArrayList<>(WorkerJvms.javaCommand(List.of("-Xmx256m", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1", cluster.hostsFileFlag()), PipelineDemo.class));
        cmd.addAll(List.of(args));
        return cmd;
    }

    private static Path log(String name) throws Exception {
        Files.createDirectories(Path.of("target"));
        Path p = Path.of("target", "slurm-" + name + ".log").toAbsolutePath();
        Files.deleteIfExists(p);
        return p;
    }

    private static String runToEnd(List<String> command, String name, int seconds) throws Exception {
        Path log = log(name);
        Process p = cluster.start(command, Map.of(), log);
        try {
            assertTrue(p.waitFor(seconds, TimeUnit.SECONDS), name + " did not end in " + seconds + " s:\n"
                    + Files.readString(log));
        } finally {
            p.destroyForcibly();
        }
        String out = Files.readString(log);
        assertEquals(0, p.exitValue(), name + " failed:\n" + out + cluster.logs());
        assertNothingLeft(name);
        return out;
    }

    private static void assertNothingLeft(String name) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        List<ProcessHandle> left = cluster.leftovers();
        while (!left.isEmpty() && System.nanoTime() - end < 0) {
            Thread.sleep(100);
            left = cluster.leftovers();
        }
        assertTrue(left.isEmpty(), name + " left processes: " + left.stream().map(p -> p.pid() + " "
                + p.info().commandLine().orElse("?")).toList());
    }

    @Test
    void fourTasksOnOneNode() throws Exception {
        List<String> cmd = new ArrayList<>(List.of("srun", "-N", "1", "-n", "4", "--nodelist", "n1"));
        cmd.addAll(demoTask("--tp", "2", "--pp", "2", "--steps", "200", "--warmup", "20"));
        String out = runToEnd(cmd, "one-node", 180);
        assertTrue(out.contains("TP=2 x PP=2 (DP=1) on 4 ranks, 1 host"), out);
        assertTrue(out.contains("launched by slurm: rank 0 of 4 (SLURM_PROCID, SLURM_STEP_NUM_TASKS), local 0 of 4"), out);
        assertTrue(out.contains("master n1:"), out);
        assertTrue(out.contains("all exact"), out);
    }

    @Test
    void aTaskPerRankOnTwoNodes() throws Exception {
        List<String> cmd = new ArrayList<>(List.of("srun", "-N", "2", "--ntasks-per-node", "2"));
        cmd.addAll(demoTask("--tp", "2", "--pp", "2", "--steps", "200", "--warmup", "20"));
        String out = runToEnd(cmd, "two-nodes", 180);
        assertTrue(out.contains("TP=2 x PP=2 (DP=1) on 4 ranks, 2 hosts"), out);
        assertTrue(out.contains("launched by slurm: rank 0 of 4 (SLURM_PROCID, SLURM_STEP_NUM_TASKS), local 0 of 2"), out);
        assertTrue(out.contains("node 0 of 2"), out);
        assertTrue(out.contains("all exact"), out);
    }

    /** {@code sbatch} runs a script whose {@code srun} starts one {@code bin/commrun} per node. */
    @Test
    void aCommrunPerNodeFromABatchScript() throws Exception {
        Path out = log("sbatch");
        Path script = cluster.dir.resolve("jobs").resolve("commrun-per-node.sh");
        String commrun = Path.of("..", "bin", "commrun").toAbsolutePath().normalize().toString();
        Files.writeString(script, String.join("\n",
                "#!/bin/bash",
                "#SBATCH --nodes=2",
                "#SBATCH --ntasks-per-node=1",
                "#SBATCH --output=" + out,
                "export JCOMM_NO_BUILD=1",
                "export JCOMM_JAVA_OPTS=\"-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Xmx256m " + cluster.hostsFileFlag() + "\"",
                "srun " + commrun + " --jvm-arg=" + cluster.hostsFileFlag() + " --nproc-per-node 2 demo --tp 2 --pp 2 "
                        + "--steps 200 --warmup 20", ""));
        Path submit = log("sbatch-submit");
        Process p = cluster.start(List.of("sbatch", "--wait", script.toString()), Map.of(), submit);
        try {
            assertTrue(p.waitFor(240, TimeUnit.SECONDS), "the batch job did not end:\n" + Files.readString(submit));
        } finally {
            p.destroyForcibly();
        }
        String text = Files.exists(out) ? Files.readString(out) : "(no output)";
        assertEquals(0, p.exitValue(), Files.readString(submit) + text + cluster.logs());
        assertTrue(text.contains("commrun: slurm: rank 0 of 2"), text);
        assertTrue(text.contains("node 0 of 2 (SLURM_NODEID, SLURM_STEP_NUM_NODES), master n1:"), text);
        assertTrue(text.contains("[rank 0] jcomm pipeline demo: TP=2 x PP=2 (DP=1) on 4 ranks, 2 hosts"), text);
        assertTrue(text.contains("launched by torchrun: rank 0 of 4"), text);
        assertTrue(text.contains("inside slurm task 0 of 2"), text);
        assertTrue(text.contains("all exact"), text);
        assertEquals(2, text.split("no processes or /dev/shm files left behind", -1).length - 1, text);
        assertNothingLeft("sbatch");
    }

    /** A rank killed with SIGKILL: the other three fail with typed errors, and the step ends. */
    @Test
    void aKilledRankFailsTheOthersTyped() throws Exception {
        List<String> cmd = new ArrayList<>(List.of("srun", "--label", "-N", "2", "--ntasks-per-node", "2"));
        cmd.addAll(demoTask("--tp", "2", "--pp", "2", "--steps", "100000000", "--warmup", "20", "--phases"));
        Path log = log("kill");
        Process p = cluster.start(cmd, Map.of("JCOMM_TIMEOUT_MS", "20000"), log);
        try {
            awaitText(log, p, "demo: phase steps", 4, 120);
            Thread.sleep(500);
            long killed = kill(2);
            assertTrue(p.waitFor(60, TimeUnit.SECONDS), "the step still runs a minute after the kill:\n"
                    + Files.readString(log));
            long ms = (System.nanoTime() - killed) / 1_000_000;
            String out = Files.readString(log);
            System.out.println("slurm: the step ended " + ms + " ms after rank 2 was killed, srun exit " + p.exitValue());
            assertTrue(p.exitValue() != 0, out);
            for (int r : new int[] {0, 1, 3}) {
                assertTrue(labelled(out, r).anyMatch(l -> TYPED.matcher(l).find()), "rank " + r + " ended without a "
                        + "typed error:\n" + out);
            }
            assertTrue(ms < 20_000, "the others took " + ms + " ms, not less than their timeout");
        } finally {
            p.destroyForcibly();
        }
        assertNothingLeft("kill");
    }

    /** {@code demo --elastic} as DP2 x TP2, one task per rank: rank 3 killed, its replica leaves, the other serves. */
    @Test
    void aKilledRankLeavesAnElasticJobServing() throws Exception {
        List<String> cmd = new ArrayList<>(List.of("srun", "--label", "-N", "2", "--ntasks-per-node", "2"));
        cmd.addAll(demoTask("--elastic", "--tp", "2", "--steps", "6000", "--hidden", "256"));
        Path log = log("elastic");
        Process p = cluster.start(cmd, Map.of("JCOMM_RECOVERY", "shrink"), log);
        try {
            awaitText(log, p, "demo: elastic serving", 4, 120);
            Thread.sleep(300);
            kill(3);
            assertTrue(p.waitFor(120, TimeUnit.SECONDS), "the elastic job did not end:\n" + Files.readString(log));
            String out = Files.readString(log);
            assertTrue(out.contains("values: all exact") || out.contains("all exact"), out);
            assertTrue(out.contains("recoveries: 1"), out);
            assertTrue(out.contains("ranks [3] lost"), out);
            assertTrue(out.contains("2 rank(s) at the end"), out);
        } finally {
            p.destroyForcibly();
        }
        assertNothingLeft("elastic");
    }

    /**
     * One {@code bin/commrun --max-lost 2} per node under {@code srun}, {@code demo --elastic}: a worker of node 2
     * killed, its replica leaves, node 1's replica serves to the end and its commrun exits 0.
     */
    @Test
    void aCommrunPerNodeKeepsAnElasticJobServing() throws Exception {
        String commrun = Path.of("..", "bin", "commrun").toAbsolutePath().normalize().toString();
        List<String> cmd = List.of("srun", "--label", "-N", "2", "--ntasks-per-node", "1", commrun, "--jvm-arg="
                + cluster.hostsFileFlag(), "--nproc-per-node", "2", "--max-lost", "2", "demo", "--elastic", "--tp", "2",
                "--steps", "6000", "--hidden", "256");
        Path log = log("commrun-elastic");
        Process p = cluster.start(cmd, Map.of("JCOMM_NO_BUILD", "1", "JCOMM_JAVA_OPTS", "-XX:+UseSerialGC "
                + "-XX:TieredStopAtLevel=1 -Xmx256m " + cluster.hostsFileFlag()), log);
        try {
            awaitText(log, p, "demo: elastic serving", 4, 120);
            Thread.sleep(300);
            long victim = workerOfRank(3);
            ProcessHandle.of(victim).ifPresent(ProcessHandle::destroyForcibly);
            assertTrue(p.waitFor(120, TimeUnit.SECONDS), "the elastic job did not end:\n" + Files.readString(log));
            String out = Files.readString(log);
            assertTrue(out.contains("recoveries: 1") && out.contains("ranks [3] lost"), out);
            assertTrue(out.contains("all exact"), out);
            assertTrue(out.contains("0: commrun: 2 ranks exited 0"), out);
            assertTrue(out.contains("1: commrun: 1 of 2 ranks exited 0, 1 lost (rank 3 exit 137"), out);
        } finally {
            p.destroyForcibly();
        }
        assertNothingLeft("commrun-elastic");
    }

    /** The commrun worker JVM whose environment says {@code RANK=rank} (commrun's workers are not Slurm tasks). */
    private static long workerOfRank(int rank) {
        for (ProcessHandle p : cluster.leftovers()) {
            String env = SlurmCluster.environ(p.pid());
            if (env.contains("\0RANK=" + rank + "\0") && env.contains("\0JCOMM_LAUNCHER_STORE=1\0")
                    && p.info().command().map(c -> c.endsWith("/java")).orElse(false)) {
                return p.pid();
            }
        }
        throw new AssertionError("no worker JVM of rank " + rank);
    }

    private static long kill(int procId) {
        List<Long> pids = cluster.tasks(procId);
        assertEquals(1, pids.size(), "task " + procId + ": " + pids);
        long t = System.nanoTime();
        ProcessHandle.of(pids.get(0)).ifPresent(ProcessHandle::destroyForcibly);
        return t;
    }

    /** Waits until {@code text} appears {@code times} times in {@code log}. */
    static void awaitText(Path log, Process p, String text, int times, int seconds) throws Exception {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (true) {
            String out = Files.exists(log) ? Files.readString(log) : "";
            if (out.split(Pattern.quote(text), -1).length - 1 >= times) {
                return;
            }
            assertTrue(p.isAlive() && System.nanoTime() - end < 0, "'" + text + "' did not appear " + times + " times:\n"
                    + out);
            Thread.sleep(50);
        }
    }

    /** The lines {@code srun --label} prefixed with task {@code rank}'s label. */
    private static java.util.stream.Stream<String> labelled(String out, int rank) {
        Pattern label = Pattern.compile("^\\s*" + rank + ": ");
        return out.lines().filter(l -> {
            Matcher m = label.matcher(l);
            return m.find();
        });
    }
}
