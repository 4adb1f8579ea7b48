package io.jcomm.it.parallel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.PeerFailureException;
import io.jcomm.testkit.MultiJvm;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code kill -9} of one rank of a TP2 x PP2 job (4 JVMs) in the middle of work: every survivor
 * fails with a typed {@link io.jcomm.api.CommException} (a dead peer, a peer that closed after its
 * own failure, or a timeout) well within the configured timeout, and exits; no JVM is left behind.
 */
@Timeout(value = 180)
class ParallelStateKillIT {

    private static final long TIMEOUT_MS = 10_000;
    private static final Set<String> TYPED = Set.of(PeerFailureException.class.getName(),
            CommClosedException.class.getName(), CommTimeoutException.class.getName());

    @Test
    void killingOneRankFailsEveryOtherWithATypedErrorInTime() {
        int victim = 3;
        try (MultiJvm job = MultiJvm.builder().name("kill").worldSize(4).mainClass(KillWorker.class)
                .env("JCOMM_TIMEOUT_MS", Long.toString(TIMEOUT_MS)).keepOthersOnFailure()
                .maxHeap("256m").deadline(Duration.ofSeconds(150)).start()) {
            for (int r = 0; r < 4; r++) {
                job.awaitLine(r, "READY", Duration.ofSeconds(90));
            }
            // let them run the loop for a moment, then kill -9
            try {
                Thread.sleep(300);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            long killedAt = System.nanoTime();
            job.kill(victim);
            MultiJvm.Results r = job.awaitAll();
            r.assertSurvivorsSucceeded();
            assertEquals(137, r.exitCode(victim));
            for (int rank = 0; rank < 4; rank++) {
                if (rank == victim) {
                    continue;
                }
                List<String> failed = r.linesContaining(rank, "FAILED ");
                assertEquals(1, failed.size(), String.join("\n", r.output(rank)));
                String[] f = failed.get(0).substring(failed.get(0).indexOf("FAILED ")).split(" ");
                assertTrue(TYPED.contains(f[1]) && f[2].equals("true"), "untyped failure on rank " + rank + ": " + failed.get(0));
                long after = TimeUnit.NANOSECONDS.toMillis(Long.parseLong(f[3]) - killedAt);
                assertTrue(after < TIMEOUT_MS, "rank " + rank + " failed " + after + " ms after the kill: " + failed.get(0));
                System.out.println("rank " + rank + ": " + f[1].substring(f[1].lastIndexOf('.') + 1) + " in " + f[4]
                        + " after " + after + " ms");
            }
        }
    }
}
