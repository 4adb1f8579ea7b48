package io.jcomm.cpu.internal.tcp;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.internal.DefaultProcessGroup;
import io.jcomm.cpu.testkit.CpuGroupCases;
import io.jcomm.cpu.testkit.ThreadRanks;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Groups that span hosts connect each link on first use; above {@link MeshBootstrap#LARGE_ABOVE} ranks
 * their world-sized collectives keep to O(log N) peers.
 */
@Timeout(value = 90, unit = TimeUnit.SECONDS)
class LazyConnectTest {

    private static final Duration T = Duration.ofSeconds(20);
    private static final int N = 20;

    private static CpuGroupOptions.Builder opts(int rank, int hosts) {
        return CpuGroupOptions.builder().backend("tcp").groupName("lazy").timeout(T).codec(CpuGroupCases.codec())
                .option("tcp.hostId", "host-" + (rank % hosts));
    }

    private static TcpBackend tcp(ProcessGroup g) {
        return (TcpBackend) ((DefaultProcessGroup) g).backend();
    }

    /** ceil(log2 n). */
    private static int log2(int n) {
        return TcpBackend.ceilLog2(n);
    }

    @Test
    void creationAndBarrierUseLogarithmicallyManyLinksAndP2pConnectsOnFirstUse() {
        try (ThreadRanks t = ThreadRanks.start(N, r -> opts(r, 2), T)) {
            // creation makes no link: the codec check reads the fingerprints published with the addresses
            assertEquals(java.util.Collections.nCopies(N, 0), t.call(g -> tcp(g).linkedPeers(), T));
            // a barrier: the dissemination peers only
            t.run(ProcessGroup::barrier, T);
            List<Integer> links = t.call(g -> tcp(g).linkedPeers(), T);
            for (int r = 0; r < N; r++) {
                assertTrue(tcp(t.group(r)).connectsLazily());
                assertTrue(links.get(r) <= 2 * log2(N), "rank " + r + " has " + links.get(r) + " links");
            }
            // a lower rank sends first to a higher rank it has no link to: it asks that rank to connect
            t.run(g -> {
                if (g.rank() == 1) {
                    g.send(Tensor.ofInts(7, 8), 14, 0);
                } else if (g.rank() == 14) {
                    Tensor x = Tensor.ofInts(0, 0);
                    g.recv(x, 1, 0);
                    assertArrayEquals(new double[] {7, 8}, x.toDoubleArray());
                }
            }, T);
            // and a higher rank to a lower one, both ways at once
            t.run(g -> {
                int peer = g.rank() == 3 ? 17 : g.rank() == 17 ? 3 : -1;
                if (peer >= 0) {
                    Tensor out = Tensor.ofInts(g.rank());
                    Tensor in = Tensor.ofInts(-1);
                    g.batchIsendIrecv(List.of(io.jcomm.api.device.P2POp.send(out, peer), io.jcomm.api.device.P2POp.recv(in, peer))).await();
                    assertEquals(peer, in.toDoubleArray()[0]);
                }
            }, T);
            // gather and scatter take the binomial tree: every root, every rank's part in its place, no new link
            List<Integer> before = t.call(g -> tcp(g).linkedPeers(), T);
            t.run(g -> {
                for (int root : new int[] {0, 6, N - 1}) {
                    Tensor x = Tensor.ofInts(g.rank() * 10 + root, -g.rank());
                    Tensor all = Tensor.allocate(io.jcomm.api.DType.I32, 2 * N);
                    g.gather(all, x, root);
                    Tensor parts = Tensor.allocate(io.jcomm.api.DType.I32, 2 * N);
                    for (int r = 0; g.rank() == root && r < N; r++) {
                        assertEquals(r * 10 + root, all.buffer().getInt(8 * r), "gather to " + root + ", rank " + r);
                        assertEquals(-r, all.buffer().getInt(8 * r + 4), "gather to " + root + ", rank " + r);
                        parts.buffer().putInt(8 * r, r * 100 + root).putInt(8 * r + 4, ~r);
                    }
                    Tensor mine = Tensor.ofInts(-1, -1);
                    g.scatter(mine, parts, root);
                    assertArrayEquals(new double[] {g.rank() * 100 + root, ~g.rank()}, mine.toDoubleArray(), "scatter from " + root);
                }
            }, T);
            // so do the object broadcast and gather, small and large objects (past the inline payload) alike
            t.run(g -> {
                for (int root : new int[] {0, 6, N - 1}) {
                    for (int len : new int[] {0, 5, 70_000}) {
                        byte[] mine = new byte[len];
                        java.util.Arrays.fill(mine, (byte) (g.rank() + root));
                        byte[] got = g.broadcastObject(g.rank() == root ? mine : null, root, byte[].class);
                        assertEquals(len, got.length, "broadcastObject from " + root);
                        for (byte x : got) {
                            assertEquals((byte) (root + root), x, "broadcastObject from " + root);
                        }
                        List<byte[]> all = g.gatherObject(mine, root, byte[].class);
                        if (g.rank() != root) {
                            assertTrue(all == null || all.isEmpty(), "only the root gets the objects");
                            continue;
                        }
                        assertEquals(N, all.size());
                        for (int r = 0; r < N; r++) {
                            assertEquals(len, all.get(r).length, "gatherObject to " + root + ", rank " + r);
                            for (byte x : all.get(r)) {
                                assertEquals((byte) (r + root), x, "gatherObject to " + root + ", rank " + r);
                            }
                        }
                    }
                }
            }, T);
            assertEquals(before, t.call(g -> tcp(g).linkedPeers(), T), "gather, scatter and the objects made links");
            // an operation that needs everyone (all-to-all-v: every pair's counts) connects everyone, once
            t.run(g -> {
                Tensor x = Tensor.allocate(io.jcomm.api.DType.I32, N);
                for (int j = 0; j < N; j++) {
                    x.buffer().putInt(4 * j, g.rank() * 1000 + j);
                }
                Tensor all = Tensor.allocate(io.jcomm.api.DType.I32, N);
                long[] ones = new long[N];
                java.util.Arrays.fill(ones, 1);
                g.allToAllV(all, x, ones, ones);
                for (int i = 0; i < N; i++) {
                    assertEquals(i * 1000 + g.rank(), all.buffer().getInt(4 * i), "allToAllV from " + i);
                }
            }, T);
            assertEquals(List.of(N - 1), t.call(g -> tcp(g).linkedPeers(), T).stream().distinct().toList());
        }
    }

    @Test
    void aMemberWithOtherCodecRegistrationsFailsEveryRankAtCreationWithoutALink() {
        AssertionError e = assertThrows(AssertionError.class, () -> ThreadRanks.start(N, r -> {
            CpuGroupOptions.Builder b = opts(r, 2);
            if (r == 13) {
                b.codec(io.jcomm.cpu.codec.ForyCodec.defaults());
            }
            return b;
        }, T).close());
        assertInstanceOf(io.jcomm.api.ProtocolException.class, e.getCause(), String.valueOf(e.getCause()));
        assertTrue(e.getCause().getMessage().contains("different classes"), e.getCause().getMessage());
    }

    @Test
    void smallAllToAllTakesBrucksRoundsOnTheBarriersPeersAndLargeOnesConnectPairwise() {
        try (ThreadRanks t = ThreadRanks.start(N, r -> opts(r, 2), T)) {
            t.run(ProcessGroup::barrier, T);
            List<Integer> before = t.call(g -> tcp(g).linkedPeers(), T);
            // parts of 1, 3 and 1,000 i64 (Bruck up to about 43 KiB at 20 ranks), each value naming sender, receiver, index
            for (int part : new int[] {1, 3, 1000}) {
                t.run(g -> allToAllChecked(g, part), T);
            }
            assertEquals(before, t.call(g -> tcp(g).linkedPeers(), T), "a small all-to-all made links");
            t.run(g -> allToAllChecked(g, 8000), T); // 64 KB parts: pairwise, every peer
            for (int links : t.call(g -> tcp(g).linkedPeers(), T)) {
                assertEquals(N - 1, links);
            }
        }
    }

    private static void allToAllChecked(ProcessGroup g, int part) {
        int n = g.size();
        Tensor in = Tensor.allocate(io.jcomm.api.DType.I64, (long) part * n);
        for (int q = 0; q < n; q++) {
            for (int i = 0; i < part; i++) {
                in.buffer().putLong(8 * (q * part + i), ((long) g.rank() << 40) | ((long) q << 20) | i);
            }
        }
        Tensor out = Tensor.allocate(io.jcomm.api.DType.I64, (long) part * n);
        g.allToAll(out, in);
        for (int q = 0; q < n; q++) {
            for (int i = 0; i < part; i++) {
                assertEquals(((long) q << 40) | ((long) g.rank() << 20) | i, out.buffer().getLong(8 * (q * part + i)),
                        "part " + part + ": from " + q + " at " + i);
            }
        }
    }

    @Test
    void brucksAllToAllCoversSmallerPartsInLargerGroups() {
        long small = 64 << 10;
        assertEquals(1, TcpBackend.bruckBlocks(2));
        assertEquals(40, TcpBackend.bruckBlocks(20)); // 10 + 10 + 8 + 8 + 4
        assertEquals(5120, TcpBackend.bruckBlocks(1024));
        assertTrue(TcpBackend.bruckBeatsPairwise(40 << 10, 20, small));
        assertFalse(TcpBackend.bruckBeatsPairwise(48 << 10, 20, small), "48 KiB parts at 20 ranks: pairwise");
        assertTrue(TcpBackend.bruckBeatsPairwise(15 << 10, 1024, small));
        assertFalse(TcpBackend.bruckBeatsPairwise(17 << 10, 1024, small), "17 KiB parts at 1,024 ranks: pairwise");
        assertFalse(TcpBackend.bruckBeatsPairwise(TcpBackend.BRUCK_MAX_BYTES / 8, 1 << 20, 1L << 40), "one packing buffer");
    }

    /**
     * A lazily connected group keeps its listener open: a stranger's silent connections are held 2 N + 64 at
     * most (beyond that the oldest is dropped, so that a member connecting after the flood still gets in),
     * go with their buffers when they close, and are dropped when no hello came within
     * {@link MeshBootstrap#HELLO_WITHIN_MILLIS}; the group works throughout.
     */
    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void silentStrangersOnAListenerAreBoundedReleasedAndDroppedInTime() throws Exception {
        try (ThreadRanks t = ThreadRanks.start(2, r -> opts(r, 2), T)) {
            TcpBackend b0 = tcp(t.group(0));
            String[] addr = new String(t.store().get("lazy/tcp/1/rank/0", T), java.nio.charset.StandardCharsets.UTF_8).split(" ");
            int most = 2 * 2 + 64;
            long opened = System.nanoTime();
            List<java.net.Socket> silent = new java.util.ArrayList<>();
            try {
                for (int i = 0; i < most + 20; i++) {
                    silent.add(new java.net.Socket(addr[0], Integer.parseInt(addr[1])));
                }
                t.run(g -> {
                    g.barrier();
                    Tensor x = Tensor.ofLongs(g.rank() + 1);
                    g.allReduce(x, io.jcomm.api.ReduceOp.SUM);
                    assertEquals(3, x.buffer().getLong(0));
                }, T);
                assertTrue(b0.heldConnections() <= most + 1, b0.heldConnections() + " connections held");
                int dropped = 0;
                for (java.net.Socket s : silent) {
                    s.setSoTimeout(50);
                    try {
                        if (s.getInputStream().read() == -1) {
                            dropped++;
                        }
                    } catch (java.net.SocketTimeoutException stillOpen) {
                        // held, waiting for its hello
                    } catch (java.net.SocketException reset) {
                        dropped++;
                    }
                }
                assertTrue(dropped >= 20, dropped + " of " + silent.size() + " dropped at once");
                assertTrue(dropped <= 21, dropped + " of " + silent.size() + " dropped at once (the group linked, at most one more)");
                // the ones that leave take their buffers with them (the first 20 were dropped: the oldest)
                List<java.net.Socket> stay = silent.subList(silent.size() - 8, silent.size());
                for (java.net.Socket s : silent.subList(0, silent.size() - 8)) {
                    s.close();
                }
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
                while (b0.heldConnections() > 8 + 1 && System.nanoTime() < end) {
                    Thread.sleep(20);
                }
                assertTrue(b0.heldConnections() <= 8 + 1, b0.heldConnections() + " connections held after " + (silent.size() - 8)
                        + " left");
                // the rest hear nothing back and are dropped when their time for a hello is up
                for (java.net.Socket s : stay) {
                    s.setSoTimeout((int) MeshBootstrap.HELLO_WITHIN_MILLIS + 5_000);
                    try {
                        assertEquals(-1, s.getInputStream().read());
                    } catch (java.net.SocketException reset) {
                        // a reset is a drop too
                    }
                }
                long waited = (System.nanoTime() - opened) / 1_000_000;
                assertTrue(waited >= MeshBootstrap.HELLO_WITHIN_MILLIS - 1_000, "dropped after " + waited + " ms");
                t.run(ProcessGroup::barrier, T);
            } finally {
                for (java.net.Socket s : silent) {
                    s.close();
                }
            }
        }
    }

    @Test
    void recursiveDoublingCoversLargerAllReducesInLargerGroups() {
        long small = 64 << 10;
        for (int n : new int[] {17, 20, 64, 1024}) {
            assertTrue(TcpBackend.doublingBeatsRing(small, n, small), "up to tcp.smallBytes at " + n);
        }
        assertTrue(TcpBackend.doublingBeatsRing(400_000, 20, small));
        assertFalse(TcpBackend.doublingBeatsRing(800_000, 20, small), "0.8 MB at 20 ranks: the ring");
        assertTrue(TcpBackend.doublingBeatsRing(15L << 20, 1024, small));
        assertFalse(TcpBackend.doublingBeatsRing(17L << 20, 1024, small), "17 MiB at 1,024 ranks: the ring");
        assertFalse(TcpBackend.doublingBeatsRing(TcpBackend.DOUBLING_MAX_BYTES + 1, 1 << 20, 1L << 31), "one scratch buffer");
        long prev = 0;
        for (int n = 17; n <= 4096; n *= 2) { // the reach grows with the ranks
            long reach = small;
            while (TcpBackend.doublingBeatsRing(reach + 4096, n, small)) {
                reach += 4096;
            }
            assertTrue(reach > prev, n + " ranks: " + reach);
            prev = reach;
        }
    }

    @Test
    void worldCollectivesNeedOnlyTheBarriersPeers() {
        // above tcp.smallBytes: the chain, and the rings of all-gather and reduce-scatter; its all-reduce takes the
        // recursive doubling in f32 (0.4 MB) and the ring in i64 (0.8 MB) at 20 ranks
        int big = 100_003;
        try (ThreadRanks t = ThreadRanks.start(N, r -> opts(r, 2), T)) {
            t.run(g -> {
                int n = g.size();
                for (int count : new int[] {1, 7, big}) {
                    Tensor x = Tensor.allocate(io.jcomm.api.DType.F32, count);
                    Tensor y = Tensor.allocate(io.jcomm.api.DType.I64, count);
                    for (int i = 0; i < count; i++) {
                        x.buffer().putFloat(4 * i, g.rank() + i);
                        y.buffer().putLong(8 * i, (long) g.rank() << 40 | i);
                    }
                    g.allReduce(x, io.jcomm.api.ReduceOp.SUM);
                    g.allReduce(y, io.jcomm.api.ReduceOp.MAX);
                    for (int i = 0; i < count; i++) {
                        assertEquals(n * (n - 1) / 2.0f + (float) n * i, x.buffer().getFloat(4 * i), "sum at " + i);
                        assertEquals((long) (n - 1) << 40 | i, y.buffer().getLong(8 * i), "max at " + i);
                    }
                    for (int root : new int[] {0, 5, n - 1}) {
                        Tensor b = Tensor.allocate(io.jcomm.api.DType.I32, count);
                        for (int i = 0; g.rank() == root && i < count; i++) {
                            b.buffer().putInt(4 * i, root * 1000 + i);
                        }
                        g.broadcast(b, root);
                        for (int i = 0; i < count; i++) {
                            assertEquals(root * 1000 + i, b.buffer().getInt(4 * i), "broadcast from " + root + " at " + i);
                        }
                    }
                    Tensor mine = Tensor.allocate(io.jcomm.api.DType.I32, count);
                    for (int i = 0; i < count; i++) {
                        mine.buffer().putInt(4 * i, g.rank() * 7 + i);
                    }
                    Tensor all = Tensor.allocate(io.jcomm.api.DType.I32, (long) count * n);
                    g.allGather(all, mine);
                    Tensor part = Tensor.allocate(io.jcomm.api.DType.I32, count);
                    g.reduceScatter(part, all, io.jcomm.api.ReduceOp.SUM);
                    for (int i = 0; i < count; i++) {
                        for (int r = 0; r < n; r++) {
                            assertEquals(r * 7 + i, all.buffer().getInt(4 * (r * count + i)), "allGather " + r + "/" + i);
                        }
                        assertEquals(n * (g.rank() * 7 + i), part.buffer().getInt(4 * i), "reduceScatter at " + i);
                    }
                }
            }, T);
            List<Integer> links = t.call(g -> tcp(g).linkedPeers(), T);
            for (int r = 0; r < N; r++) {
                assertTrue(links.get(r) <= 2 * log2(N), "rank " + r + " has " + links.get(r) + " links");
            }
        }
    }

    @Test
    void oneHostGroupsConnectAtCreationAndSmallGroupsAcrossHostsOnFirstUseWithTheirDirectAlgorithms() {
        try (ThreadRanks t = ThreadRanks.start(MeshBootstrap.LARGE_ABOVE + 1, r -> opts(r, 1), T)) {
            for (int r = 0; r < t.size(); r++) {
                assertFalse(tcp(t.group(r)).connectsLazily());
                assertEquals(t.size() - 1, tcp(t.group(r)).linkedPeers());
            }
        }
        int n = MeshBootstrap.LARGE_ABOVE;
        try (ThreadRanks t = ThreadRanks.start(n, r -> opts(r, 2), T)) {
            for (int r = 0; r < n; r++) {
                assertTrue(tcp(t.group(r)).connectsLazily());
                assertFalse(tcp(t.group(r)).large());
            }
            assertEquals(java.util.Collections.nCopies(n, 0), t.call(g -> tcp(g).linkedPeers(), T));
            // a pipeline's sends between neighbours connect those pairs only
            t.run(g -> {
                Tensor x = Tensor.ofInts(g.rank());
                if (g.rank() % 2 == 0) {
                    g.send(x, g.rank() + 1, 0);
                } else {
                    g.recv(x, g.rank() - 1, 0);
                    assertEquals(g.rank() - 1, x.toDoubleArray()[0]);
                }
            }, T);
            assertEquals(java.util.Collections.nCopies(n, 1), t.call(g -> tcp(g).linkedPeers(), T));
            // the first collective connects every peer (the direct all-reduce talks to all)
            t.run(g -> {
                Tensor x = Tensor.ofLongs(1L << g.rank());
                g.allReduce(x, io.jcomm.api.ReduceOp.SUM);
                assertEquals((1L << n) - 1, x.buffer().getLong(0));
            }, T);
            assertEquals(java.util.Collections.nCopies(n, n - 1), t.call(g -> tcp(g).linkedPeers(), T));
        }
    }

    @Test
    void connectAtCreationGivesSmallGroupsAcrossHostsTheirMeshAtCreationAndLeavesLargeOnesLazy() {
        int n = MeshBootstrap.LARGE_ABOVE;
        try (ThreadRanks t = ThreadRanks.start(n, r -> opts(r, 2).option(io.jcomm.cpu.TcpOptions.CONNECT_AT_CREATION, "true"), T)) {
            for (int r = 0; r < n; r++) {
                assertFalse(tcp(t.group(r)).connectsLazily());
            }
            assertEquals(java.util.Collections.nCopies(n, n - 1), t.call(g -> tcp(g).linkedPeers(), T));
        }
        try (ThreadRanks t = ThreadRanks.start(n + 1, r -> opts(r, 2).option(io.jcomm.cpu.TcpOptions.CONNECT_AT_CREATION, "true"), T)) {
            assertTrue(tcp(t.group(0)).connectsLazily() && tcp(t.group(0)).large());
            assertEquals(java.util.Collections.nCopies(n + 1, 0), t.call(g -> tcp(g).linkedPeers(), T));
        }
    }

    @Test
    void aPeerThatClosedFailsTheFirstUseFastAndTyped() {
        try (ThreadRanks t = ThreadRanks.start(N, r -> opts(r, 2), T)) {
            t.group(9).close();
            List<Object> out = t.outcomes(g -> {
                if (g.rank() != 2 && g.rank() != 12) {
                    return "idle";
                }
                long t0 = System.nanoTime();
                try {
                    g.send(Tensor.ofInts(1), 9, 0); // rank 2 connects to 9's address, rank 12 asks 9 to connect
                    return "sent";
                } catch (PeerFailureException e) {
                    return (System.nanoTime() - t0) / 1_000_000 < 5_000 ? e : "slow: " + e;
                }
            }, T);
            for (int r : new int[] {2, 12}) {
                assertInstanceOf(PeerFailureException.class, out.get(r), "rank " + r + ": " + out.get(r));
                assertTrue(((PeerFailureException) out.get(r)).getMessage().contains("rank 9"), out.get(r).toString());
            }
            assertTrue(t.group(2).isPoisoned());
        }
    }

    @Test
    void aRankLostWithoutGoodbyeFailsEveryBarrierTypedBeforeTheDeadline() {
        try (ThreadRanks t = ThreadRanks.start(N, r -> opts(r, 2), T)) {
            tcp(t.group(9)).cutConnections(); // as a crash looks to the peers: resets, no goodbye, listener gone
            List<Object> out = t.outcomes(g -> {
                if (g.rank() == 9) {
                    return "cut";
                }
                long t0 = System.nanoTime();
                try {
                    g.barrier();
                    return "passed";
                } catch (io.jcomm.api.CommException e) {
                    long ms = (System.nanoTime() - t0) / 1_000_000;
                    return ms < T.toMillis() / 2 ? e : "after " + ms + " ms: " + e;
                }
            }, T.plusSeconds(10));
            for (int r = 0; r < N; r++) {
                if (r != 9) {
                    assertInstanceOf(PeerFailureException.class, out.get(r), "rank " + r + ": " + out.get(r));
                }
            }
        }
    }
}
