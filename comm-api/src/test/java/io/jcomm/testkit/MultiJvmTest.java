package io.jcomm.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 120, unit = TimeUnit.SECONDS)
class MultiJvmTest {

    @Test
    void startsRanksWithTorchrunEnvironmentAndFlags() {
        try (MultiJvm job = MultiJvm.builder().name("env").worldSize(3).mainClass(EchoWorker.class).args("env")
                .masterPort(12345).env("EXTRA", "x").envForRank(r -> r == 2 ? Map.of("EXTRA", "two") : Map.of())
                .deadline(Duration.ofSeconds(60)).start()) {
            MultiJvm.Results r = job.awaitAll();
            r.assertAllSucceeded();
            for (int rank = 0; rank < 3; rank++) {
                String extra = rank == 2 ? "two" : "x";
                assertEquals(1, r.linesContaining(rank, "env rank=" + rank + " world=3 local=" + rank
                        + "/3 master=127.0.0.1:12345 extra=" + extra).size(), String.join("\n", r.output(rank)));
                assertEquals(1, r.linesContaining(rank, "flag aeron=true").size());
            }
        }
    }

    @Test
    void oneFailureKillsTheOthersAndIsReported() {
        long start = System.nanoTime();
        try (MultiJvm job = MultiJvm.builder().name("fail").worldSize(3).mainClass(EchoWorker.class)
                .args("fail-rank-1").deadline(Duration.ofSeconds(60)).start()) {
            MultiJvm.Results r = job.awaitAll();
            assertEquals(1, r.exitCode(1));
            assertNotEquals(0, r.exitCode(0));
            assertNotEquals(0, r.exitCode(2));
            AssertionError e = assertThrows(AssertionError.class, r::assertAllSucceeded);
            assertTrue(e.getMessage().contains("rank 1 exited with 1"), e.getMessage());
            assertTrue(e.getMessage().contains("boom"), e.getMessage());
        }
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(40), "others were not killed promptly");
    }

    @Test
    void deadlineKillsEveryWorker() {
        try (MultiJvm job = MultiJvm.builder().name("deadline").worldSize(2).mainClass(EchoWorker.class)
                .args("sleep").deadline(Duration.ofSeconds(4)).start()) {
            MultiJvm.Results r = job.awaitAll();
            assertTrue(r.timedOut());
            assertFalse(job.process(0).isAlive());
            assertFalse(job.process(1).isAlive());
            assertThrows(AssertionError.class, r::assertAllSucceeded);
        }
    }

    @Test
    void killOnPurposeIsNotAFailureAndAwaitLineSeesOutput() {
        try (MultiJvm job = MultiJvm.builder().name("kill").worldSize(2).mainClass(EchoWorker.class)
                .args("sleep").keepOthersOnFailure().deadline(Duration.ofSeconds(60)).start()) {
            assertEquals("ready 1", job.awaitLine(1, "ready", Duration.ofSeconds(30)));
            job.awaitLine(0, "ready", Duration.ofSeconds(30));
            long pid = job.pid(1);
            job.kill(1);
            job.kill(0);
            MultiJvm.Results r = job.awaitAll();
            assertEquals(137, r.exitCode(1));
            r.assertSurvivorsSucceeded();
            assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false));
        }
    }
}
