package io.jcomm.parallel;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.mq.AeronMedia;
import io.jcomm.mq.MessageQueueOptions;
import io.jcomm.parallel.testkit.ThreadJob;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Host topology, the TP broadcaster, one-step initialisation, custom groups and the facade, with ranks as threads. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ParallelStateFeaturesTest {

    private static final Duration T = Duration.ofSeconds(30);

    private static ParallelStateOptions.Builder quick() {
        return ParallelStateOptions.builder().tpMessageQueue(false).cpuOption("tcp.shm.ringBytes", "65536");
    }

    @Test
    void ranksToldTheyAreOnDifferentHostsAreTreatedSo() {
        // ranks 0,1 on host a, ranks 2,3 on host b (one machine, told otherwise)
        try (ThreadJob job = ThreadJob.start(4, r -> ThreadJob.config(r, 4, r < 2 ? "host-a" : "host-b", T),
                r -> quick().build(), T)) {
            job.run(ps -> {
                ps.initializeModelParallel(2, 2);
                HostTopology t = ps.topology();
                assertEquals(2, t.nodeCount());
                assertEquals(List.of("host-a", "host-b"), t.hosts());
                assertEquals(ps.rank() < 2 ? List.of(0, 1) : List.of(2, 3), t.ranksOnHostOf(ps.rank()));
                assertEquals(ps.rank() / 2, t.nodeRankOf(ps.rank()));
                assertTrue(ps.tp().isNodeLocal());   // (0,1) and (2,3): one host each
                assertFalse(ps.pp().isNodeLocal());  // (0,2) and (1,3): across hosts
                assertFalse(ps.world().isNodeLocal());
                ps.pp().barrier();
                ps.world().barrier();
                assertEquals("w", ps.pp().broadcastObject(ps.pp().isFirstRank() ? "w" : null, 0, String.class));
                assertEquals(10, ps.world().allReduce(Tensor.ofInts(ps.rank() + 1)).getLong(0));
            }, T);
        }
        try (ThreadJob job = ThreadJob.start(3, r -> ThreadJob.config(r, 3, "node-" + r, T), r -> quick().build(), T)) {
            job.run(ps -> {
                assertEquals(3, ps.topology().nodeCount());
                assertFalse(ps.world().isNodeLocal());
                ps.world().barrier();
            }, T);
        }
    }

    private static ParallelStateOptions.Builder withBroadcaster() {
        return ParallelStateOptions.builder().cpuOption("tcp.shm.ringBytes", "65536")
                .messageQueueOptions(MessageQueueOptions.builder().ipcTermLength(64 << 10).ipcMtu(8192)
                        .udpTermLength(64 << 10).build());
    }

    @Test
    void tpGroupsGetABroadcasterDuringCreationWhenAsked() {
        try (ThreadJob job = ThreadJob.start(4, withBroadcaster().broadcasterInBackground(false).build(), T)) {
            job.run(ps -> {
                ps.initializeModelParallel(2, 2);
                GroupCoordinator tp = ps.tp();
                assertTrue(tp.messageQueue().isPresent()); // made with the group
                assertTrue(tp.broadcastsThroughQueue());
                assertEquals(0, tp.messageQueue().get().writerRank());
                assertTrue(ps.pp().messageQueue().isEmpty());
                assertFalse(ps.pp().hasBroadcaster());
                assertTrue(ps.world().messageQueue().isEmpty());
                broadcastsArriveIntact(ps, tp);
            }, T);
        }
    }

    @Test
    void aBackgroundBroadcasterTakesOverBetweenTwoBroadcastsWithoutLosingOne() {
        try (ThreadJob job = ThreadJob.start(4, withBroadcaster().build(), T)) {
            job.run(ps -> {
                ps.initializeModelParallel(2, 2);
                GroupCoordinator tp = ps.tp();
                assertTrue(tp.hasBroadcaster());
                assertFalse(ps.pp().hasBroadcaster());
                // usable at once, whether or not the queue is ready yet
                assertEquals("first@" + tp.firstRank(), tp.broadcastObject(tp.rankInGroup() == 0 ? "first@" + ps.rank() : null,
                        0, String.class));
                assertTrue(tp.awaitMessageQueue(T).isPresent());
                assertEquals(0, tp.messageQueue().get().writerRank());
                // the writer's next broadcast carries the switch; every later one goes through the queue
                broadcastsArriveIntact(ps, tp);
                assertTrue(tp.broadcastsThroughQueue());
            }, T);
        }
    }

    @Test
    void closingLeavesNoAeronThreadBehind() throws Exception {
        long before = aeronThreads();
        for (int round = 0; round < 4; round++) {
            boolean await = round % 2 == 0; // else close while the driver and queues are still being made
            try (ThreadJob job = ThreadJob.start(4, withBroadcaster().build(), T)) {
                job.run(ps -> {
                    ps.initializeModelParallel(2, 2);
                    if (await) {
                        assertTrue(ps.tp().awaitMessageQueue(T).isPresent());
                    }
                }, T);
            }
            // close returned: the driver's directory is gone even if the process exited now
            String mine = AeronMedia.DIR_PREFIX + "job-" + ProcessHandle.current().pid() + "-";
            try (java.util.stream.Stream<java.nio.file.Path> dirs = java.nio.file.Files.list(java.nio.file.Path.of("/dev/shm"))) {
                assertEquals(List.of(), dirs.map(d -> d.getFileName().toString()).filter(n -> n.startsWith(mine)).toList());
            }
        }
        // the clients' and drivers' threads end with close (give their last duty cycle a moment)
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (aeronThreads() > before && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        assertEquals(before, aeronThreads(), () -> "Aeron threads left: " + Thread.getAllStackTraces().keySet().stream()
                .map(Thread::getName).filter(n -> n.contains("aeron")).toList());
    }

    private static long aeronThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().contains("aeron")).count();
    }

    @Test
    void aBroadcasterThatCannotBeMadeLeavesBroadcastsOnTheCpuSide() {
        // the media driver's directory does not exist: every rank's background creation fails
        MessageQueueOptions mq = MessageQueueOptions.builder().ipcTermLength(64 << 10).ipcMtu(8192).udpTermLength(64 << 10)
                .mediaOptions(io.jcomm.mq.AeronMedia.Options.builder().baseDir(java.nio.file.Path.of("/nonexistent-jcomm-dir"))
                        .build()).build();
        try (ThreadJob job = ThreadJob.start(4, withBroadcaster().messageQueueOptions(mq).build(), T)) {
            job.run(ps -> {
                ps.initializeModelParallel(2, 2);
                GroupCoordinator tp = ps.tp();
                assertTrue(tp.hasBroadcaster());
                assertTrue(tp.awaitMessageQueue(T).isEmpty());
                broadcastsArriveIntact(ps, tp);
                assertFalse(tp.broadcastsThroughQueue());
            }, T);
        }
    }

    /** 50 objects and a tensor dict from the writer, one object from the other rank: exact values everywhere. */
    private static void broadcastsArriveIntact(ParallelState ps, GroupCoordinator tp) {
        for (int i = 0; i < 50; i++) {
            String v = tp.broadcastObject(tp.rankInGroup() == 0 ? "m" + i + "@" + ps.rank() : null, 0, String.class);
            assertEquals("m" + i + "@" + tp.firstRank(), v);
        }
        // from the other rank: not the writer, so through shared memory
        assertEquals(List.of(1, 2), tp.broadcastObject(tp.rankInGroup() == 1 ? List.of(1, 2) : null, 1, List.class));
        Map<String, Object> d = tp.broadcastTensorDict(Map.of("x", Tensor.ofInts(ps.rank()), "n", 3), 0);
        assertEquals(tp.firstRank(), ((Tensor) d.get("x")).getLong(0));
        assertEquals(3, d.get("n"));
    }

    @Test
    void broadcastersOnlyAcrossHostsWhenAsked() {
        ParallelStateOptions o = quick().tpMessageQueue(true).messageQueueAcrossHostsOnly(true).build();
        // TP groups {0,1} and {2,3}: {0,1} on one host, {2,3} across two
        String[] hosts = {"a", "a", "b", "c"};
        try (ThreadJob job = ThreadJob.start(4, r -> ThreadJob.config(r, 4, hosts[r], T), r -> o, T)) {
            job.run(ps -> {
                ps.initializeModelParallel(2, 2);
                boolean spans = ps.rank() >= 2;
                assertEquals(spans, ps.tp().hasBroadcaster());
                assertEquals(spans, ps.tp().awaitMessageQueue(T).isPresent());
                assertEquals(!spans, ps.tp().isNodeLocal());
                String v = ps.tp().broadcastObject(ps.tp().rankInGroup() == 0 ? "hi" + ps.rank() : null, 0, String.class);
                assertEquals("hi" + ps.tp().firstRank(), v);
            }, T);
        }
    }

    @Test
    void oneStepInitializeEqualsTwoSteps() {
        List<List<List<Integer>>> twoStep;
        try (ThreadJob job = ThreadJob.start(8, quick().build(), T)) {
            twoStep = job.call(ps -> {
                ps.initializeModelParallel(2, 2, 2);
                return List.of(ps.tp().ranks(), ps.pp().ranks(), ps.dp().ranks(), ps.ep().ranks());
            }, T);
        }
        try (ThreadJob job = ThreadJob.start(8, r -> ThreadJob.config(r, 8, "h", T), r -> quick().build(),
                ParallelSizes.of(2, 2, 2), T)) {
            List<List<List<Integer>>> oneStep = job.call(ps -> {
                assertTrue(ps.isModelParallelInitialized());
                assertEquals(List.of("world", ps.tp().name(), ps.pp().name(), ps.dp().name(), ps.ep().name()),
                        ps.groups().names());
                ps.ensureModelParallelInitialized(2, 2, 2);
                assertEquals(4, ps.ep().allReduce(Tensor.ofLongs(1)).getLong(0));
                // DP agreement: every DP rank gets the same reduction; the input is not modified
                long[] mine = {ps.rank(), 100 - ps.rank(), ps.rank() % 3};
                long[] max = ps.dpAgree(mine, ReduceOp.MAX);
                long[] sum = ps.dpAgree(mine, ReduceOp.SUM);
                assertArrayEquals(new long[] {ps.rank(), 100 - ps.rank(), ps.rank() % 3}, mine);
                List<Integer> dpRanks = ps.dp().ranks();
                assertArrayEquals(new long[] {dpRanks.stream().mapToLong(Integer::longValue).max().orElseThrow(),
                    100 - dpRanks.stream().mapToLong(Integer::longValue).min().orElseThrow(),
                    dpRanks.stream().mapToLong(r -> r % 3).max().orElseThrow()}, max);
                assertEquals(dpRanks.stream().mapToLong(Integer::longValue).sum(), sum[0]);
                assertArrayEquals(new long[0], ps.dpAgree(new long[0], ReduceOp.SUM));
                assertEquals(8, ps.world().allReduce(Tensor.ofLongs(1)).getLong(0));
                // re-initialising after destroy takes a fresh namespace
                ps.destroyModelParallel();
                ps.initializeModelParallel(4, 2);
                assertEquals(4, ps.tp().allReduce(Tensor.ofLongs(1)).getLong(0));
                ps.destroyModelParallel();
                ps.initializeModelParallel(2, 2, 2);
                return List.of(ps.tp().ranks(), ps.pp().ranks(), ps.dp().ranks(), ps.ep().ranks());
            }, T);
            assertEquals(twoStep, oneStep);
        }
    }

    @Test
    void customGroupsAreMadeByTheirMembersOnly() {
        ParallelState ps0;
        try (ThreadJob job = ThreadJob.start(4, quick().build(), T)) {
            ps0 = job.state(0);
            job.run(ps -> {
                int r = ps.rank();
                if (r == 0 || r == 3) {
                    GroupCoordinator g = ps.newGroup("ends", List.of(0, 3), false);
                    assertSame(g, ps.groups().get("ends"));
                    assertEquals(3, g.allReduce(Tensor.ofInts(r)).getLong(0));
                    assertThrows(IllegalStateException.class, () -> ps.newGroup("ends", List.of(0, 3), false));
                    ps.destroyGroup("ends");
                    assertTrue(g.isDestroyed());
                    assertTrue(ps.groups().find("ends").isEmpty());
                    // made again with the same name: a fresh namespace
                    GroupCoordinator again = ps.newGroup("ends", List.of(0, 3), false);
                    assertEquals(6, again.allReduce(Tensor.ofInts(r * 2)).getLong(0));
                } else {
                    assertThrows(IllegalArgumentException.class, () -> ps.newGroup("ends", List.of(0, 3), false));
                }
                assertThrows(IllegalArgumentException.class, () -> ps.destroyGroup("world"));
                assertThrows(IllegalArgumentException.class, () -> ps.newGroup("bad/name", List.of(r), false));
                assertThrows(IllegalArgumentException.class, () -> ps.newGroup("far", List.of(r, 9), false));
                assertThrows(IllegalStateException.class, ps::tp);
                assertThrows(IllegalStateException.class, ps::layout);
                assertThrows(IllegalArgumentException.class, () -> ps.initializeModelParallel(3, 1));
                ps.world().barrier();
            }, T);
        }
        assertThrows(IllegalStateException.class, () -> ps0.initializeModelParallel(1, 1));
        assertThrows(IllegalStateException.class, ps0::tp);
        ps0.close(); // idempotent
    }

    @Test
    void facadeOverOneDefaultInstance() throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        DistributedConfig c = DistributedConfig.builder().masterPort(port).timeout(T).build();
        assertFalse(DefaultParallelState.isInitialized());
        assertThrows(IllegalStateException.class, DefaultParallelState::get);
        try {
            ParallelState ps = DefaultParallelState.initDistributedEnvironment(c, quick().build());
            assertSame(ps, DefaultParallelState.initDistributedEnvironment(c));
            DefaultParallelState.ensureModelParallelInitialized(1, 1);
            assertSame(ps.tp(), DefaultParallelState.tp());
            assertSame(ps.world(), DefaultParallelState.world());
            assertArrayEquals(new double[] {5}, DefaultParallelState.tp().allReduce(Tensor.ofFloats(5)).toDoubleArray());
            assertThrows(IllegalStateException.class, () -> DefaultParallelState.initDistributedEnvironment(
                    c.toBuilder().worldSize(2).build()));
            DefaultParallelState.destroyModelParallel();
            assertFalse(ps.isModelParallelInitialized());
        } finally {
            DefaultParallelState.destroyDistributedEnvironment();
        }
        assertFalse(DefaultParallelState.isInitialized());
    }
}
