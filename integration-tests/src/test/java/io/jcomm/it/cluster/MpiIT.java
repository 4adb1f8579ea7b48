package io.jcomm.it.cluster;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.it.reliability.NetnsHosts;
import io.jcomm.testkit.Requirements;
import io.jcomm.tools.bench.WorkerJvms;
import io.jcomm.tools.demo.PipelineDemo;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * jcomm jobs started by Open MPI's {@code mpirun}, unchanged: each JVM reads its rank, local rank and world
 * from {@code OMPI_COMM_WORLD_*}. On one host (no {@code MASTER_ADDR} needed: every rank is local) and on two
 * hosts in network namespaces (a hostfile, {@code plm_rsh_agent} entering each namespace, {@code -x
 * MASTER_ADDR}); a rank killed with SIGKILL under {@code --enable-recovery}: the others fail typed, or with
 * {@code --elastic} recover; afterwards no process of the job is left. Logs in {@code target/mpi-*.log}.
 */
@Timeout(value = 300)
class MpiIT {

    private static final Path MPIRUN = Path.of("/usr/bin/mpirun");
    private static final Pattern TYPED = Pattern.compile("io\\.jcomm\\.api\\.(CommTimeoutException|PeerFailureException"
            + "|CommClosedException|StoreException)");

    @BeforeAll
    static void needMpirun() {
        Requirements.assume("mpi", Files.isExecutable(MPIRUN), "no mpirun (apt-get install openmpi-bin)");
    }

    /** A run's marker, in every rank's environment ({@code -x}), to find its processes. */
    private final String marker = "JCOMM_IT_RUN=" + UUID.randomUUID();

    private List<String> mpirun(int np, String... extra) {
        // rtc_hwloc_vmhole=none: Open MPI 4.1's daemons otherwise write the host topology into shared memory at
        // an address they pick from their own map, and a daemon started in the second namespace segfaulted in
        // hwloc_shmem_topology_write once (a CI run); without it each daemon reads the topology itself
        List<String> cmd = new ArrayList<>(List.of(MPIRUN.toString(), "--allow-run-as-root", "--oversubscribe",
                "--mca", "rtc_hwloc_vmhole", "none", "-np", Integer.toString(np), "-x", marker.substring(0, marker.indexOf('='))));
        cmd.addAll(List.of(extra));
        return cmd;
    }

    private static List<String> demo(String... args) {
        List<String> cmd = new ArrayList<>(WorkerJvms.javaCommand(List.of("-Xmx256m", "-XX:+UseSerialGC",
                "-XX:TieredStopAtLevel=1"), PipelineDemo.class));
        cmd.addAll(List.of(args));
        return cmd;
    }

    private Process start(List<String> prefix, List<String> command, Path log) throws Exception {
        List<String> cmd = new ArrayList<>(prefix);
        cmd.addAll(command);
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
        pb.environment().remove("JCOMM_TOKEN_FILE");
        pb.environment().put(marker.substring(0, marker.indexOf('=')), marker.substring(marker.indexOf('=') + 1));
        return pb.start();
    }

    private static Path log(String name) throws Exception {
        Files.createDirectories(Path.of("target"));
        Path p = Path.of("target", "mpi-" + name + ".log").toAbsolutePath();
        Files.deleteIfExists(p);
        return p;
    }

    @Test
    void fourRanksOnOneHost() throws Exception {
        List<String> cmd = mpirun(4);
        cmd.addAll(demo("--tp", "2", "--pp", "2", "--steps", "200", "--warmup", "20"));
        Path log = log("one-host");
        Process p = start(List.of(), cmd, log);
        String out = awaitExit(p, log, 180);
        assertEquals(0, p.exitValue(), out);
        assertTrue(out.contains("TP=2 x PP=2 (DP=1) on 4 ranks, 1 host"), out);
        assertTrue(out.contains("launched by mpi (Open MPI): rank 0 of 4 (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)"), out);
        assertTrue(out.contains("master 127.0.0.1:"), out);
        assertTrue(out.contains("all exact"), out);
        assertNothingLeft();
    }

    @Test
    void fourRanksOnTwoHosts() throws Exception {
        try (NetnsHosts h = NetnsHosts.create("jmp" + ProcessHandle.current().pid() % 10_000)) {
            Path dir = Files.createTempDirectory("jcomm-mpi-");
            try {
                // what ssh would do on a real cluster: run orted on the named host (here, in its namespace), where the
                // host identity differs as on another machine
                Path agent = dir.resolve("rsh-agent.sh");
                Files.writeString(agent, "#!/bin/bash\nh=\"$1\"; shift\nexec nsenter --net=/var/run/netns/" + h.prefix
                        + "-h${h#n} env JCOMM_HOST_ID=\"$h\" /bin/sh -c \"$*\"\n");
                Files.setPosixFilePermissions(agent, PosixFilePermissions.fromString("rwxr-xr-x"));
                Path hostfile = dir.resolve("hostfile");
                Files.writeString(hostfile, "n1 slots=2\nn2 slots=2\n");
                String subnet = h.addr1.substring(0, h.addr1.lastIndexOf('.')) + ".0/24";
                List<String> cmd = mpirun(4, "--hostfile", hostfile.toString(), "--mca", "plm_rsh_agent", agent.toString(),
                        "--mca", "oob_tcp_if_include", subnet, "--mca", "btl_tcp_if_include", subnet, "-x",
                        "MASTER_ADDR=" + h.addr1);
                cmd.addAll(demo("--tp", "2", "--pp", "2", "--steps", "200", "--warmup", "20"));
                Path log = log("two-hosts");
                Process p = start(h.nsenter(1), cmd, log);
                String out = awaitExit(p, log, 180);
                assertEquals(0, p.exitValue(), out);
                assertTrue(out.contains("TP=2 x PP=2 (DP=1) on 4 ranks, 2 hosts"), out);
                assertTrue(out.contains("local 0 of 2 (OMPI_COMM_WORLD_LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_SIZE), master "
                        + h.addr1 + ":"), out);
                assertTrue(out.contains("all exact"), out);
                assertNothingLeft();
            } finally {
                try (var s = Files.walk(dir)) {
                    s.sorted(java.util.Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
                }
            }
        }
    }

    /** {@code --enable-recovery} keeps mpirun from killing the others: they see the death and fail typed. */
    @Test
    void aKilledRankFailsTheOthersTyped() throws Exception {
        List<String> cmd = mpirun(4, "--enable-recovery", "--tag-output", "-x", "JCOMM_TIMEOUT_MS=20000");
        cmd.addAll(demo("--tp", "2", "--pp", "2", "--steps", "100000000", "--warmup", "20", "--phases"));
        Path log = log("kill");
        Process p = start(List.of(), cmd, log);
        try {
            SlurmIT.awaitText(log, p, "demo: phase steps", 4, 120);
            Thread.sleep(500);
            long t = System.nanoTime();
            kill(2);
            String out = awaitExit(p, log, 60);
            long ms = (System.nanoTime() - t) / 1_000_000;
            System.out.println("mpi: mpirun ended " + ms + " ms after rank 2 was killed, exit " + p.exitValue());
            for (int r : new int[] {0, 1, 3}) {
                String tag = "," + r + "]<std"; // --tag-output: [job,rank]<stdout>:
                assertTrue(out.lines().anyMatch(l -> l.contains(tag) && TYPED.matcher(l).find()), "rank " + r
                        + " ended without a typed error:\n" + out);
            }
            assertTrue(ms < 20_000, "the others took " + ms + " ms, not less than their timeout");
        } finally {
            p.destroyForcibly();
        }
        assertNothingLeft();
    }

    /** {@code demo --elastic} as DP2 x TP2 under {@code --enable-recovery}: rank 3 killed, the other replica serves. */
    @Test
    void aKilledRankLeavesAnElasticJobServing() throws Exception {
        List<String> cmd = mpirun(4, "--enable-recovery");
        cmd.addAll(demo("--elastic", "--tp", "2", "--steps", "6000", "--hidden", "256"));
        Path log = log("elastic");
        Process p = start(List.of(), cmd, log);
        try {
            SlurmIT.awaitText(log, p, "demo: elastic serving", 4, 120);
            Thread.sleep(300);
            kill(3);
            String out = awaitExit(p, log, 120);
            assertTrue(out.contains("all exact") && out.contains("recoveries: 1") && out.contains("ranks [3] lost"), out);
            assertTrue(out.contains("2 rank(s) at the end"), out);
        } finally {
            p.destroyForcibly();
        }
        assertNothingLeft();
    }

    private void kill(int rank) {
        List<ProcessHandle> victims = ours().stream().filter(q -> SlurmCluster.environ(q.pid())
                .contains("\0OMPI_COMM_WORLD_RANK=" + rank + "\0") && q.info().command().map(c -> c.endsWith("/java"))
                .orElse(false)).toList();
        assertEquals(1, victims.size(), "rank " + rank + ": " + victims);
        victims.get(0).destroyForcibly();
    }

    private static String awaitExit(Process p, Path log, int seconds) throws Exception {
        if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
            p.toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
            throw new AssertionError("mpirun did not end in " + seconds + " s:\n" + Files.readString(log));
        }
        return Files.readString(log);
    }

    /** This run's processes (its marker in their environment), the test JVM aside. */
    private List<ProcessHandle> ours() {
        List<ProcessHandle> out = new ArrayList<>();
        ProcessHandle.allProcesses().forEach(q -> {
            if (q.pid() != ProcessHandle.current().pid() && SlurmCluster.environ(q.pid()).contains("\0" + marker + "\0")) {
                out.add(q);
            }
        });
        return out;
    }

    private void assertNothingLeft() throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(15);
        List<ProcessHandle> left = ours();
        while (!left.isEmpty() && System.nanoTime() - end < 0) {
            Thread.sleep(100);
            left = ours();
        }
        List<ProcessHandle> leftover = left;
        leftover.forEach(ProcessHandle::destroyForcibly);
        assertTrue(leftover.isEmpty(), "processes left: " + leftover.stream().map(q -> q.pid() + " "
                + q.info().commandLine().orElse("?")).toList());
    }
}
