package io.jcomm.it.transfer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.runtime.shm.ShmFiles;
import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import io.jcomm.it.reliability.NetnsHosts;
import io.jcomm.testkit.MultiJvm;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Three JVMs, three transfer agents ("decode" owns memory; "prefill" writes and reads it and is
 * killed; "prefill-2" comes after it) that find each other through a real TCP store with a job
 * token: every byte of permuted block writes over tcp (heap region) and into a shared region checked
 * on both sides, notifications, refused out-of-range, read-only and stale descriptors writing
 * nothing; {@code kill -9} of the initiator mid-stream leaving the owner's other regions byte for
 * byte intact, the region being written deregistered within 2 s and no thread serving the dead
 * initiator, then a second initiator's write, read and notification served; and {@code kill -9} of
 * the owner mid-stream failing that initiator's pending transfers with a PeerFailureException within a
 * second. Once on one host (the shared region over shm), once across two network namespaces with
 * distinct host ids, the store and the owner on one, the initiators on the other (everything over tcp,
 * none of the owner's files mapped; skipped without root, except under CI). The killed agents'
 * shared-memory directories are removed by the clean-up of the next agent's start, and checked gone.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class TransferIT {

    private static final String TOKEN = "transfer-it-job-token-0123456789";
    private static final int OWNER = 0;
    private static final int FIRST = 1;
    private static final int SECOND = 2;
    private static final int STORE = 3;

    /** The three workers, wherever they run. */
    private interface Workers {
        String awaitLine(int who, Predicate<String> match, Duration timeout) throws Exception;

        void kill(int who);

        String output(int who) throws IOException;

        /** Waits for {@code who} to exit; its exit code. */
        int awaitExit(int who, Duration timeout) throws Exception;
    }

    @Test
    void threeAgentsInThreeJvmsWriteReadRefuseAndSurviveKilledPeers(@TempDir Path dir) throws Exception {
        Path token = token(dir);
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().name("transfer-store")
                .token(TOKEN.getBytes(StandardCharsets.US_ASCII)).build());
             MultiJvm job = MultiJvm.builder().name("transfer").worldSize(3).mainClass(TransferWorker.class)
                     .argsForRank(r -> List.of(role(r), token.toString(), dir.toString()))
                     .masterPort(server.port()).maxHeap("512m").deadline(Duration.ofSeconds(150)).start()) {
            check(new Workers() {
                @Override
                public String awaitLine(int who, Predicate<String> match, Duration timeout) {
                    return job.awaitLine(who, match, timeout);
                }

                @Override
                public void kill(int who) {
                    job.kill(who);
                }

                @Override
                public String output(int who) {
                    return String.join("\n", job.output(who));
                }

                @Override
                public int awaitExit(int who, Duration timeout) throws Exception {
                    Process p = job.process(who);
                    assertTrue(p.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS), "worker " + who + " did not exit:\n"
                            + output(who));
                    return p.exitValue();
                }
            }, dir, true);
        }
        cleanUpAfterTheKilled();
    }

    @Test
    void threeAgentsAcrossTwoNetworkNamespacesWriteReadRefuseAndSurviveKilledPeers(@TempDir Path dir) throws Exception {
        Path token = token(dir);
        Process[] p = new Process[4];
        Path[] logs = new Path[4];
        try (NetnsHosts h = NetnsHosts.create("xt" + ProcessHandle.current().pid() % 100_000)) {
            try {
                int port = 29641;
                for (int who = 0; who < 4; who++) {
                    logs[who] = dir.resolve(role(who) + ".log");
                    Files.createFile(logs[who]);
                }
                // the store and the owner on host 1 (the test's JVM reaches neither host), the initiators on host 2
                Map<String, String> env1 = Map.of("JCOMM_HOST_ID", "h1", "MASTER_ADDR", h.addr1, "MASTER_PORT",
                        Integer.toString(port), "TRANSFER_LISTEN", h.addr1);
                p[STORE] = h.start(1, worker(STORE, token, dir), env1, logs[STORE]);
                Workers w = new Workers() {
                    @Override
                    public String awaitLine(int who, Predicate<String> match, Duration timeout) throws Exception {
                        long end = System.nanoTime() + timeout.toNanos();
                        while (true) {
                            for (String l : Files.readAllLines(logs[who], StandardCharsets.UTF_8)) {
                                if (match.test(l)) {
                                    return l;
                                }
                            }
                            if (!p[who].isAlive()) {
                                throw new AssertionError(role(who) + " exited (" + p[who].exitValue()
                                        + ") before printing the awaited line:\n" + output(who));
                            }
                            if (System.nanoTime() > end) {
                                throw new AssertionError(role(who) + " did not print the awaited line in time:\n" + output(who));
                            }
                            Thread.sleep(5);
                        }
                    }

                    @Override
                    public void kill(int who) {
                        p[who].toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
                        p[who].destroyForcibly();
                    }

                    @Override
                    public String output(int who) throws IOException {
                        return Files.readString(logs[who], StandardCharsets.UTF_8);
                    }

                    @Override
                    public int awaitExit(int who, Duration timeout) throws Exception {
                        assertTrue(p[who].waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS), role(who) + " did not exit:\n"
                                + output(who));
                        return p[who].exitValue();
                    }
                };
                w.awaitLine(STORE, l -> l.startsWith("store ready"), Duration.ofSeconds(60));
                p[OWNER] = h.start(1, worker(OWNER, token, dir), env1, logs[OWNER]);
                for (int who : new int[] {FIRST, SECOND}) {
                    p[who] = h.start(2, worker(who, token, dir), Map.of("JCOMM_HOST_ID", "h2", "MASTER_ADDR", h.addr1,
                            "MASTER_PORT", Integer.toString(port), "TRANSFER_LISTEN", h.addr2), logs[who]);
                }
                check(w, dir, false);
            } finally {
                for (Process q : p) {
                    if (q != null) {
                        q.toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
                        q.destroyForcibly();
                        q.waitFor(10, TimeUnit.SECONDS);
                    }
                }
            }
        }
        cleanUpAfterTheKilled();
    }

    /**
     * The killed agents' shared-memory directories (the namespaces share {@code /dev/shm}) are what the next
     * agent on the host removes as it starts: that clean-up, and a check that it left none of this test's.
     */
    private static void cleanUpAfterTheKilled() throws IOException {
        ShmFiles.cleanStale(ShmFiles.DEFAULT_DIR, "jcomm-kv-");
        try (Stream<Path> left = Files.list(ShmFiles.DEFAULT_DIR)) {
            List<String> dead = left.filter(p -> p.getFileName().toString().startsWith("jcomm-kv-decode-")
                            || p.getFileName().toString().startsWith("jcomm-kv-prefill-"))
                    .filter(p -> !ShmFiles.ownerAlive(p)).map(Path::toString).toList();
            assertTrue(dead.isEmpty(), "a dead agent's directory is left: " + dead);
        }
    }

    /** The scenario and its checks; {@code sameHost}: the shared region is written over shm. */
    private static void check(Workers w, Path dir, boolean sameHost) throws Exception {
        w.awaitLine(OWNER, l -> l.startsWith("owner after refusals"), Duration.ofSeconds(90));
        w.awaitLine(FIRST, l -> l.equals("initiator streaming"), Duration.ofSeconds(60));
        w.kill(FIRST);
        Files.createFile(dir.resolve("initiator-killed"));
        String survived = w.awaitLine(OWNER, l -> l.startsWith("owner after initiator kill"), Duration.ofSeconds(30));
        w.awaitLine(SECOND, l -> l.equals("second streaming"), Duration.ofSeconds(60));
        long killedAt = System.currentTimeMillis();
        w.kill(OWNER);
        String failed = w.awaitLine(SECOND, l -> l.startsWith("second failed"), Duration.ofSeconds(30));
        w.awaitLine(SECOND, l -> l.startsWith("second survivor intact"), Duration.ofSeconds(30));
        assertEquals(0, w.awaitExit(SECOND, Duration.ofSeconds(30)), w.output(SECOND));
        String owner = w.output(OWNER);
        String init = w.output(FIRST);
        String second = w.output(SECOND);

        assertTrue(owner.contains("owner notified from=prefill payload=heap-done"), owner);
        assertTrue(owner.contains("owner notified from=prefill payload=shared-done"), owner);
        assertTrue(owner.contains("owner heap wrong bytes=0"), owner);
        assertTrue(owner.contains("owner shared wrong bytes=0"), owner);
        assertTrue(owner.contains("guard touched=0 reused touched=0 readOnly changed=0 extra notifications=0"), owner);

        assertTrue(init.contains("initiator heap-done HEAP read-back wrong bytes=0"), init);
        assertTrue(init.contains("initiator shared-done SHARED read-back wrong bytes=0"), init);
        assertTrue(init.contains("initiator read-only region wrong bytes=0"), init);
        assertTrue(init.contains("initiator out-of-range refused reason=OUT_OF_RANGE"), init);
        assertTrue(init.contains("initiator read-only refused reason=PERMISSION"), init);
        assertTrue(init.contains("initiator stale refused reason=STALE"), init);
        // on one host the shared region is written through its file; across hosts nothing of the owner's is mapped
        long mapped = Long.parseLong(init.replaceAll("(?s).*initiator mapped owner files=(\\d+).*", "$1"));
        assertTrue(sameHost ? mapped > 0 : mapped == 0, "shm " + (sameHost ? "not " : "") + "used: " + init);

        // the initiator's kill -9: the owner's other regions intact, the written one released, nothing left serving it
        assertTrue(survived.matches("owner after initiator kill: other regions intact=true, the written region deregistered "
                + "in ms=\\d+, serving threads [1-9]\\d* before, 0 after"), survived);
        assertTrue(owner.contains("owner second notified from=prefill-2 payload=second-done heap wrong bytes=0"), owner);
        assertTrue(second.contains("second read-back wrong bytes=0"), second);

        // the owner's kill -9
        assertTrue(failed.contains("type=PeerFailureException"), failed);
        long failedAt = Long.parseLong(failed.replaceAll(".*failedAt=(\\d+).*", "$1"));
        long ms = failedAt - killedAt;
        System.out.println((sameHost ? "one host" : "two hosts") + ": " + survived + "; pending transfers failed " + ms
                + " ms after the owner's kill -9");
        assertTrue(ms >= 0 && ms < 1000, "failed " + ms + " ms after the kill: " + failed);
        assertTrue(second.contains("second write after death failed type=PeerFailureException"), second);
        assertTrue(second.contains("second survivor intact=true"), second);
    }

    private static String role(int who) {
        return who == OWNER ? "owner" : who == FIRST ? "initiator" : who == SECOND ? "second" : "store";
    }

    private static Path token(Path dir) throws IOException {
        Path token = dir.resolve("token");
        Files.writeString(token, TOKEN + "\n", StandardCharsets.US_ASCII);
        return token;
    }

    /** A worker's JVM on the test class path. */
    private static List<String> worker(int who, Path token, Path dir) {
        List<String> cmd = new ArrayList<>(NetnsHosts.javaCommand(TransferWorker.class, "512m"));
        cmd.addAll(List.of(role(who), token.toString(), dir.toString()));
        return cmd;
    }
}
