package io.jcomm.it.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Two hosts in network namespaces joined by a veth pair (10.77.x.1 and 10.77.x.2, nothing else
 * reachable between them), one {@code commrun --nnodes 2} per host with distinct {@code JCOMM_HOST_ID}s,
 * two worker JVMs each: the demo as TP2 x PP2 (the pipeline crosses the hosts) and TP4 x PP1 (the
 * tensor-parallel group and its broadcaster cross them), then a link cut in the middle of a TP2 x PP2 run:
 * both sides must exit with typed errors within the timeout + 2 s. Logs in {@code target/twohost-*.log}.
 */
@Timeout(value = 300)
class TwoHostIT {

    private static final long CUT_TIMEOUT_MS = 10_000;
    private static final Pattern TYPED = Pattern.compile("io\\.jcomm\\.api\\.(CommTimeoutException|PeerFailureException"
            + "|CommClosedException|StoreException)");

    private static String prefix() {
        return "jc" + ProcessHandle.current().pid() % 100_000;
    }

    @Test
    void pipelineAcrossTwoHosts() throws Exception {
        demoAcrossTwoHosts(2, 2);
    }

    @Test
    void tensorParallelAcrossTwoHosts() throws Exception {
        demoAcrossTwoHosts(4, 1);
    }

    /** The demo as TP {@code tp} x PP {@code pp} on two hosts of two ranks each: exit 0, every value exact. */
    private static void demoAcrossTwoHosts(int tp, int pp) throws Exception {
        try (NetnsHosts h = NetnsHosts.create(prefix())) {
            Path[] logs = runBoth(h, "tp" + tp + "pp" + pp, Map.of(), List.of("demo", "--tp", Integer.toString(tp), "--pp",
                    Integer.toString(pp), "--steps", "300", "--warmup", "30"), 150);
            String node0 = Files.readString(logs[0]);
            assertTrue(node0.contains("TP=" + tp + " x PP=" + pp + " (DP=1) on 4 ranks, 2 hosts"), node0);
            assertTrue(node0.contains("all exact"), node0);
        }
    }

    @Test
    void aCutLinkFailsBothSidesWithTypedErrorsInTime() throws Exception {
        try (NetnsHosts h = NetnsHosts.create(prefix())) {
            Path[] logs = new Path[2];
            Process[] p = new Process[2];
            for (int n = 0; n < 2; n++) {
                logs[n] = log("cut", n);
                p[n] = h.start(n + 1, commrun(h, n, List.of("demo", "--tp", "2", "--pp", "2", "--steps", "100000000",
                        "--warmup", "30", "--phases"), 200), Map.of("JCOMM_HOST_ID", "h" + (n + 1), "JCOMM_TIMEOUT_MS",
                        Long.toString(CUT_TIMEOUT_MS)), logs[n]);
            }
            try {
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
                while (!(stepping(logs[0]) && stepping(logs[1]))) {
                    assertTrue(System.nanoTime() < end && p[0].isAlive() && p[1].isAlive(),
                            "the job did not reach its steps:\n" + Files.readString(logs[0]) + Files.readString(logs[1]));
                    Thread.sleep(50);
                }
                Thread.sleep(1000);
                long cut = System.nanoTime();
                h.cut();
                long[] ms = {-1, -1};
                long limit = cut + TimeUnit.MILLISECONDS.toNanos(CUT_TIMEOUT_MS + 10_000);
                while ((ms[0] < 0 || ms[1] < 0) && System.nanoTime() - limit < 0) {
                    for (int n = 0; n < 2; n++) {
                        if (ms[n] < 0 && !p[n].isAlive()) {
                            ms[n] = (System.nanoTime() - cut) / 1_000_000;
                        }
                    }
                    Thread.sleep(10);
                }
                for (int n = 0; n < 2; n++) {
                    String out = Files.readString(logs[n]);
                    assertTrue(ms[n] >= 0, "host " + (n + 1) + " still runs " + (CUT_TIMEOUT_MS + 10_000) + " ms after the cut:\n"
                            + out);
                    System.out.println("two hosts: host " + (n + 1) + " exited " + p[n].exitValue() + " " + ms[n]
                            + " ms after the cut");
                    assertTrue(p[n].exitValue() != 0, out);
                    assertTrue(TYPED.matcher(out).find(), "host " + (n + 1) + " exited without a typed error:\n" + out);
                    assertTrue(ms[n] <= CUT_TIMEOUT_MS + 2000, "host " + (n + 1) + " exited " + ms[n] + " ms after the cut");
                }
            } finally {
                for (Process q : p) {
                    q.toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
                    q.destroyForcibly();
                }
            }
        }
    }

    /**
     * Two DP replicas of TP 2, one per host, serving ({@code demo --elastic}); the link is cut: the store's host
     * sees the other host's ranks neither answer nor die, counts them lost after the roll call's grace, and its
     * replica shrinks and serves every request with every value checked; the cut-off host fails typed.
     */
    @Test
    void aCutLinkLeavesTheStoreHostsReplicaServing() throws Exception {
        try (NetnsHosts h = NetnsHosts.create(prefix())) {
            Path[] logs = new Path[2];
            Process[] p = startElastic(h, "elastic-cut", "2", 4000, logs);
            try {
                long cut = System.nanoTime();
                h.cut();
                assertTrue(p[0].waitFor(90, TimeUnit.SECONDS), "the store's host did not finish:\n" + Files.readString(logs[0]));
                long ms0 = (System.nanoTime() - cut) / 1_000_000;
                assertTrue(p[1].waitFor(60, TimeUnit.SECONDS), "the cut-off host still runs:\n" + Files.readString(logs[1]));
                String out0 = Files.readString(logs[0]);
                String out1 = Files.readString(logs[1]);
                System.out.println("two hosts, elastic: the store's host finished " + ms0 + " ms after the cut, exit "
                        + p[0].exitValue() + "; the other exit " + p[1].exitValue());
                assertEquals(0, p[0].exitValue(), out0);
                assertTrue(out0.contains("values: all exact") && out0.contains("recoveries: 1")
                        && out0.contains("2 rank(s) at the end"), out0);
                assertTrue(out0.contains("lost [2, 3]"), out0);
                assertTrue(p[1].exitValue() != 0, out1);
                assertTrue(TYPED.matcher(out1).find() || out1.contains("io.jcomm.parallel.NoReplicaLeftException"),
                        "the cut-off host exited without a typed error:\n" + out1);
            } finally {
                for (Process q : p) {
                    q.toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
                    q.destroyForcibly();
                }
            }
        }
    }

    /**
     * {@code --nnodes 1:2}: the whole second host dies (its launcher and workers killed with SIGKILL) while a DP2
     * elastic job serves; the first host's launcher says the node was lost and goes on, its replica shrinks and
     * serves every request.
     */
    @Test
    void anElasticJobGoesOnWithoutALostNode() throws Exception {
        try (NetnsHosts h = NetnsHosts.create(prefix())) {
            Path[] logs = new Path[2];
            Process[] p = startElastic(h, "elastic-node", "1:2", 10_000, logs);
            try {
                long killed = System.nanoTime();
                p[1].toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
                p[1].destroyForcibly();
                assertTrue(p[0].waitFor(90, TimeUnit.SECONDS), "the first host did not finish:\n" + Files.readString(logs[0]));
                long ms = (System.nanoTime() - killed) / 1_000_000;
                String out0 = Files.readString(logs[0]);
                System.out.println("two hosts, node lost: the first host finished " + ms + " ms after the kill, exit "
                        + p[0].exitValue());
                assertEquals(0, p[0].exitValue(), out0);
                assertTrue(out0.contains("commrun: node 1 was lost") && out0.contains("1 of 2 nodes left"), out0);
                assertTrue(out0.contains("values: all exact") && out0.contains("recoveries: 1")
                        && out0.contains("lost [2, 3]"), out0);
            } finally {
                for (Process q : p) {
                    q.toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
                    q.destroyForcibly();
                }
            }
        }
    }

    /**
     * Starts {@code demo --elastic --tp 2} on both hosts ({@code --nnodes nodes}, op deadline {@code timeoutMs}) and
     * returns once both serve, 300 ms in; the logs go to {@code logs}.
     */
    private static Process[] startElastic(NetnsHosts h, String name, String nodes, long timeoutMs, Path[] logs)
            throws Exception {
        Process[] p = new Process[2];
        try {
            for (int n = 0; n < 2; n++) {
                logs[n] = log(name, n);
                List<String> cmd = new ArrayList<>(commrun(h, n, List.of("demo", "--elastic", "--tp", "2", "--steps",
                        "40000", "--hidden", "256"), 200));
                cmd.set(cmd.indexOf("--nnodes") + 1, nodes);
                p[n] = h.start(n + 1, cmd, Map.of("JCOMM_HOST_ID", "h" + (n + 1), "JCOMM_TIMEOUT_MS",
                        Long.toString(timeoutMs)), logs[n]);
            }
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (!(serving(logs[0]) && serving(logs[1]))) {
                assertTrue(System.nanoTime() < end && p[0].isAlive() && p[1].isAlive(),
                        "the job did not start serving:\n" + Files.readString(logs[0]) + Files.readString(logs[1]));
                Thread.sleep(20);
            }
            Thread.sleep(300);
            return p;
        } catch (Exception | AssertionError e) {
            for (Process q : p) {
                if (q != null) {
                    q.toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
                    q.destroyForcibly();
                }
            }
            throw e;
        }
    }

    private static boolean serving(Path log) throws java.io.IOException {
        return Files.exists(log) && Files.readString(log).split("demo: elastic serving", -1).length >= 3;
    }

    private static boolean stepping(Path log) throws java.io.IOException {
        return Files.exists(log) && Files.readString(log).contains("demo: phase steps");
    }

    /** Runs both nodes to the end; asserts that both exit 0 within {@code seconds}. */
    private static Path[] runBoth(NetnsHosts h, String name, Map<String, String> env, List<String> target, int seconds)
            throws Exception {
        Path[] logs = new Path[2];
        Process[] p = new Process[2];
        try {
            for (int n = 0; n < 2; n++) {
                logs[n] = log(name, n);
                Map<String, String> e = new java.util.HashMap<>(env);
                e.put("JCOMM_HOST_ID", "h" + (n + 1));
                p[n] = h.start(n + 1, commrun(h, n, target, seconds), e, logs[n]);
            }
            for (int n = 0; n < 2; n++) {
                assertTrue(p[n].waitFor(seconds + 20, TimeUnit.SECONDS), "node " + n + " did not finish:\n" + Files.readString(logs[n]));
                assertEquals(0, p[n].exitValue(), "node " + n + " failed:\n" + Files.readString(logs[n]));
            }
            return logs;
        } finally {
            for (Process q : p) {
                if (q != null) {
                    q.toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
                    q.destroyForcibly();
                }
            }
        }
    }

    private static Path log(String name, int node) throws java.io.IOException {
        Files.createDirectories(Path.of("target"));
        return Path.of("target", "twohost-" + name + "-node" + node + ".log").toAbsolutePath();
    }

    /** {@code commrun} of node {@code node} (a JVM of its own, on the test class path). */
    private static List<String> commrun(NetnsHosts h, int node, List<String> target, int seconds) {
        List<String> cmd = new ArrayList<>(NetnsHosts.commrunJvm());
        cmd.addAll(List.of("--nnodes", "2", "--node-rank", Integer.toString(node), "--master-addr", h.addr1, "--master-port",
                "29600", "--nproc-per-node", "2", "--timeout", Integer.toString(seconds)));
        cmd.addAll(target);
        return cmd;
    }
}
