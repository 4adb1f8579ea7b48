package io.jcomm.cpu.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.BackendException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.work.Work;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.FaultPlan;
import io.jcomm.cpu.testkit.CpuGroupCases;
import io.jcomm.cpu.testkit.ThreadRanks;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Fault injection in a group's operations, ranks as threads over tcp: {@code stall} and {@code cut} at
 * a chosen operation and sequence number, before and after it, synchronous and asynchronous, matched by
 * the global rank. ({@code kill} ends the JVM: {@code FaultInjectionIT} runs it with processes.)
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class FaultInjectionTest {

    /** Global ranks of the two group ranks: a fault names the global one. */
    private static final List<Integer> GLOBAL = List.of(5, 7);

    private static ThreadRanks start(String group, String plan, Duration timeout) {
        return ThreadRanks.start(2, r -> CpuGroupOptions.builder().backend("tcp").groupName(group).globalRanks(GLOBAL)
                .timeout(timeout).codec(CpuGroupCases.codec()).fault(FaultPlan.parse(plan)), Duration.ofSeconds(30));
    }

    /** What one rank saw: milliseconds of each completed all-reduce, and the failure that ended its loop. */
    private record Run(List<Long> millis, CommException failure, long failedAfterMs) {
    }

    /** {@code n} all-reduces of 1 (checking the sum), each with {@code timeout}, until one fails. */
    private static Run allReduces(ProcessGroup g, int n, Duration timeout) {
        List<Long> millis = new ArrayList<>();
        for (int i = 1; i <= n; i++) {
            long start = System.nanoTime();
            try {
                Tensor t = Tensor.ofLongs(1);
                g.allReduce(t, ReduceOp.SUM, timeout);
                assertEquals(2, t.getLong(0), "sum of op " + i);
            } catch (CommException e) {
                return new Run(millis, e, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
            }
            millis.add(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
        }
        return new Run(millis, null, -1);
    }

    @Test
    void aStallShorterThanTheDeadlineDelaysOneOperationOfItsRankOnly() {
        try (ThreadRanks t = start("stall", "stall:400ms@rank=7,group=st*,op=all_reduce,seq=3", Duration.ofSeconds(20))) {
            List<Run> runs = t.call(g -> allReduces(g, 6, Duration.ofSeconds(10)), Duration.ofSeconds(40));
            for (Run r : runs) {
                assertNull(r.failure(), String.valueOf(r.failure()));
                assertEquals(6, r.millis().size());
            }
            // the stalled rank's third operation waited; its peer waited for it in the same operation
            assertTrue(runs.get(1).millis().get(2) >= 390, "stalled op took " + runs.get(1).millis());
            assertTrue(runs.get(0).millis().get(2) >= 300, "the peer waited in op 3: " + runs.get(0).millis());
            for (int i : new int[] {0, 1, 3, 4, 5}) {
                assertTrue(runs.get(1).millis().get(i) < 300, "only op 3 stalls: " + runs.get(1).millis());
            }
        }
    }

    @Test
    void aStallPastThePeersDeadlineTimesThemOutAndTheStalledRankResumesIntoATypedFailure() {
        try (ThreadRanks t = start("stall2", "stall:1500ms@rank=7,op=allReduce,seq=2", Duration.ofSeconds(20))) {
            List<Run> runs = t.call(g -> allReduces(g, 4, Duration.ofMillis(500)), Duration.ofSeconds(40));
            Run peer = runs.get(0);
            Run stalled = runs.get(1);
            assertEquals(1, peer.millis().size());
            assertInstanceOf(CommTimeoutException.class, peer.failure(), String.valueOf(peer.failure()));
            assertTrue(peer.failedAfterMs() >= 400 && peer.failedAfterMs() < 1400, "at its deadline: " + peer.failedAfterMs());
            assertEquals("stall2", peer.failure().group());
            assertEquals("allReduce", peer.failure().operation());
            assertEquals(1, stalled.millis().size());
            assertTrue(stalled.failedAfterMs() >= 1490, "resumed after the stall: " + stalled.failedAfterMs());
            assertTrue(stalled.failure() instanceof PeerFailureException || stalled.failure() instanceof CommTimeoutException,
                    "typed: " + stalled.failure());
        }
    }

    @Test
    void aCutBeforeAnOperationFailsItWithTheFaultAndThePeerFastWithAPeerFailure() {
        try (ThreadRanks t = start("cut", "cut@rank=7,group=cut,op=allReduce,seq=3", Duration.ofSeconds(20))) {
            List<Run> runs = t.call(g -> allReduces(g, 5, Duration.ofSeconds(10)), Duration.ofSeconds(40));
            Run peer = runs.get(0);
            Run cut = runs.get(1);
            assertEquals(2, cut.millis().size());
            assertInstanceOf(BackendException.class, cut.failure());
            assertTrue(cut.failure().getMessage().contains("fault injection (JCOMM_FAULT cut@rank=7,group=cut,op=allReduce,seq=3"),
                    cut.failure().getMessage());
            assertEquals(1, cut.failure().rank());
            assertEquals("allReduce", cut.failure().operation());
            assertTrue(t.group(1).isPoisoned());
            assertEquals(2, peer.millis().size());
            PeerFailureException p = assertInstanceOf(PeerFailureException.class, peer.failure(), String.valueOf(peer.failure()));
            assertEquals(1, p.peerRank());
            assertEquals("cut", p.group());
            assertEquals(0, p.rank());
            assertEquals("allReduce", p.operation());
            assertTrue(peer.failedAfterMs() < 2000, "fast: " + peer.failedAfterMs() + " ms");
            // the cut rank's later calls fail at once, with the same kind
            CommException again = assertThrows(CommException.class, () -> t.group(1).barrier(Duration.ofSeconds(5)));
            assertInstanceOf(BackendException.class, again);
        }
    }

    @Test
    void aCutAfterAnOperationLetsItCompleteAndFailsTheNext() {
        try (ThreadRanks t = start("cut-after", "cut@rank=7,op=allReduce,seq=2,phase=after", Duration.ofSeconds(20))) {
            List<Run> runs = t.call(g -> allReduces(g, 5, Duration.ofSeconds(10)), Duration.ofSeconds(40));
            Run cut = runs.get(1);
            assertEquals(2, cut.millis().size(), "op 2 completed on the cut rank");
            assertInstanceOf(BackendException.class, cut.failure());
            assertTrue(cut.failure().getMessage().contains("unusable after an earlier failure in allReduce: fault injection"),
                    cut.failure().getMessage());
            Run peer = runs.get(0);
            // the bytes of op 2 still unsent when the connections were reset are lost, as on a real cut
            assertTrue(peer.millis().size() == 1 || peer.millis().size() == 2, "peer: " + peer.millis());
            assertInstanceOf(PeerFailureException.class, peer.failure(), String.valueOf(peer.failure()));
        }
    }

    @Test
    void asynchronousAndObjectOperationsPassTheHookToo() {
        try (ThreadRanks t = start("async", "stall:300ms@rank=7,op=allReduce,seq=2;cut@rank=7,op=broadcastObject",
                Duration.ofSeconds(20))) {
            List<Object> out = t.outcomes(g -> {
                long start = System.nanoTime();
                Work<Void> w1 = g.allReduceAsync(Tensor.ofLongs(1), ReduceOp.SUM, Duration.ofSeconds(10));
                Work<Void> w2 = g.allReduceAsync(Tensor.ofLongs(1), ReduceOp.SUM, Duration.ofSeconds(10));
                w1.await(Duration.ofSeconds(10));
                w2.await(Duration.ofSeconds(10));
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                try {
                    // from the cut rank: the peer needs its bytes
                    g.broadcastObject(g.rank() == 1 ? "x" : null, 1, String.class, Duration.ofSeconds(10));
                    return "no failure after " + ms;
                } catch (CommException e) {
                    return ms + " " + e.getClass().getSimpleName() + " " + e.operation();
                }
            }, Duration.ofSeconds(40));
            String[] cut = String.valueOf(out.get(1)).split(" ");
            assertTrue(Long.parseLong(cut[0]) >= 290, "stalled asynchronous op: " + out);
            assertEquals("BackendException broadcastObject", cut[1] + " " + cut[2], String.valueOf(out));
            String[] peer = String.valueOf(out.get(0)).split(" ");
            assertEquals("PeerFailureException broadcastObject", peer[1] + " " + peer[2], String.valueOf(out));
        }
    }

    @Test
    void aGroupThatNoFaultTargetsHasNoInjector() {
        FaultInjector.Cut never = (f, op, seq) -> {
            throw new AssertionError("no cut expected");
        };
        assertNull(FaultInjector.forGroup(FaultPlan.NONE, "tp:0", 1, 1, never));
        FaultPlan p = FaultPlan.parse("kill@rank=1,group=tp:*");
        assertNull(FaultInjector.forGroup(p, "pp:0", 1, 1, never), "other group");
        assertNull(FaultInjector.forGroup(p, "tp:0", 1, 2, never), "other global rank");
    }

    @Test
    void withoutTheRecorderTheInjectorCountsTheSequenceItselfAndFiresOnce() {
        List<Long> cuts = new ArrayList<>();
        FaultInjector fi = FaultInjector.forGroup(FaultPlan.parse("cut@rank=3,op=barrier,seq=2,phase=after"), "g", 0, 3,
                (f, op, seq) -> {
                    cuts.add(seq);
                    return new BackendException("cut");
                });
        assertEquals(1, fi.before("barrier", 0));
        fi.after("barrier", 1);
        assertEquals(2, fi.before("allReduce", 0));
        fi.after("allReduce", 2);
        assertEquals(List.of(), cuts, "another operation");
        assertEquals(3, fi.before("barrier", 0));
        fi.after("barrier", 3);
        assertEquals(List.of(3L), cuts, "the first barrier from seq 2, after it");
        assertEquals(4, fi.before("barrier", 0));
        fi.after("barrier", 4);
        assertEquals(List.of(3L), cuts, "once");
        assertEquals(41, fi.before("barrier", 41), "the recorder's number when it counts");
    }
}
