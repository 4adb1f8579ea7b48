package io.jcomm.parallel;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotSame;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.DType;
import io.jcomm.api.Tensor;
import io.jcomm.api.work.Work;
import io.jcomm.parallel.testkit.ThreadJob;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Logic of ParallelState and GroupCoordinator with ranks as threads over one in-memory store. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ParallelStateThreadsTest {

    private static final Duration T = Duration.ofSeconds(30);

    private static ParallelStateOptions.Builder quick() {
        // no broadcaster: these tests are about logic; the broadcaster has its own test below
        return ParallelStateOptions.builder().tpMessageQueue(false).cpuOption("tcp.shm.ringBytes", "65536");
    }

    @Test
    void worldOfOneReturnsInputs() {
        try (ThreadJob job = ThreadJob.start(1, quick().build(), T)) {
            job.run(ps -> {
                ps.initializeModelParallel(1, 1);
                for (GroupCoordinator g : List.of(ps.world(), ps.tp(), ps.pp(), ps.dp(), ps.ep())) {
                    assertEquals(1, g.worldSize());
                    assertTrue(g.deviceCommunicator().isEmpty());
                    Tensor t = Tensor.ofFloats(1, 2, 3);
                    assertSame(t, g.allReduce(t));
                    assertSame(t, g.allGather(t, 0));
                    assertSame(t, g.reduceScatter(t, 0));
                    assertSame(t, g.gather(t, 0, 0));
                    assertSame(t, g.broadcast(t, 0));
                    assertArrayEquals(new double[] {1, 2, 3}, t.toDoubleArray());
                    g.barrier();
                    assertEquals("x", g.broadcastObject("x", 0, String.class));
                    Map<String, Object> d = Map.of("a", t);
                    assertSame(t, g.broadcastTensorDict(d, 0).get("a"));
                    g.sendTensorDict(d); // no peer: nothing to do
                    assertTrue(g.sendTensorDictAsync(d, 0, null).isSuccess());
                    assertThrows(IllegalArgumentException.class, g::recvTensorDict);
                    assertThrows(IllegalArgumentException.class, () -> g.send(t));
                    assertEquals(0, g.nextInGroup());
                    assertEquals(0, g.prevInGroup());
                    assertEquals(0, g.nextRank());
                    assertTrue(g.isFirstRank() && g.isLastRank());
                }
            }, T);
        }
    }

    @Test
    void tp2pp2MembershipCollectivesAndPipeline() {
        List<String> events = Collections.synchronizedList(new ArrayList<>());
        GroupListener listener = new GroupListener() {
            @Override
            public void created(GroupCoordinator g) {
                events.add("+" + g.rank() + ":" + g.name());
            }

            @Override
            public void destroyed(String name) {
                events.add(Thread.currentThread().getName() + ":-" + name);
            }
        };
        try (ThreadJob job = ThreadJob.start(4, quick().listener(listener).build(), T)) {
            job.run(ps -> {
                ps.initializeModelParallel(2, 2);
                int r = ps.rank();
                RankLayout l = RankLayout.of(4, 2, 2, 1);
                assertEquals(l.tpGroups().get(RankLayout.indexOf(l.tpGroups(), r)), ps.tp().ranks());
                assertEquals(l.ppGroups().get(RankLayout.indexOf(l.ppGroups(), r)), ps.pp().ranks());
                assertEquals(List.of(r), ps.dp().ranks());
                assertEquals(l.epGroups().get(RankLayout.indexOf(l.epGroups(), r)), ps.ep().ranks());
                assertEquals("tp:" + (r / 2), ps.tp().name());
                assertEquals("pp:" + (r % 2), ps.pp().name());
                assertEquals(List.of("world", "tp:" + (r / 2), "pp:" + (r % 2), "dp:" + List.of(0, 2, 1, 3).indexOf(r),
                        "ep:" + (r / 2)), ps.groups().names());
                assertSame(ps.pp(), ps.groups().get("pp:" + (r % 2)));
                assertTrue(ps.groups().find("tp:9").isEmpty());
                assertThrows(IllegalArgumentException.class, () -> ps.groups().get("nope"));
                assertTrue(ps.tp().isNodeLocal());
                assertEquals(1, ps.topology().nodeCount());

                // rank helpers (global) and default peers (group-local)
                GroupCoordinator pp = ps.pp();
                assertEquals(r % 2, pp.firstRank());
                assertEquals(r % 2 + 2, pp.lastRank());
                assertEquals(r < 2, pp.isFirstRank());
                assertEquals(pp.ranks().get(1 - pp.rankInGroup()), pp.nextRank());
                assertEquals(pp.nextRank(), pp.prevRank()); // wraps around with 2 members

                // all-reduce in every TP group
                Tensor t = Tensor.ofFloats(r, 10 * r);
                ps.tp().allReduce(t);
                int base = (r / 2) * 2;
                assertArrayEquals(new double[] {2 * base + 1, 10 * (2 * base + 1)}, t.toDoubleArray());

                // all-gather along dim 1, reduce-scatter, gather, broadcast in the world
                Tensor row = Tensor.ofFloats(r, r).reshape(1, 2);
                Tensor g = ps.world().allGather(row, 1);
                assertArrayEquals(new long[] {1, 8}, g.shape());
                assertArrayEquals(new double[] {0, 0, 1, 1, 2, 2, 3, 3}, g.toDoubleArray());
                Tensor rs = ps.world().reduceScatter(Tensor.ofFloats(1, 2, 3, 4, 5, 6, 7, 8), 0);
                assertArrayEquals(new double[] {4 * (2 * r + 1), 4 * (2 * r + 2)}, rs.toDoubleArray());
                Tensor ga = ps.world().gather(Tensor.ofInts(r), 3, 0);
                if (r == 3) {
                    assertArrayEquals(new double[] {0, 1, 2, 3}, ga.toDoubleArray());
                } else {
                    assertNull(ga);
                }
                Tensor b = ps.world().broadcast(Tensor.ofLongs(r == 2 ? 42 : 0), 2);
                assertEquals(42, b.getLong(0));

                // objects: node-local broadcast, fallback to the CPU group for big ones
                assertEquals("from-1", ps.world().broadcastObject("from-" + r, 1, String.class));
                String big = "x".repeat(200_000);
                assertEquals(big, ps.world().broadcastObject(r == 0 ? big : null, 0, String.class));
                ps.world().barrier();
                ps.tp().barrier();

                // pipeline: stage 0 sends a dict to stage 1, with and without the TP slice hand-off
                Map<String, Object> dict = new LinkedHashMap<>();
                dict.put("hidden", Tensor.ofFloats(1, 2, 3, 4, 5, 6).reshape(2, 3));
                dict.put("odd", Tensor.ofInts(7, 8, 9)); // 3 % 2 != 0: sent whole
                dict.put("empty", Tensor.allocate(DType.F32, 0, 4));
                dict.put("step", 5);
                dict.put("none", null);
                for (GroupCoordinator ag : new GroupCoordinator[] {null, ps.tp()}) {
                    if (pp.isFirstRank()) {
                        pp.sendTensorDict(dict, pp.nextInGroup(), ag);
                    } else {
                        Map<String, Object> got = pp.recvTensorDict(pp.prevInGroup(), ag);
                        assertEquals(List.of("hidden", "odd", "empty", "step", "none"), new ArrayList<>(got.keySet()));
                        assertTrue(((Tensor) dict.get("hidden")).contentEquals((Tensor) got.get("hidden")));
                        assertTrue(((Tensor) dict.get("odd")).contentEquals((Tensor) got.get("odd")));
                        assertArrayEquals(new long[] {0, 4}, ((Tensor) got.get("empty")).shape());
                        assertEquals(5, got.get("step"));
                        assertNull(got.get("none"));
                    }
                }
                // a stream of hand-offs received into the previous step's tensors: the same tensors come back,
                // filled with each step's values; a tensor that does not fit (another shape) is allocated
                Map<String, Object> previous = null;
                for (int step = 0; step < 4; step++) {
                    Map<String, Object> d = new LinkedHashMap<>();
                    d.put("hidden", Tensor.ofFloats(step, step + 1, step + 2, step + 3, step + 4, step + 5).reshape(2, 3));
                    d.put("odd", step == 3 ? Tensor.ofInts(1, 2) : Tensor.ofInts(step, step, step));
                    if (pp.isFirstRank()) {
                        pp.sendTensorDict(d, pp.nextInGroup(), ps.tp());
                    } else {
                        Map<String, Object> got = pp.recvTensorDict(pp.prevInGroup(), ps.tp(), previous);
                        assertTrue(((Tensor) d.get("hidden")).contentEquals((Tensor) got.get("hidden")), "step " + step);
                        assertTrue(((Tensor) d.get("odd")).contentEquals((Tensor) got.get("odd")), "step " + step);
                        if (previous != null) {
                            assertSame(previous.get("hidden"), got.get("hidden"), "received into the previous tensor");
                            if (step == 3) {
                                assertNotSame(previous.get("odd"), got.get("odd"), "another shape: a new tensor");
                            } else {
                                assertSame(previous.get("odd"), got.get("odd"));
                            }
                        }
                        previous = got;
                    }
                }
                // async send: buffers kept, waiting idempotent
                if (pp.isFirstRank()) {
                    Work<Void> w = pp.sendTensorDictAsync(dict, pp.nextInGroup(), ps.tp());
                    w.await();
                    w.await();
                    assertTrue(w.isSuccess());
                } else {
                    assertTrue(((Tensor) dict.get("hidden")).contentEquals((Tensor) pp.recvTensorDict(pp.prevInGroup(),
                            ps.tp()).get("hidden")));
                }
                // vLLM's isend/irecv pair: both return work; the receiver's result is the dict
                for (GroupCoordinator ag : new GroupCoordinator[] {null, ps.tp()}) {
                    if (pp.isFirstRank()) {
                        pp.isendTensorDict(dict, pp.nextInGroup(), ag).await();
                    } else {
                        Work<Map<String, Object>> w = pp.irecvTensorDict(pp.prevInGroup(), ag);
                        Map<String, Object> got = w.await();
                        assertTrue(w.isSuccess());
                        assertSame(got, w.await(), "idempotent");
                        assertEquals(List.of("hidden", "odd", "empty", "step", "none"), new ArrayList<>(got.keySet()));
                        assertTrue(((Tensor) dict.get("hidden")).contentEquals((Tensor) got.get("hidden")));
                        assertTrue(((Tensor) dict.get("odd")).contentEquals((Tensor) got.get("odd")));
                        assertEquals(5, got.get("step"));
                    }
                }

                // broadcast of a dict inside the TP group
                Map<String, Object> src = Map.of("w", Tensor.ofDoubles(r, r + 0.5));
                Map<String, Object> got = ps.tp().broadcastTensorDict(src, 0);
                assertArrayEquals(new double[] {base, base + 0.5}, ((Tensor) got.get("w")).toDoubleArray());

                // ensure: same sizes fine, other sizes refused; initialize twice refused
                ps.ensureModelParallelInitialized(2, 2);
                IllegalStateException e = assertThrows(IllegalStateException.class, () -> ps.ensureModelParallelInitialized(4, 1));
                assertTrue(e.getMessage().contains("tensor parallel group already initialized"), e.getMessage());
                assertThrows(IllegalStateException.class, () -> ps.initializeModelParallel(2, 2));

                GroupCoordinator oldTp = ps.tp();
                ps.destroyModelParallel();
                assertTrue(oldTp.isDestroyed());
                assertThrows(CommClosedException.class, () -> oldTp.allReduce(Tensor.ofFloats(1)));
                assertThrows(IllegalStateException.class, ps::tp);
                assertEquals(List.of("world"), ps.groups().names());

                // re-initialise with another layout on the same store
                ps.ensureModelParallelInitialized(4, 1);
                Tensor four = ps.tp().allReduce(Tensor.ofInts(1));
                assertEquals(4, four.getLong(0));
                assertEquals(1, ps.pp().worldSize());
            }, T);
        }
        for (int r = 0; r < 4; r++) {
            int rr = r;
            List<String> created = events.stream().filter(e -> e.startsWith("+" + rr + ":")).toList();
            assertEquals("+" + r + ":world", created.get(0));
            assertEquals(9, created.size(), created.toString()); // world, 4 groups, 4 groups again
            List<String> kinds = events.stream().filter(e -> e.startsWith("rank-" + rr + ":-"))
                    .map(e -> e.substring(e.indexOf(":-") + 2).split(":")[0]).toList();
            // destroyModelParallel, then close (the job's close runs on the rank's thread as well)
            assertEquals(List.of("tp", "pp", "dp", "ep", "tp", "pp", "dp", "ep", "world"), kinds, events.toString());
        }
    }

    @Test
    void twoIndependentJobsInOneJvm() throws Exception {
        try (ThreadJob a = ThreadJob.start(2, quick().storePrefix("job-a").build(), T);
             ThreadJob b = ThreadJob.start(2, quick().storePrefix("job-b").build(), T)) {
            Throwable[] fromB = new Throwable[1];
            Thread other = new Thread(() -> {
                try {
                    b.run(ps -> {
                        ps.initializeModelParallel(2, 1);
                        assertEquals(20, ps.tp().allReduce(Tensor.ofInts(10)).getLong(0));
                    }, T);
                } catch (Throwable t) {
                    fromB[0] = t;
                }
            });
            other.start();
            a.run(ps -> {
                ps.initializeModelParallel(1, 2);
                assertEquals(2, ps.pp().allReduce(Tensor.ofInts(1)).getLong(0));
                assertEquals(1, ps.tp().worldSize());
            }, T);
            other.join(T.toMillis());
            assertFalse(other.isAlive());
            if (fromB[0] != null) {
                throw new AssertionError("job b failed", fromB[0]);
            }
            assertEquals("tp:0", b.state(1).tp().name());
            assertEquals("pp:0", a.state(1).pp().name());
        }
    }

    @Test
    void monitoredBarrierOnTheCoordinatorsPassesWhenAllArrive() {
        try (ThreadJob job = ThreadJob.start(2, quick().build(), T)) {
            job.run(ps -> {
                ps.initializeModelParallel(2, 1);
                ps.world().monitoredBarrier(java.time.Duration.ofSeconds(10));
                ps.tp().monitoredBarrier(java.time.Duration.ofSeconds(10));
                ps.pp().monitoredBarrier(java.time.Duration.ofSeconds(10)); // size 1: returns at once
                assertArrayEquals(new double[] {3}, ps.tp().allReduce(Tensor.ofFloats(ps.rank() + 1)).toDoubleArray());
            }, T);
        }
    }
}
