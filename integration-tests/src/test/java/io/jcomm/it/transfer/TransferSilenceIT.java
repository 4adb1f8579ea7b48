package io.jcomm.it.transfer;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import io.jcomm.it.reliability.NetnsHosts;
import io.jcomm.testkit.MultiJvm;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Peers that go silent without closing their connections ({@link SilentPeerWorker}, tcp only, a
 * {@code peerSilenceTimeout} of 1.5 s): a stopped owner (SIGSTOP) fails the initiator's pending writes with a
 * PeerFailureException within the silence timeout, not at their 60 s deadline; a stopped initiator has
 * its half-received writes ended by the owner, whose sink region is then released at once and whose other
 * memory is intact; and across two network namespaces a cut link does both.
 */
@Timeout(value = 150, unit = TimeUnit.SECONDS)
class TransferSilenceIT {

    private static final long SILENCE_MS = 1500;
    /** The silence timeout, the reaper's period and a loaded machine's scheduling. */
    private static final long NOTICED_WITHIN_MS = SILENCE_MS + 1500;

    private static MultiJvm job(TcpStoreServer server, Path triggers) {
        return MultiJvm.builder().name("silent").worldSize(2).mainClass(SilentPeerWorker.class)
                .argsForRank(r -> List.of(r == 0 ? "owner" : "initiator", "127.0.0.1", Integer.toString(server.port()),
                        "127.0.0.1", Long.toString(SILENCE_MS), triggers.toString()))
                .masterPort(server.port()).maxHeap("256m").deadline(Duration.ofSeconds(120)).start();
    }

    private static void signal(long pid, String sig) throws Exception {
        Process p = new ProcessBuilder("kill", "-" + sig, Long.toString(pid)).inheritIO().start();
        assertTrue(p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0, "kill -" + sig + " " + pid);
    }

    private static long failedWithin(String line, long since) {
        assertTrue(line.contains("type=PeerFailureException"), line);
        long ms = Long.parseLong(line.replaceAll(".*failedAt=(\\d+).*", "$1")) - since;
        System.out.println("pending writes failed " + ms + " ms after the peer went silent: " + line);
        assertTrue(ms >= 0 && ms < NOTICED_WITHIN_MS, ms + " ms: " + line);
        return ms;
    }

    private static void released(String line) {
        long ms = Long.parseLong(line.replaceAll(".*ms=(\\d+).*", "$1"));
        System.out.println("owner released the sink " + ms + " ms after the initiator went silent");
        assertTrue(ms < NOTICED_WITHIN_MS, line);
    }

    @Test
    void aStoppedOwnerFailsThePendingWritesWithinTheSilenceTimeout(@TempDir Path dir) throws Exception {
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().name("silent-store").build());
             MultiJvm job = job(server, dir)) {
            job.awaitLine(0, "owner ready", Duration.ofSeconds(60));
            job.awaitLine(1, "initiator streaming", Duration.ofSeconds(60));
            long stoppedAt = System.currentTimeMillis();
            signal(job.pid(0), "STOP");
            try {
                failedWithin(job.awaitLine(1, l -> l.startsWith("initiator failed"), Duration.ofSeconds(30)), stoppedAt);
            } finally {
                signal(job.pid(0), "CONT");
            }
            job.kill(0);
            job.kill(1);
        }
    }

    @Test
    void aStoppedInitiatorsHalfReceivedWritesEndAndTheOwnerReleasesItsRegion(@TempDir Path dir) throws Exception {
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().name("silent-store").build());
             MultiJvm job = job(server, dir)) {
            job.awaitLine(0, "owner ready", Duration.ofSeconds(60));
            job.awaitLine(1, "initiator streaming", Duration.ofSeconds(60));
            signal(job.pid(1), "STOP");
            try {
                Files.createFile(dir.resolve("release"));
                released(job.awaitLine(0, l -> l.startsWith("owner released") || l.startsWith("owner could not"),
                        Duration.ofSeconds(30)));
                String guard = job.awaitLine(0, l -> l.startsWith("owner guard"), Duration.ofSeconds(10));
                assertTrue(guard.equals("owner guard intact=true"), guard);
            } finally {
                signal(job.pid(1), "CONT");
            }
            job.kill(0);
            job.kill(1);
        }
    }

    @Test
    void aCutLinkBetweenTwoHostsIsNoticedOnBothSidesWithinTheSilenceTimeout(@TempDir Path dir) throws Exception {
        try (NetnsHosts h = NetnsHosts.create("sil" + ProcessHandle.current().pid() % 100_000)) {
            List<String> java = NetnsHosts.javaCommand(SilentPeerWorker.class, "256m");
            Path[] logs = {dir.resolve("owner.log"), dir.resolve("initiator.log")};
            Process[] p = new Process[2];
            try {
                List<String> owner = new ArrayList<>(java);
                owner.addAll(List.of("owner", h.addr1, "29631", h.addr1, Long.toString(SILENCE_MS), dir.toString(), "host-store"));
                p[0] = h.start(1, owner, Map.of("JCOMM_HOST_ID", "h1"), logs[0]);
                awaitLog(logs[0], "owner ready", 60);
                List<String> init = new ArrayList<>(java);
                init.addAll(List.of("initiator", h.addr1, "29631", h.addr2, Long.toString(SILENCE_MS), dir.toString()));
                p[1] = h.start(2, init, Map.of("JCOMM_HOST_ID", "h2"), logs[1]);
                awaitLog(logs[1], "initiator streaming", 60);
                long cutAt = System.currentTimeMillis();
                h.cut();
                Files.createFile(dir.resolve("release"));
                failedWithin(awaitLog(logs[1], "initiator failed", 30), cutAt);
                released(awaitLog(logs[0], "owner released", 30));
                String guard = awaitLog(logs[0], "owner guard", 10);
                assertTrue(guard.equals("owner guard intact=true"), guard);
            } finally {
                for (Process q : p) {
                    if (q != null) {
                        q.descendants().forEach(ProcessHandle::destroyForcibly);
                        q.destroyForcibly();
                        q.waitFor(10, TimeUnit.SECONDS);
                    }
                }
            }
        }
    }

    private static String awaitLog(Path log, String prefix, int seconds) throws Exception {
        long until = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (System.nanoTime() < until) {
            if (Files.exists(log)) {
                for (String l : Files.readAllLines(log)) {
                    if (l.startsWith(prefix)) {
                        return l;
                    }
                }
            }
            Thread.sleep(20);
        }
        throw new AssertionError("no line starting with '" + prefix + "' in " + seconds + " s:\n"
                + (Files.exists(log) ? Files.readString(log) : "(no log)"));
    }
}
