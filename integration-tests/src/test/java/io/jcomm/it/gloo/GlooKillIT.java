package io.jcomm.it.gloo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.Availability;
import io.jcomm.cpu.gloo.GlooBackend;
import io.jcomm.testkit.MultiJvm;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Timeout;

/**
 * kill -9 of a rank in the middle of a gloo all-reduce or barrier: every survivor gets a
 * {@link io.jcomm.api.PeerFailureException} or {@link io.jcomm.api.CommTimeoutException} within the
 * operation timeout + 2 s, and its next call fails at once.
 */
@Timeout(180)
class GlooKillIT {

    private static final long OP_TIMEOUT_MS = 5_000;

    @BeforeAll
    static void requirements() {
        Availability a = GlooBackend.availability();
        io.jcomm.testkit.Requirements.assume("gloo", a.available(), "gloo backend " + a);
    }

    @ParameterizedTest(name = "{0} ranks, kill rank {1} during {2}")
    @CsvSource({"2, 1, allReduce", "2, 1, barrier", "3, 1, allReduce", "3, 2, barrier"})
    void survivorsFailPromptlyAndStayFailed(int size, int victim, String op) {
        try (MultiJvm job = MultiJvm.builder().name("gloo-kill").worldSize(size).mainClass(GlooKillWorker.class)
                .args(op, Long.toString(OP_TIMEOUT_MS)).deadline(Duration.ofSeconds(120)).keepOthersOnFailure()
                .maxHeap("256m").start()) {
            for (int r = 0; r < size; r++) {
                job.awaitLine(r, "READY", Duration.ofSeconds(60));
            }
            sleep(300); // let the loops run
            long killedAt = System.currentTimeMillis();
            job.kill(victim);
            MultiJvm.Results res = job.awaitAll();
            res.assertSurvivorsSucceeded();
            for (int r = 0; r < size; r++) {
                if (r == victim) {
                    continue;
                }
                List<String> failed = res.linesContaining(r, "FAILED ");
                assertEquals(1, failed.size(), "rank " + r + ": " + res.output(r));
                String[] f = failed.get(0).split(" ");
                assertTrue(f[1].equals("PeerFailureException") || f[1].equals("CommTimeoutException"), failed.get(0));
                long seenAfter = Long.parseLong(f[3]) - killedAt;
                assertTrue(seenAfter <= OP_TIMEOUT_MS + 2_000, "rank " + r + " noticed after " + seenAfter + " ms");
                String fast = res.linesContaining(r, "FAST ").get(0);
                String[] g = fast.split(" ");
                assertEquals(f[1], g[1], "the later call fails with the same kind: " + fast);
                assertTrue(Long.parseLong(g[2]) < 1000, "the later call fails at once: " + fast);
                assertTrue(fast.endsWith("cause=true"), fast);
            }
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
