package io.jcomm.cpu.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.testkit.MultiJvm;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A rank process killed with SIGKILL while the other ranks wait on a store key: they fail with a
 * {@link io.jcomm.api.PeerFailureException} naming it within 2 s, not at their 60 s timeout. Ranks are
 * separate JVMs ({@link MultiJvm}) that declare themselves through {@link TcpRendezvous}; the store is
 * hosted by this JVM, as a launcher would.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TcpStoreMemberKillTest {

    @Test
    void killingADeclaredRankFailsTheOthersWaitsWithinTwoSeconds() throws Exception {
        String jobId = "kill-test-" + ProcessHandle.current().pid();
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().name("kill-test").build());
             MultiJvm job = MultiJvm.builder().name("store-member-kill").worldSize(3).mainClass(MemberKillWorker.class)
                     .args("1").masterPort(server.port()).env("JCOMM_LAUNCHER_STORE", "1").env("JCOMM_JOB_ID", jobId)
                     .maxHeap("256m").keepOthersOnFailure().deadline(Duration.ofSeconds(100)).start()) {
            job.awaitLine(1, "DECLARED rank 1 of job " + jobId, Duration.ofSeconds(60));
            job.awaitLine(0, "WAITING", Duration.ofSeconds(60));
            job.awaitLine(2, "WAITING", Duration.ofSeconds(60));
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (server.stats().pendingWaits() < 2) { // both waits are registered on the server
                assertTrue(System.nanoTime() < end, "waits not pending: " + server.stats());
                Thread.sleep(5);
            }
            long t0 = System.nanoTime();
            job.kill(1);
            for (int r : new int[] {0, 2}) {
                String line = job.awaitLine(r, l -> l.startsWith("PEER_FAILURE") || l.startsWith("OTHER")
                        || l.startsWith("NOFAIL"), Duration.ofSeconds(30));
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
                assertTrue(line.startsWith("PEER_FAILURE 1 "), "rank " + r + ": " + line);
                assertTrue(line.contains("rank 1 of job " + jobId + " left the store without a goodbye (process died?)"
                        + " while this rank waited for keys [never]"), line);
                assertTrue(ms < 2000, "rank " + r + " noticed the death after " + ms + " ms: " + line);
            }
            MultiJvm.Results res = job.awaitAll();
            res.assertSurvivorsSucceeded();
            assertEquals(1, server.stats().memberDeaths(), server.stats().toString());
        }
    }
}
