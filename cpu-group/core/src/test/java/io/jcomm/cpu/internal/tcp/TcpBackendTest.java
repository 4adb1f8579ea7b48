package io.jcomm.cpu.internal.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DType;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.TcpOptions;
import io.jcomm.cpu.internal.DefaultProcessGroup;
import io.jcomm.cpu.testkit.CpuGroupCases;
import io.jcomm.cpu.testkit.ThreadRanks;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/** Behaviour specific to the tcp backend: transport choice, shared memory, idle CPU. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class TcpBackendTest {

    private static CpuGroupOptions.Builder opts(int rank) {
        return CpuGroupOptions.builder().backend("tcp").groupName("tcptest").timeout(Duration.ofSeconds(20))
                .codec(CpuGroupCases.codec());
    }

    /** Skips (with the reason) where /dev/shm is too small for the shared-memory tests. */
    private static void assumeShm(long mib) throws IOException {
        long free = Files.getFileStore(Path.of("/dev/shm")).getUsableSpace() >> 20;
        org.junit.jupiter.api.Assumptions.assumeTrue(free >= mib,
                "/dev/shm has " + free + " MiB free; this test needs " + mib + " MiB");
    }

    private static TcpBackend tcp(ProcessGroup g) {
        return (TcpBackend) ((DefaultProcessGroup) g).backend();
    }

    @Test
    void sameHostPeersUseSharedMemoryAndLeaveNoFiles() throws IOException {
        assumeShm(48);
        String pid = Long.toString(ProcessHandle.current().pid());
        try (ThreadRanks t = ThreadRanks.start(3, r -> opts(r).option("tcp.shm.ringBytes", "1048576")
                .option("tcp.shm.stagingBytes", "4194304"), Duration.ofSeconds(20))) {
            // creating the group made no ring and no staging region: they come with the first large payload
            for (int r = 0; r < 3; r++) {
                assertFalse(tcp(t.group(r)).sharedCollectives());
                for (int p = 0; p < 3; p++) {
                    if (p != r) {
                        assertFalse(tcp(t.group(r)).sharedMemoryTo(p), r + " -> " + p);
                    }
                }
            }
            assertEquals(List.of(), jcommFiles(pid));
            t.run(g -> CpuGroupCases.all(false).stream().filter(c -> c.name().contains("1MiB")).forEach(c -> {
                try {
                    c.body().run(g);
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
            }), Duration.ofSeconds(60));
            // a ring is offered with the first large payload to a peer and used once the peer mapped it (1 MiB:
            // beyond what the small groups' mailboxes carry; a 1 MiB all-to-all reads its peers' memory instead)
            t.run(g -> {
                Tensor x = Tensor.allocate(DType.F32, 1 << 18);
                for (int round = 0; round < 3; round++) {
                    for (int p = 0; p < 3; p++) {
                        if (p == g.rank()) {
                            continue;
                        }
                        x.fill(10 * g.rank() + p + round);
                        g.send(x, p, round);
                    }
                    for (int p = 0; p < 3; p++) {
                        if (p != g.rank()) {
                            g.recv(x, p, round);
                            assertEquals(10 * p + g.rank() + round, x.getDouble(x.numel() - 1), 0.0);
                        }
                    }
                }
            }, Duration.ofSeconds(60));
            for (int r = 0; r < 3; r++) {
                assertTrue(tcp(t.group(r)).sharedCollectives(), "staging after 1 MiB collectives, rank " + r);
                for (int p = 0; p < 3; p++) {
                    if (p != r) {
                        assertTrue(tcp(t.group(r)).sharedMemoryTo(p), r + " -> " + p);
                    }
                }
            }
            // the files lost their names as soon as the peers had mapped them
            assertEquals(List.of(), jcommFiles(pid));
        }
    }

    /**
     * Rank 1 cannot use shared memory (its directory is missing): rank 0's ring offer is refused, rank
     * 1 creates nothing, the staging set-up finds that not every rank has a region, and every payload
     * goes by socket with exact results; rank 0's offered file is gone afterwards.
     */
    /** All-to-all parts of 4 KiB or more take the rings (below the 64 KiB threshold of other sends), exactly. */
    @Test
    void allToAllPartsFrom4KiBTakeTheRings() throws IOException {
        assumeShm(16);
        // the fast path off: an exchange this small goes through the fast-path regions otherwise
        try (ThreadRanks t = ThreadRanks.start(2, r -> opts(r).option("tcp.shm.ringBytes", "1048576")
                .option("tcp.shm.fastBytes", "0"), Duration.ofSeconds(20))) {
            t.run(g -> {
                Tensor in = Tensor.allocate(DType.F32, 2 * 2048); // 8 KiB parts
                Tensor out = Tensor.allocate(DType.F32, 2 * 2048);
                for (int round = 0; round < 3; round++) {
                    for (int i = 0; i < in.numel(); i++) {
                        in.setDouble(i, 1000 * g.rank() + 100 * round + i / 2048);
                    }
                    g.allToAll(out, in);
                    for (int p = 0; p < 2; p++) {
                        assertEquals(1000 * p + 100 * round + g.rank(), out.getDouble(p * 2048L + 7), 0.0);
                    }
                }
            }, Duration.ofSeconds(60));
            for (int r = 0; r < 2; r++) {
                assertTrue(tcp(t.group(r)).sharedMemoryTo(1 - r), "ring from rank " + r);
            }
        }
    }

    @Test
    void aRefusedRingOrStagingFallsBackToSockets() throws IOException {
        assumeShm(48);
        String pid = Long.toString(ProcessHandle.current().pid());
        try (ThreadRanks t = ThreadRanks.start(2, r -> opts(r).option("tcp.shm.ringBytes", "1048576")
                .option("tcp.shm.stagingBytes", "4194304")
                .option("tcp.shm.dir", r == 0 ? "/dev/shm" : "/nonexistent-jcomm-shm"), Duration.ofSeconds(20))) {
            t.run(g -> {
                Tensor x = Tensor.allocate(DType.F32, 1 << 18);
                for (int round = 0; round < 3; round++) {
                    x.fill(g.rank() + 1 + round);
                    g.allReduce(x, ReduceOp.SUM);
                    assertEquals(3 + 2 * round, x.getDouble(12345), 0.0);
                    int peer = 1 - g.rank();
                    if (g.rank() == 0) {
                        x.fill(7 + round);
                        g.send(x, peer, round);
                    } else {
                        g.recv(x, peer, round);
                        assertEquals(7 + round, x.getDouble(x.numel() - 1), 0.0);
                    }
                }
            }, Duration.ofSeconds(60));
            for (int r = 0; r < 2; r++) {
                assertFalse(tcp(t.group(r)).sharedCollectives(), "staging, rank " + r);
                assertFalse(tcp(t.group(r)).sharedMemoryTo(1 - r), "ring from rank " + r);
            }
            assertEquals(List.of(), jcommFiles(pid));
        }
    }

    private static List<String> jcommFiles(String pid) throws IOException {
        try (Stream<Path> files = Files.list(Path.of("/dev/shm"))) {
            return files.map(p -> p.getFileName().toString())
                    .filter(n -> (n.startsWith(ShmRings.PREFIX) || n.startsWith(ShmStaging.PREFIX))
                            && n.contains("-" + pid + "-")).toList();
        }
    }

    /**
     * Many small-piece collectives through the shared staging regions with random delays on every
     * rank, so that ranks run pieces apart: every result must be exact (races on the slots or
     * descriptors would corrupt data or raise false mismatches).
     */
    @Test
    void sharedStagingSurvivesRanksRunningApart() throws IOException {
        assumeShm(48);
        try (ThreadRanks t = ThreadRanks.start(4, r -> opts(r).option("tcp.shm.stagingBytes", "65536")
                .option("tcp.shm.ringBytes", "1048576")
                .option("tcp.shm.collectiveMinBytes", "1024"), Duration.ofSeconds(20))) {
            t.run(g -> {
                java.util.Random same = new java.util.Random(42);      // the same sequence on every rank
                java.util.Random jitter = new java.util.Random(g.rank()); // different delays per rank
                for (int it = 0; it < 200; it++) {
                    int kind = same.nextInt(4);
                    int n = 1 + same.nextInt(40_000);
                    if (jitter.nextInt(4) == 0) {
                        Thread.sleep(jitter.nextInt(3));
                    }
                    switch (kind) {
                        case 0: {
                            Tensor x = Tensor.allocate(DType.I32, n);
                            for (int i = 0; i < n; i++) {
                                x.setLong(i, i % 7 + g.rank());
                            }
                            g.allReduce(x, ReduceOp.SUM);
                            for (int i = 0; i < n; i += 97) {
                                assertEquals(4L * (i % 7) + 6, x.getLong(i), "allReduce it " + it);
                            }
                            break;
                        }
                        case 1: {
                            Tensor in = Tensor.allocate(DType.I32, n);
                            in.fill(g.rank() + 1);
                            Tensor out = Tensor.allocate(DType.I32, 4L * n);
                            g.allGather(out, in);
                            for (int r = 0; r < 4; r++) {
                                assertEquals(r + 1, out.getLong((long) r * n + n / 2), "allGather it " + it);
                            }
                            break;
                        }
                        case 2: {
                            int root = same.nextInt(4);
                            Tensor x = Tensor.allocate(DType.I32, n);
                            if (g.rank() == root) {
                                x.fill(root + 10);
                            }
                            g.broadcast(x, root);
                            assertEquals(root + 10, x.getLong(n - 1), "broadcast it " + it);
                            break;
                        }
                        default: {
                            Tensor in = Tensor.allocate(DType.I32, 4L * n);
                            for (int c = 0; c < 4; c++) {
                                in.flatSlice((long) c * n, n).fill(c * 100 + g.rank());
                            }
                            Tensor out = Tensor.allocate(DType.I32, n);
                            g.reduceScatter(out, in, ReduceOp.SUM);
                            assertEquals(400L * g.rank() + 6, out.getLong(n / 3), "reduceScatter it " + it);
                        }
                    }
                }
            }, Duration.ofSeconds(120));
            for (int r = 0; r < 4; r++) {
                assertTrue(tcp(t.group(r)).sharedCollectives(), "the collectives ran through the staging regions, rank " + r);
            }
        }
    }

    /**
     * Messages that arrive before their receive is posted are buffered within tcp.maxUnexpectedBytes;
     * past the bound the link stops reading, and resumes once a receive took a buffered message.
     */
    @Test
    void unexpectedMessagesAreBufferedWithinTheBudget() {
        try (ThreadRanks t = ThreadRanks.start(2, r -> opts(r).option("tcp.maxUnexpectedBytes", "1000")
                .option("tcp.shm", "false"), Duration.ofSeconds(20))) {
            t.run(g -> {
                if (g.rank() == 0) {
                    for (int tag = 1; tag <= 3; tag++) {
                        Tensor x = Tensor.allocate(DType.U8, 800);
                        x.fill(tag);
                        g.send(x, 1, tag); // completes once the socket took it
                    }
                } else {
                    Thread.sleep(300); // all three arrive first: one is buffered, the link stops reading
                    for (int tag = 1; tag <= 3; tag++) {
                        Tensor y = Tensor.allocate(DType.U8, 800);
                        g.recv(y, 0, tag);
                        assertEquals(tag, y.getLong(799), "tag " + tag);
                    }
                }
                g.barrier();
            }, Duration.ofSeconds(30));
        }
    }

    private static void assertDisconnected(java.net.Socket s, String what) throws IOException {
        s.setSoTimeout(10_000);
        try {
            assertEquals(-1, s.getInputStream().read(), what);
        } catch (java.net.SocketException reset) {
            // closed with our bytes unread: a reset, which is a disconnect too
        }
    }

    /**
     * A stranger that connects to a rank's listening port during set-up and sends garbage (or a hello
     * with a wrong nonce) is dropped; the group still forms and works.
     */
    @Test
    void strangersDuringSetUpAreDropped() throws Exception {
        io.jcomm.api.store.InMemoryStore store = new io.jcomm.api.store.InMemoryStore(Duration.ofSeconds(20));
        java.util.concurrent.ExecutorService ex = java.util.concurrent.Executors.newFixedThreadPool(3);
        try {
            java.util.concurrent.Future<ProcessGroup> g0 = ex.submit(() -> io.jcomm.cpu.CpuGroups.create(
                    opts(0).store(store).rank(0).size(2).option("tcp.shm", "false").build()));
            // rank 0 published its address and waits for rank 1: attack it first
            String[] addr = new String(store.get("tcptest/tcp/1/rank/0"), java.nio.charset.StandardCharsets.UTF_8).split(" ");
            int port = Integer.parseInt(addr[1]);
            ProcessGroup g1;
            java.net.Socket junk = new java.net.Socket("127.0.0.1", port);
            java.net.Socket fake = new java.net.Socket("127.0.0.1", port);
            try (junk; fake) {
                byte[] garbage = new byte[200];
                new java.util.Random(7).nextBytes(garbage);
                junk.getOutputStream().write(garbage);
                junk.getOutputStream().flush();
                java.nio.ByteBuffer hello = java.nio.ByteBuffer.allocate(Frame.SIZE).order(java.nio.ByteOrder.LITTLE_ENDIAN);
                hello.put(Frame.MAGIC).put((byte) Frame.HELLO).put(new byte[6]).putLong(12345L).putLong(1L).putInt(1)
                        .putInt(0).putInt(0).putInt(0);
                fake.getOutputStream().write(hello.array());
                fake.getOutputStream().flush();
                // rank 0 reads them once it drives its sockets, i.e. while it waits for rank 1's connection
                java.util.concurrent.Future<ProcessGroup> g1f = ex.submit(() -> io.jcomm.cpu.CpuGroups.create(
                        opts(1).store(store).rank(1).size(2).option("tcp.shm", "false").build()));
                assertDisconnected(junk, "the stranger must be disconnected");
                assertDisconnected(fake, "a hello with a wrong nonce must be refused");
                g1 = g1f.get(20, TimeUnit.SECONDS);
            }
            ProcessGroup first = g0.get(20, TimeUnit.SECONDS);
            try (first; g1) {
                java.util.concurrent.Future<Long> other = ex.submit(() -> {
                    Tensor x = Tensor.ofLongs(5);
                    first.allReduce(x, ReduceOp.SUM);
                    return x.getLong(0);
                });
                Tensor y = Tensor.ofLongs(7);
                g1.allReduce(y, ReduceOp.SUM);
                assertEquals(12L, y.getLong(0));
                assertEquals(12L, other.get(20, TimeUnit.SECONDS));
            }
        } finally {
            ex.shutdownNow();
            store.close();
        }
    }

    /**
     * A rank whose peer's published address refuses connections retries for a second, then fails
     * naming the peer; each attempt's link (and its 64 KiB receive buffer) goes with its channel, so
     * the retries hold no more than one at a time.
     */
    @Test
    void connectRetriesKeepNoBuffersOfFailedAttempts() throws Exception {
        long before = io.netty.util.internal.PlatformDependent.usedDirectMemory();
        org.junit.jupiter.api.Assumptions.assumeTrue(before >= 0, "Netty does not count its direct memory here");
        int deadPort;
        try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            deadPort = s.getLocalPort();
        }
        io.jcomm.api.store.InMemoryStore store = new io.jcomm.api.store.InMemoryStore(Duration.ofSeconds(20));
        // rank 0 "published" an address on another host where nothing listens, and never comes
        store.set("tcptest/tcp/1/rank/0", ("127.0.0.1 " + deadPort + " 1 elsewhere - - 1 1 -")
                .getBytes(java.nio.charset.StandardCharsets.UTF_8));
        java.util.concurrent.ExecutorService ex = java.util.concurrent.Executors.newSingleThreadExecutor();
        try {
            // a group across hosts connects on first use: its first barrier dials rank 0
            java.util.concurrent.Future<ProcessGroup> g1 = ex.submit(() -> {
                ProcessGroup g = io.jcomm.cpu.CpuGroups.create(opts(1).store(store).rank(1).size(2)
                        .option("tcp.shm", "false").option(io.jcomm.cpu.CpuGroups.CODEC_CHECK_OPTION, "false").build());
                try (g) {
                    g.barrier();
                }
                return g;
            });
            long most = 0;
            while (!g1.isDone()) {
                most = Math.max(most, io.netty.util.internal.PlatformDependent.usedDirectMemory() - before);
                Thread.sleep(2);
            }
            java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class, g1::get);
            assertTrue(e.getCause() instanceof io.jcomm.api.PeerFailureException, String.valueOf(e.getCause()));
            assertTrue(e.getCause().getMessage().contains("nothing listens"), e.getCause().getMessage());
            // ~50 attempts in the second of grace: 3 MiB if each kept its link's buffer
            assertTrue(most < 512 * 1024, "direct memory grew by " + most + " bytes during the retries");
        } finally {
            ex.shutdownNow();
            store.close();
        }
    }

    @Test
    void differentHostsUseSocketsOnly() {
        try (ThreadRanks t = ThreadRanks.start(2, r -> opts(r).option("tcp.hostId", "host-" + r), Duration.ofSeconds(20))) {
            assertFalse(tcp(t.group(0)).sharedMemoryTo(1));
            assertFalse(tcp(t.group(1)).sharedMemoryTo(0));
            t.run(g -> {
                Tensor x = Tensor.allocate(DType.F32, 1 << 20);
                x.fill(g.rank() + 1);
                g.allReduce(x, ReduceOp.SUM);
                assertEquals(3.0, x.getDouble(12345));
            }, Duration.ofSeconds(30));
        }
    }

    @Test
    void nioTransportWorks() {
        try (ThreadRanks t = ThreadRanks.start(3, r -> opts(r).option("tcp.transport", "nio"), Duration.ofSeconds(20))) {
            assertEquals("nio", tcp(t.group(0)).transport());
            for (CpuGroupCases.Case c : CpuGroupCases.all(false)) {
                if (c.name().startsWith("allReduce-f32") || c.name().startsWith("broadcast") || c.name().startsWith("sendRecv")
                        || c.name().startsWith("allGather-f32") || c.name().startsWith("reduceScatter-f32")) {
                    t.run(c.body(), Duration.ofSeconds(60));
                }
            }
        }
    }

    @Test
    void typedOptionsConfigureTheGroup() {
        TcpOptions typed = TcpOptions.builder().transport(TcpOptions.Transport.NIO).shm(TcpOptions.Shm.OFF)
                .sendBudgetMessages(4).segmentBytes(64 << 10).build();
        try (ThreadRanks t = ThreadRanks.start(3, r -> opts(r).options(typed), Duration.ofSeconds(20))) {
            assertEquals("nio", tcp(t.group(0)).transport());
            assertFalse(tcp(t.group(0)).sharedMemoryTo(1), TcpOptions.SHM + " = false: sockets only");
            t.run(g -> {
                Tensor x = Tensor.allocate(DType.F32, 1 << 18);
                x.fill(g.rank() + 1);
                g.allReduce(x, ReduceOp.SUM);
                assertEquals(6.0, x.getDouble(12345));
            }, Duration.ofSeconds(30));
        }
    }

    @Test
    void aPeerThatClosedCleanlyIsReportedAsClosedNotDead() {
        try (ThreadRanks t = ThreadRanks.start(2, TcpBackendTest::opts, Duration.ofSeconds(20))) {
            t.group(0).close();
            List<Object> out = t.outcomes(g -> g.rank() == 1
                    ? org.junit.jupiter.api.Assertions.assertThrows(io.jcomm.api.CommException.class,
                            () -> g.barrier(Duration.ofSeconds(10)))
                    : null, Duration.ofSeconds(20));
            org.junit.jupiter.api.Assertions.assertInstanceOf(io.jcomm.api.CommClosedException.class, out.get(1),
                    String.valueOf(out.get(1)));
            assertTrue(((Throwable) out.get(1)).getMessage().contains("peer rank 0 closed the group"), String.valueOf(out.get(1)));
        }
    }

    /**
     * A send that waits for the peer to make room (ring or credit) fails once the peer closed the group cleanly,
     * as a receive from it does, instead of waiting for its deadline: the peer will never consume it.
     */
    @ParameterizedTest
    @ValueSource(ints = {256, 256 << 10})
    void aSendWaitingForRoomFailsWhenThePeerClosesCleanly(int bytes) {
        try (ThreadRanks t = ThreadRanks.start(2, TcpBackendTest::opts, Duration.ofSeconds(20))) {
            java.util.concurrent.atomic.AtomicLong closedAt = new java.util.concurrent.atomic.AtomicLong();
            List<Object> out = t.outcomes(g -> {
                if (g.rank() == 1) {
                    try {
                        Thread.sleep(1000); // rank 0 fills the ring meanwhile; this rank receives nothing
                    } catch (InterruptedException e) {
                        throw new IllegalStateException(e);
                    }
                    closedAt.set(System.nanoTime());
                    g.close();
                    return null;
                }
                Tensor x = Tensor.allocate(DType.U8, bytes);
                io.jcomm.api.CommException e = assertThrows(io.jcomm.api.CommException.class, () -> {
                    for (int i = 0; i < 1_000_000; i++) {
                        g.send(x, 1, 7, Duration.ofSeconds(15));
                    }
                });
                return new Object[] {e, System.nanoTime()};
            }, Duration.ofSeconds(30));
            Object[] r = (Object[]) out.get(0);
            io.jcomm.api.CommException e = (io.jcomm.api.CommException) r[0];
            long ms = TimeUnit.NANOSECONDS.toMillis((long) r[1] - closedAt.get());
            org.junit.jupiter.api.Assertions.assertInstanceOf(io.jcomm.api.CommClosedException.class, e, String.valueOf(e));
            assertTrue(e.getMessage().contains("peer rank 1 closed the group"), e.getMessage());
            assertTrue(ms < 5000, "the send failed " + ms + " ms after the peer closed, not at once");
        }
    }

    @Test
    void waitingDoesNotBurnACore() {
        try (ThreadRanks t = ThreadRanks.start(2, TcpBackendTest::opts, Duration.ofSeconds(20))) {
            ThreadMXBean mx = ManagementFactory.getThreadMXBean();
            List<Object> cpu = t.outcomes(g -> {
                if (g.rank() == 1) {
                    try {
                        Thread.sleep(1500); // rank 0 waits in the barrier meanwhile
                    } catch (InterruptedException e) {
                        throw new AssertionError(e);
                    }
                    g.barrier();
                    return 0L;
                }
                long c0 = mx.getCurrentThreadCpuTime();
                g.barrier();
                return mx.getCurrentThreadCpuTime() - c0;
            }, Duration.ofSeconds(30));
            long ms = TimeUnit.NANOSECONDS.toMillis((Long) cpu.get(0));
            assertTrue(ms < 300, "a 1.5 s wait used " + ms + " ms of CPU");
        }
    }
    /**
     * A large point-to-point payload that arrives before its receive (its header by socket, its bytes in the
     * socket or in the shared-memory ring) is left there for a few milliseconds, then read straight into the
     * receive; a receive of another tag posted meanwhile, or a receive posted long after, still gets
     * everything exactly (the payload is buffered then), and so does a payload larger than a ring whose
     * receive comes a second late; two ranks that both send such a payload, then receive, finish.
     */
    @ParameterizedTest(name = "shm={0}")
    @ValueSource(booleans = {false, true})
    void largePayloadsAheadOfTheirReceiveWaitAndNothingIsLost(boolean shm) {
        int n = 1 << 18; // 1 MiB of f32
        int huge = 1 << 21; // 8 MiB of f32: more than a shared-memory ring holds (4 MiB)
        try (ThreadRanks t = ThreadRanks.start(2, r -> opts(r).option("tcp.shm", Boolean.toString(shm)),
                Duration.ofSeconds(20))) {
            t.run(g -> {
                for (int round = 0; round < 4; round++) {
                    Tensor big = Tensor.allocate(DType.F32, round == 3 ? huge : n);
                    int size = (int) big.numel();
                    Tensor small = Tensor.allocate(DType.F32, 4);
                    if (g.rank() == 0) {
                        for (int i = 0; i < size; i += 1000) {
                            big.setDouble(i, round * 7 + i % 13);
                        }
                        small.fill(round + 100);
                        g.send(big, 1, 1);
                        g.send(small, 1, 2);
                    } else {
                        if (round == 0) {
                            g.recv(small, 0, 2); // another tag first: the big payload ahead of it is buffered
                            g.recv(big, 0, 1);
                        } else {
                            if (round == 2) {
                                sleepMillis(50); // long after the deferral: buffered too
                            } else if (round == 3) {
                                sleepMillis(1000); // the progress threads move it meanwhile
                            }
                            g.recv(big, 0, 1); // at once: read straight into the tensor
                            g.recv(small, 0, 2);
                        }
                        for (int i = 0; i < size; i += 1000) {
                            assertEquals(round * 7 + i % 13, big.getDouble(i), 0.0, "round " + round + " at " + i);
                        }
                        assertEquals(round + 100, small.getDouble(3), 0.0);
                    }
                    g.barrier();
                }
                // both send more than a ring holds, then receive: each takes the other's payload at once
                Tensor mine = Tensor.allocate(DType.F32, huge);
                Tensor theirs = Tensor.allocate(DType.F32, huge);
                mine.fill(g.rank() + 1);
                g.send(mine, 1 - g.rank(), 3);
                g.recv(theirs, 1 - g.rank(), 3);
                assertEquals(2 - g.rank(), theirs.getDouble(huge - 1), 0.0);
                assertEquals(0, tcp(g).engine().early.bytes(), "every early buffer was released");
            }, Duration.ofSeconds(60));
        }
    }

    private static void sleepMillis(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
