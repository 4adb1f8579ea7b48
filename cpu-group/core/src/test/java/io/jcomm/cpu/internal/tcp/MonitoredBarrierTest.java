package io.jcomm.cpu.internal.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.HostIdentity;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.runtime.recorder.StatePublisher;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.testkit.ThreadRanks;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code monitoredBarrier} on the tcp backend: passes when all arrive, names every missing rank when not. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class MonitoredBarrierTest {

    private static ThreadRanks start(int n) {
        return ThreadRanks.start(n, r -> CpuGroupOptions.builder().backend("tcp").groupName("mb"), Duration.ofSeconds(20));
    }

    @Test
    void whenAllArriveItIsABarrierAndTheGroupGoesOn() {
        try (ThreadRanks ranks = start(3)) {
            List<double[]> sums = ranks.call(g -> {
                g.monitoredBarrier(Duration.ofSeconds(10));
                g.monitoredBarrier(Duration.ofSeconds(10));
                g.barrier();
                Tensor t = Tensor.ofFloats(g.rank() + 1);
                g.allReduce(t, ReduceOp.SUM);
                return t.toDoubleArray();
            }, Duration.ofSeconds(30));
            for (double[] s : sums) {
                assertArrayEquals(new double[] {6}, s);
            }
        }
    }

    @Test
    void rankZeroNamesEveryRankThatDidNotArrive() {
        try (ThreadRanks ranks = start(4)) {
            long t0 = System.nanoTime();
            List<Object> out = ranks.outcomes(g -> {
                if (g.rank() >= 2) {
                    return "absent"; // ranks 2 and 3 never call it
                }
                g.monitoredBarrier(Duration.ofMillis(800));
                return "passed";
            }, Duration.ofSeconds(20));
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
            CommTimeoutException e = assertInstanceOf(CommTimeoutException.class, out.get(0), String.valueOf(out));
            assertTrue(e.getMessage().contains("ranks [2, 3] of 4 did not arrive at the monitored barrier"), e.getMessage());
            assertEquals("monitoredBarrier", e.operation());
            // rank 1 arrived but is never released: it fails with rank 0's verdict, not a hang
            CommException r1 = assertInstanceOf(CommException.class, out.get(1), String.valueOf(out));
            assertTrue(r1.getMessage().contains("ranks [2, 3] of 4 did not arrive"), r1.getMessage());
            assertEquals("absent", out.get(2));
            assertTrue(ms < 10_000, "took " + ms + " ms");
        }
    }

    /**
     * Ranks with distinct host ids (as on other hosts: no recorder file to read): what the missing rank
     * does comes from the summary its process published to the store. The ranks are threads of this JVM,
     * so the summary is this process's.
     */
    @Test
    void aMissingRankOnAnotherHostIsDescribedFromWhatItPublishedToTheStore() {
        assumeTrue(StatePublisher.enabled(), "no flight recorder here");
        try (ThreadRanks ranks = ThreadRanks.start(3, r -> CpuGroupOptions.builder().backend("tcp").groupName("mbhosts")
                .option("tcp.hostId", "host-" + r), Duration.ofSeconds(20))) {
            List<Object> out = ranks.outcomes(g -> {
                if (g.rank() == 2) {
                    return "absent";
                }
                g.monitoredBarrier(Duration.ofMillis(2500));
                return "passed";
            }, Duration.ofSeconds(20));
            CommTimeoutException e = assertInstanceOf(CommTimeoutException.class, out.get(0), String.valueOf(out));
            assertTrue(e.getMessage().contains("ranks [2] of 3 did not arrive at the monitored barrier before its deadline "
                    + "(rank 2 on host " + HostIdentity.displayName() + ": in "), e.getMessage());
        }
    }
}
