package io.jcomm.cpu.internal.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.CommException;
import io.jcomm.api.DType;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.TcpOptions;
import io.jcomm.cpu.internal.DefaultProcessGroup;
import io.jcomm.cpu.testkit.CpuGroupCases;
import io.jcomm.cpu.testkit.ThreadRanks;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The tcp backend's same-host fast path ({@code tcp.shm.fastBytes}): which groups get it, exact results
 * of every operation that takes it, the fall-back of objects that do not fit, point-to-point order across
 * small (mailbox) and large (link) messages, and a size disagreement between ranks (one on the fast path,
 * one on the links) that fails as a mismatch instead of hanging. The conformance kit runs every other case
 * with the fast path on (its default).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class FastPathTest {

    private static final Duration T = Duration.ofSeconds(60);

    private static CpuGroupOptions.Builder opts(int rank) {
        return CpuGroupOptions.builder().backend("tcp").groupName("fast").timeout(Duration.ofSeconds(20))
                .codec(CpuGroupCases.codec());
    }

    private static TcpBackend tcp(ProcessGroup g) {
        return (TcpBackend) ((DefaultProcessGroup) g).backend();
    }

    @Test
    void onlyGroupsOnOneHostWithTheOptionOnGetIt() {
        try (ThreadRanks t = ThreadRanks.start(2, FastPathTest::opts, T)) {
            assertTrue(tcp(t.group(0)).fastPath());
            assertTrue(tcp(t.group(1)).fastPath());
        }
        try (ThreadRanks t = ThreadRanks.start(2, r -> opts(r).option(TcpOptions.SHM_FAST_BYTES, "0"), T)) {
            assertFalse(tcp(t.group(0)).fastPath());
        }
        try (ThreadRanks t = ThreadRanks.start(2, r -> opts(r).option(TcpOptions.HOST_ID, "host-" + r), T)) {
            assertFalse(tcp(t.group(0)).fastPath(), "ranks on different hosts");
            t.run(g -> g.barrier(), T); // and the links still work
        }
    }

    @Test
    void everySmallOperationIsExact() {
        int n = 3;
        try (ThreadRanks t = ThreadRanks.start(n, FastPathTest::opts, T)) {
            t.run(g -> {
                int me = g.rank();
                for (int round = 0; round < 50; round++) {
                    g.barrier();
                    for (int count : new int[] {0, 1, 256, 4096, 16384}) { // up to 64 KiB of f32
                        Tensor x = Tensor.allocate(DType.F32, count);
                        for (int i = 0; i < count; i++) {
                            x.setDouble(i, me + 1 + i % 7 + round);
                        }
                        g.allReduce(x, ReduceOp.SUM);
                        for (int i = 0; i < count; i += 97) {
                            assertEquals(n * (1 + i % 7 + round) + 3, x.getDouble(i), 0.0, "sum at " + i);
                        }
                        x.fill(me + round);
                        g.allReduce(x, ReduceOp.MAX);
                        if (count > 0) {
                            assertEquals(n - 1 + round, x.getDouble(count - 1), 0.0);
                        }
                    }
                    Tensor in = Tensor.allocate(DType.I32, 100);
                    in.fill(10 * me + round);
                    Tensor all = Tensor.allocate(DType.I32, 100L * n);
                    g.allGather(all, in);
                    for (int r = 0; r < n; r++) {
                        assertEquals(10 * r + round, all.getDouble(100L * r + 99), 0.0);
                    }
                    Tensor b = Tensor.allocate(DType.F64, 64);
                    b.fill(me == round % n ? 7 + round : -1);
                    g.broadcast(b, round % n);
                    assertEquals(7 + round, b.getDouble(63), 0.0);
                    Tensor rsIn = Tensor.allocate(DType.F32, 8L * n);
                    for (int i = 0; i < rsIn.numel(); i++) {
                        rsIn.setDouble(i, i + me);
                    }
                    Tensor rsOut = Tensor.allocate(DType.F32, 8);
                    g.reduceScatter(rsOut, rsIn, ReduceOp.SUM);
                    assertEquals(n * (8 * me + 5) + 3, rsOut.getDouble(5), 0.0);
                    List<String> names = g.allGatherObject("rank-" + me + "-" + round, String.class);
                    assertEquals("rank-" + (n - 1) + "-" + round, names.get(n - 1));
                    String s = g.broadcastObject(me == 1 ? "from one " + round : null, 1, String.class);
                    assertEquals("from one " + round, s);
                }
            }, T);
            for (int r = 0; r < n; r++) {
                assertFalse(tcp(t.group(r)).sharedCollectives(), "no large-collective staging was made");
            }
        }
    }

    @Test
    void objectsThatDoNotFitGoByTheLinksOnEveryRank() {
        try (ThreadRanks t = ThreadRanks.start(3, r -> opts(r).option(TcpOptions.SHM_FAST_BYTES, "4096"), T)) {
            t.run(g -> {
                int me = g.rank();
                for (int round = 0; round < 5; round++) {
                    String big = ("r" + me).repeat(3000 * (round + 1)); // > 4 KiB
                    String mine = me == round % 3 ? big : "small " + me;
                    List<String> got = g.allGatherObject(mine, String.class);
                    for (int r = 0; r < 3; r++) {
                        assertEquals(r == round % 3 ? ("r" + r).repeat(3000 * (round + 1)) : "small " + r, got.get(r));
                    }
                    String b = g.broadcastObject(me == 2 ? big : null, 2, String.class);
                    assertEquals(("r2").repeat(3000 * (round + 1)), b);
                    assertEquals("tiny", g.broadcastObject(me == 0 ? "tiny" : null, 0, String.class));
                }
            }, T);
        }
    }

    @Test
    void pointToPointKeepsTagOrderAcrossSmallAndLargeMessages() {
        try (ThreadRanks t = ThreadRanks.start(2, FastPathTest::opts, T)) {
            int big = 64 << 10; // elements: 256 KiB, above the mailbox's inline limit
            t.run(g -> {
                for (int round = 0; round < 20; round++) {
                    if (g.rank() == 0) {
                        // tag 1: A (small), C (large), E (small); tag 2: B (large), D (small)
                        g.send(filled(16, 100 + round), 1, 1);
                        g.send(filled(big, 200 + round), 1, 2);
                        g.send(filled(big, 300 + round), 1, 1);
                        g.send(filled(16, 400 + round), 1, 2);
                        g.send(filled(16, 500 + round), 1, 1);
                        g.sendObject("o" + round, 1);
                        g.sendObject("O".repeat(40_000) + round, 1);
                        g.sendObject("p" + round, 1);
                    } else {
                        Tensor b = Tensor.allocate(DType.F32, big);
                        Tensor d = Tensor.allocate(DType.F32, 16);
                        Tensor a = Tensor.allocate(DType.F32, 16);
                        Tensor c = Tensor.allocate(DType.F32, big);
                        Tensor e = Tensor.allocate(DType.F32, 16);
                        g.recv(b, 0, 2);
                        g.recv(d, 0, 2);
                        g.recv(a, 0, 1);
                        g.recv(c, 0, 1);
                        g.recv(e, 0, 1);
                        assertEquals(100 + round, a.getDouble(15), 0.0);
                        assertEquals(200 + round, b.getDouble(big - 1), 0.0);
                        assertEquals(300 + round, c.getDouble(big - 1), 0.0);
                        assertEquals(400 + round, d.getDouble(15), 0.0);
                        assertEquals(500 + round, e.getDouble(0), 0.0);
                        assertEquals("o" + round, g.recvObject(0, String.class));
                        assertEquals("O".repeat(40_000) + round, g.recvObject(0, String.class));
                        assertEquals("p" + round, g.recvObject(0, String.class));
                    }
                }
                // and a wrong count is a mismatch, as on the links
                if (g.rank() == 0) {
                    g.send(filled(8, 1), 1, 9);
                } else {
                    Tensor wrong = Tensor.allocate(DType.F32, 4);
                    CommException ex = org.junit.jupiter.api.Assertions.assertThrows(CommException.class,
                            () -> g.recv(wrong, 0, 9));
                    assertInstanceOf(CollectiveMismatchException.class, ex, ex.toString());
                }
            }, T);
        }
    }

    /**
     * The mailbox ring (64 KiB) wraps about a hundred times under records of every size up to the inline
     * limit: padding records at the end of the ring, stamps of the previous lap left behind, and a
     * receiver sometimes ahead of its sender and sometimes behind; every message arrives whole and in
     * order.
     */
    @Test
    void theMailboxRingWrapsManyTimesWithRecordsOfEverySize() {
        int[] counts = {1, 3, 17, 250, 1024, 4095, 4096}; // f32 elements: 4 B up to 16 KiB, the inline limit
        int messages = 1400;
        try (ThreadRanks t = ThreadRanks.start(2, FastPathTest::opts, T)) {
            t.run(g -> {
                for (int i = 0; i < messages; i++) {
                    int count = counts[i % counts.length];
                    if (g.rank() == 0) {
                        Tensor x = Tensor.allocate(DType.F32, count);
                        for (int k = 0; k < count; k++) {
                            x.setDouble(k, i * 10_000.0 + k);
                        }
                        g.send(x, 1, 0);
                    } else {
                        Tensor x = Tensor.allocate(DType.F32, count);
                        g.recv(x, 0, 0);
                        for (int k = 0; k < count; k++) {
                            assertEquals(i * 10_000.0 + k, x.getDouble(k), 0.0, "message " + i + " element " + k);
                        }
                        if (i % 97 == 0) {
                            Thread.onSpinWait(); // now and then the receiver falls behind
                            java.util.concurrent.locks.LockSupport.parkNanos(200_000);
                        }
                    }
                }
            }, T);
        }
    }

    /**
     * Bytes of the previous lap that look exactly like the stamp the receiver waits for are not taken for a
     * record. First lap: 64 records of 1 KiB (i64 payloads) whose every word holds the stamp a record
     * starting one lap later at that word would carry. Second lap: records of 48 bytes, sent slowly, so
     * that the receiver waits at positions where those words lie. Every message must arrive as sent.
     */
    @Test
    void stalePayloadThatLooksLikeAStampIsNotARecord() {
        int ring = ShmStaging.mailboxBytes(2);
        int bigWords = (1024 - ShmMailbox.HEADER) / 8; // a 1 KiB record
        try (ThreadRanks t = ThreadRanks.start(2, FastPathTest::opts, T)) {
            t.run(g -> {
                for (int k = 0; k < ring / 1024; k++) {
                    Tensor x = Tensor.allocate(DType.I64, bigWords);
                    if (g.rank() == 0) {
                        for (int j = 0; j < bigWords; j++) {
                            // stream position of this word + one lap + 1: the stamp of a record starting there then
                            x.setLong(j, (long) k * 1024 + ShmMailbox.HEADER + 8L * j + ring + 1);
                        }
                        g.send(x, 1, 0);
                    } else {
                        g.recv(x, 0, 0);
                        assertEquals((long) k * 1024 + ShmMailbox.HEADER + ring + 1, x.getLong(0), "record " + k);
                    }
                }
                for (int m = 0; m < 300; m++) {
                    Tensor y = Tensor.allocate(DType.I64, 2); // a 48-byte record
                    if (g.rank() == 0) {
                        y.setLong(0, m);
                        y.setLong(1, -m);
                        if (m % 3 == 0) {
                            java.util.concurrent.locks.LockSupport.parkNanos(100_000); // the receiver waits ahead
                        }
                        g.send(y, 1, 0);
                    } else {
                        g.recv(y, 0, 0);
                        assertEquals(m, y.getLong(0), "small message " + m);
                        assertEquals(-m, y.getLong(1), "small message " + m);
                    }
                }
            }, T);
        }
    }

    /**
     * A receiver that posts no receive bounds its sender through the mailbox as over the links: the
     * records it copies out stop at the credit ({@code tcp.sendBudgetMessages}), then the ring fills and
     * the sender's next send times out naming its peer.
     */
    @Test
    void aSenderRunsNoFurtherAheadOfItsReceiverThanTheCredit() {
        try (ThreadRanks t = ThreadRanks.start(2, r -> opts(r).option(TcpOptions.SEND_BUDGET_MESSAGES, "16"), T)) {
            List<Object> outcomes = t.outcomes(g -> {
                if (g.rank() == 1) {
                    try {
                        Thread.sleep(3000); // busy elsewhere: no receive posted
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    return -1;
                }
                Tensor x = filled(256, 1); // 1 KiB: records of 1,056 bytes, ring / 1,056 of them fit the ring
                int sent = 0;
                try {
                    while (sent < 10_000) {
                        g.send(x, 1, 0, Duration.ofMillis(500));
                        sent++;
                    }
                } catch (CommException e) {
                    assertInstanceOf(io.jcomm.api.CommTimeoutException.class, e, e.toString());
                    assertTrue(e.getMessage().contains("rank 1"), e.getMessage());
                }
                return sent;
            }, T);
            int sent = (Integer) outcomes.get(0);
            int ringRecords = ShmStaging.mailboxBytes(2) / 1056;
            assertTrue(sent >= 16 && sent <= 16 + ringRecords + 1, "sent " + sent + " before the bound held (credit 16, "
                    + ringRecords + " records in the ring)");
        }
    }

    /**
     * A peer that finished a step and closed at once (BYE) does not fail the rank still in that step: what
     * it published (a piece number, a mailbox record) before its goodbye still counts.
     */
    @Test
    void whatAPeerPublishedBeforeClosingStillCounts() {
        for (int i = 0; i < 20; i++) {
            try (ThreadRanks t = ThreadRanks.start(2, FastPathTest::opts, T)) {
                t.run(g -> {
                    Tensor x = filled(16, 5);
                    if (g.rank() == 0) {
                        g.barrier();
                        g.send(x, 1, 3);
                        g.close();
                    } else {
                        g.barrier();
                        Tensor y = Tensor.allocate(DType.F32, 16);
                        g.recv(y, 0, 3);
                        assertEquals(5, y.getDouble(15), 0.0);
                    }
                }, T);
            }
        }
    }

    private static Tensor filled(int count, double v) {
        Tensor x = Tensor.allocate(DType.F32, count);
        x.fill(v);
        return x;
    }

    /** Rank 0 all-reduces 1 KiB (fast path), rank 1 256 KiB (links): both fail quickly, one with a mismatch. */
    @Test
    void sizesThatDisagreeFailAsAMismatchNotAHang() {
        try (ThreadRanks t = ThreadRanks.start(2, FastPathTest::opts, T)) {
            long start = System.nanoTime();
            List<Object> outcomes = t.outcomes(g -> {
                Tensor x = Tensor.allocate(DType.F32, g.rank() == 0 ? 256 : 65536);
                g.allReduce(x, ReduceOp.SUM);
                return "completed";
            }, T);
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertInstanceOf(CommException.class, outcomes.get(0), outcomes.toString());
            assertInstanceOf(CommException.class, outcomes.get(1), outcomes.toString());
            assertTrue(outcomes.stream().anyMatch(o -> o instanceof CollectiveMismatchException), outcomes.toString());
            assertTrue(ms < 10_000, "failed after " + ms + " ms (group timeout 20 s)");
        }
    }
    /**
     * All-to-all and all-to-all-v through the fast path, exactly: three ranks, parts of every size up to
     * what fits a region (64 KiB in all), variable counts (rank r sends rank q {@code (r + 2q) % 5 * k}
     * elements, zero included), and an all-to-all-v whose inputs fit on two ranks but not on the third:
     * every rank sees it and all exchange over the links, with the same results.
     */
    @Test
    void allToAllAndAllToAllVAreExactOnTheFastPathAndFallBackTogether() {
        int n = 3;
        try (ThreadRanks t = ThreadRanks.start(n, FastPathTest::opts, T)) {
            t.run(g -> {
                int me = g.rank();
                for (int part : new int[] {1, 64, 1024, 5461}) { // 5461 x 3 f32 = 64 KiB less 4 bytes
                    Tensor in = Tensor.allocate(DType.F32, (long) n * part);
                    Tensor out = Tensor.allocate(DType.F32, (long) n * part);
                    for (int i = 0; i < in.numel(); i++) {
                        in.setDouble(i, 1000 * me + i);
                    }
                    g.allToAll(out, in);
                    for (int p = 0; p < n; p++) {
                        for (int i = 0; i < part; i += Math.max(1, part / 7)) {
                            assertEquals(1000 * p + (long) me * part + i, (long) out.getDouble((long) p * part + i),
                                    "part " + part + " from " + p + " at " + i);
                        }
                    }
                }
                for (int k : new int[] {1, 100, 1000, 4000}) { // k = 4000: rank 2 sends 24,000 f32, no fit
                    long[] inCounts = new long[n];
                    long[] outCounts = new long[n];
                    for (int q = 0; q < n; q++) {
                        inCounts[q] = (long) ((me + 2 * q) % 5) * k * (k == 4000 && me != 2 ? 0 : 1);
                        outCounts[q] = (long) ((q + 2 * me) % 5) * k * (k == 4000 && q != 2 ? 0 : 1);
                    }
                    Tensor in = Tensor.allocate(DType.F32, java.util.Arrays.stream(inCounts).sum());
                    Tensor out = Tensor.allocate(DType.F32, java.util.Arrays.stream(outCounts).sum());
                    long at = 0;
                    for (int q = 0; q < n; q++) {
                        for (long i = 0; i < inCounts[q]; i++) {
                            in.setDouble(at++, 100_000 * me + 1000 * q + i % 1000);
                        }
                    }
                    g.allToAllV(out, in, outCounts, inCounts);
                    at = 0;
                    for (int p = 0; p < n; p++) {
                        for (long i = 0; i < outCounts[p]; i++) {
                            assertEquals(100_000 * p + 1000 * me + i % 1000, (long) out.getDouble(at++),
                                    "k " + k + " from " + p + " at " + i);
                        }
                    }
                }
            }, T);
        }
    }

    /** An all-to-all-v whose counts disagree on the fast path fails as a mismatch naming the sender, quickly. */
    @Test
    void allToAllVCountsThatDisagreeFailAsAMismatchOnTheFastPath() {
        try (ThreadRanks t = ThreadRanks.start(2, FastPathTest::opts, T)) {
            long start = System.nanoTime();
            List<Object> outcomes = t.outcomes(g -> {
                long[] counts = {4, 4};
                long[] expect = g.rank() == 1 ? new long[] {5, 4} : counts; // rank 1 expects 5 from rank 0
                g.allToAllV(Tensor.allocate(DType.F32, expect[0] + expect[1]), Tensor.allocate(DType.F32, 8), expect,
                        counts);
                return "completed";
            }, T);
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertInstanceOf(CollectiveMismatchException.class, outcomes.get(1), outcomes.toString());
            assertTrue(((Exception) outcomes.get(1)).getMessage().contains("rank 0 sends 4 elements to this rank, which "
                    + "expects 5"), outcomes.toString());
            assertTrue(ms < 10_000, "failed after " + ms + " ms (group timeout 20 s)");
        }
    }
}
