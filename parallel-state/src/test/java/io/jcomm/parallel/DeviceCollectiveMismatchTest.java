package io.jcomm.parallel;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.Availability;
import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.DType;
import io.jcomm.api.DebugLevel;
import io.jcomm.api.Device;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.api.device.DeviceCommunicatorProvider;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.device.CpuDeviceCommunicatorProvider;
import io.jcomm.device.DeviceCommunicators;
import io.jcomm.device.internal.CpuDeviceCommunicator;
import io.jcomm.parallel.testkit.ThreadJob;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.condition.EnabledIfSystemProperty;

/**
 * {@code JCOMM_DEBUG=detail} on device collectives: ranks (threads) with an {@code accel} device whose
 * communicator moves the tensors' host backing over the CPU group and counts its calls.
 */
@Timeout(120)
class DeviceCollectiveMismatchTest {

    private static final Duration T = Duration.ofSeconds(30);
    private static final int N = 3;

    /** An accelerator "device" tensor: host memory behind a device address, the host tensor as owner. */
    private static Tensor accel(int rank, Tensor host) {
        return Tensor.onDevice(Device.of("accel", rank), 1L, host.dtype(), host.shape(), host);
    }

    private static Tensor host(Tensor t) {
        return (Tensor) t.owner();
    }

    /** Counts its calls and runs them on the host backing through the CPU device communicator. */
    private static final class AccelCommunicator implements DeviceCommunicator {
        private final CpuDeviceCommunicator cpu;
        private final Device device;
        private final AtomicInteger calls;

        AccelCommunicator(DeviceCommunicatorContext c, AtomicInteger calls) {
            this.cpu = new CpuDeviceCommunicator("accel", c.cpuGroup(), c.timeout());
            this.device = c.device();
            this.calls = calls;
        }

        @Override public String name() { return "accel"; }
        @Override public String groupName() { return cpu.groupName(); }
        @Override public int rank() { return cpu.rank(); }
        @Override public int worldSize() { return cpu.worldSize(); }
        @Override public Device device() { return device; }

        @Override
        public void allReduce(Tensor output, Tensor input, ReduceOp op, StreamHandle stream) {
            calls.incrementAndGet();
            cpu.allReduce(host(output), host(input), op, StreamHandle.HOST);
        }

        @Override
        public void allGather(Tensor output, Tensor input, int dim, StreamHandle stream) {
            calls.incrementAndGet();
            cpu.allGather(host(output), host(input), dim, StreamHandle.HOST);
        }

        @Override
        public void reduceScatter(Tensor output, Tensor input, ReduceOp op, int dim, StreamHandle stream) {
            calls.incrementAndGet();
            cpu.reduceScatter(host(output), host(input), op, dim, StreamHandle.HOST);
        }

        @Override
        public void gather(Tensor output, Tensor input, int dst, int dim, StreamHandle stream) {
            calls.incrementAndGet();
            cpu.gather(output == null ? null : host(output), host(input), dst, dim, StreamHandle.HOST);
        }

        @Override
        public void broadcast(Tensor tensor, int src, StreamHandle stream) {
            calls.incrementAndGet();
            cpu.broadcast(host(tensor), src, StreamHandle.HOST);
        }

        @Override
        public void send(Tensor tensor, int dst, StreamHandle stream) {
            calls.incrementAndGet();
            cpu.send(host(tensor), dst, StreamHandle.HOST);
        }

        @Override
        public void recv(Tensor tensor, int src, StreamHandle stream) {
            calls.incrementAndGet();
            cpu.recv(host(tensor), src, StreamHandle.HOST);
        }

        @Override public void synchronize(StreamHandle stream) { }
        @Override public boolean isClosed() { return cpu.isClosed(); }
        @Override public void abort() { cpu.abort(); }
        @Override public void close() { cpu.close(); }
    }

    private static final class AccelProvider implements DeviceCommunicatorProvider {
        final AtomicInteger calls = new AtomicInteger();

        @Override public String name() { return "accel"; }
        @Override public String deviceType() { return "accel"; }
        @Override public int priority() { return 10; }
        @Override public Availability availability() { return Availability.available("in this test"); }

        @Override
        public DeviceCommunicator create(DeviceCommunicatorContext context) {
            return new AccelCommunicator(context, calls);
        }
    }

    private static ParallelStateOptions options(int rank, AccelProvider provider, Boolean debugChecks) {
        return ParallelStateOptions.builder().tpMessageQueue(false).device(Device.of("accel", rank))
                .deviceCommunicator("accel").debugChecks(debugChecks)
                .deviceCommunicators(DeviceCommunicators.of(List.of(new CpuDeviceCommunicatorProvider(), provider)))
                .deviceAllocator((shape, dtype) -> accel(rank, Tensor.allocate(dtype, shape))).build();
    }

    private static ThreadJob start(AccelProvider[] providers, Boolean debugChecks, DebugLevel level) {
        int n = providers.length;
        IntFunction<DistributedConfig> configs = r -> ThreadJob.config(r, n, "host-a", T).toBuilder().debug(level).build();
        return ThreadJob.start(n, configs, r -> options(r, providers[r], debugChecks), T);
    }

    private static AccelProvider[] providers() {
        return providers(N);
    }

    private static AccelProvider[] providers(int n) {
        AccelProvider[] p = new AccelProvider[n];
        for (int r = 0; r < n; r++) {
            p[r] = new AccelProvider();
        }
        return p;
    }

    private static Tensor floats(int rank, int rows, int cols, float base) {
        Tensor h = Tensor.allocate(DType.F32, rows, cols);
        for (int i = 0; i < rows * cols; i++) {
            h.setDouble(i, base + i);
        }
        return accel(rank, h);
    }

    @Test
    void matchedCallsPassWithTheCheckOnFromTheConfigAndGiveExactResults() {
        AccelProvider[] providers = providers();
        try (ThreadJob job = start(providers, null, DebugLevel.DETAIL)) {
            job.run(ps -> {
                GroupCoordinator g = ps.world();
                int r = g.rankInGroup();
                assertTrue(g.checksCollectives());
                Tensor x = floats(r, 2, 3, r * 100);
                g.allReduce(x);
                for (int i = 0; i < 6; i++) {
                    assertEquals(300 + 3 * i, host(x).getDouble(i), "allReduce element " + i);
                }
                Tensor gathered = g.allGather(floats(r, 1, 2, r), 0);
                assertArrayEquals(new long[] {N, 2}, gathered.shape());
                assertArrayEquals(new double[] {0, 1, 1, 2, 2, 3}, host(gathered).toDoubleArray());
                Tensor part = g.reduceScatter(floats(r, N, 2, 0), -2);
                assertArrayEquals(new double[] {N * 2.0 * r, N * (2.0 * r + 1)}, host(part).toDoubleArray());
                Tensor atOne = g.gather(floats(r, 1, 1, r), 1, 0);
                if (r == 1) {
                    assertArrayEquals(new double[] {0, 1, 2}, host(atOne).toDoubleArray());
                } else {
                    assertNull(atOne);
                }
                Tensor b = floats(r, 1, 2, r == 2 ? 7 : 0);
                g.broadcast(b, 2);
                assertArrayEquals(new double[] {7, 8}, host(b).toDoubleArray());
            }, T);
            for (AccelProvider p : providers) {
                assertEquals(5, p.calls.get());
            }
        }
    }

    @Test
    void mismatchedShapesOpsAndRootsFailOnEveryRankBeforeTheDevice() {
        AccelProvider[] providers = providers();
        try (ThreadJob job = start(providers, true, DebugLevel.OFF)) {
            // shapes: rank 2 passes [4, 512] where the others pass [4, 1024]
            List<String> m = mismatches(job, ps -> {
                int r = ps.world().rankInGroup();
                ps.world().allReduce(floats(r, 4, r == 2 ? 512 : 1024, 0));
            });
            assertTrue(m.get(0).contains("this rank (group rank 0, global 0) called allReduce(f32 [4, 1024], SUM) #0"
                    + " but group rank 2 (global 2) called allReduce(f32 [4, 512], SUM) #0"), m.get(0));
            assertTrue(m.get(2).contains("called allReduce(f32 [4, 512], SUM) #0 but group rank 0 (global 0) called"
                    + " allReduce(f32 [4, 1024], SUM) #0"), m.get(2));
            // operations: rank 1 all-gathers while the others all-reduce
            m = mismatches(job, ps -> {
                int r = ps.world().rankInGroup();
                if (r == 1) {
                    ps.world().allGather(floats(r, 2, 2, 0), 0);
                } else {
                    ps.world().allReduce(floats(r, 2, 2, 0), ReduceOp.MAX);
                }
            });
            assertTrue(m.get(0).contains("allReduce(f32 [2, 2], MAX) #1 but group rank 1 (global 1) called "
                    + "allGather(f32 [2, 2], dim 0) #1"), m.get(0));
            // roots: rank 0 broadcasts from 0, the others from 1
            m = mismatches(job, ps -> {
                int r = ps.world().rankInGroup();
                ps.world().broadcast(floats(r, 1, 8, 0), r == 0 ? 0 : 1);
            });
            assertTrue(m.get(1).contains("called broadcast(f32 [1, 8], src 1) #2 but group rank 0 (global 0) called "
                    + "broadcast(f32 [1, 8], src 0) #2"), m.get(1));
            for (AccelProvider p : providers) {
                assertEquals(0, p.calls.get(), "the device communicator was not called");
            }
            // the group is still usable: matched calls after mismatches
            job.run(ps -> {
                Tensor x = floats(ps.world().rankInGroup(), 1, 1, 1);
                ps.world().allReduce(x);
                assertEquals(N, host(x).getDouble(0));
            }, T);
        }
    }

    @Test
    void devicePointToPointAndTensorDictsPassWhenMatched() {
        AccelProvider[] providers = providers();
        try (ThreadJob job = start(providers, true, DebugLevel.OFF)) {
            job.run(ps -> {
                GroupCoordinator g = ps.world();
                int r = g.rankInGroup();
                // a ring of sends, each received by the next rank
                if (r % 2 == 0) {
                    g.send(floats(r, 2, 4, r * 10), g.nextInGroup());
                    Tensor got = g.recv(new long[] {2, 4}, DType.F32, g.prevInGroup());
                    assertEquals(g.prevInGroup() * 10, host(got).getDouble(0));
                } else {
                    Tensor got = g.recv(new long[] {2, 4}, DType.F32, g.prevInGroup());
                    assertEquals(g.prevInGroup() * 10, host(got).getDouble(0));
                    g.send(floats(r, 2, 4, r * 10), g.nextInGroup());
                }
                // a tensor dict from rank 0 to rank 1 (device tensors: fingerprinted with the dict's tag)
                if (r == 0) {
                    g.sendTensorDict(java.util.Map.of("x", floats(r, 1, 3, 5)), 1, null);
                } else if (r == 1) {
                    Tensor x = (Tensor) g.recvTensorDict(0, null).get("x");
                    assertArrayEquals(new double[] {5, 6, 7}, host(x).toDoubleArray());
                }
                java.util.Map<String, Object> d = g.broadcastTensorDict(r == 2
                        ? new java.util.LinkedHashMap<>(java.util.Map.of("t", floats(r, 1, 2, 9), "n", 4)) : null, 2);
                assertArrayEquals(new double[] {9, 10}, host((Tensor) d.get("t")).toDoubleArray());
                assertEquals(4, d.get("n"));
            }, T);
        }
    }

    @Test
    void aMismatchedDeviceReceiveFailsTheReceiverNamingBothCalls() {
        AccelProvider[] providers = providers();
        try (ThreadJob job = start(providers, true, DebugLevel.OFF)) {
            List<Object> out = job.outcomes(ps -> {
                GroupCoordinator g = ps.world();
                int r = g.rankInGroup();
                try {
                    if (r == 0) {
                        g.send(floats(r, 4, 16, 0), 1);
                    } else if (r == 1) {
                        g.recv(new long[] {4, 8}, DType.F32, 0);
                    }
                    return "returned";
                } catch (RuntimeException e) {
                    return e;
                }
            }, T);
            assertEquals("returned", out.get(0), "the send does not wait for its receive");
            CollectiveMismatchException e = assertInstanceOf(CollectiveMismatchException.class, out.get(1),
                    String.valueOf(out));
            assertTrue(e.getMessage().contains("point-to-point mismatch in group world: this rank (group rank 1, global 1) "
                    + "called recv(f32 [4, 8], src 0) #0 but group rank 0 (global 0) called send(f32 [4, 16], dst 1) #0"),
                    e.getMessage());
            assertEquals("recv", e.operation());
            assertEquals(1, providers[0].calls.get(), "the sender's device send ran");
            assertEquals(0, providers[1].calls.get(), "the receiver's device communicator was not called");
        }
    }

    @Test
    void aTensorDictTensorIsNotAPlainReceive() {
        AccelProvider[] providers = providers();
        try (ThreadJob job = start(providers, true, DebugLevel.OFF)) {
            List<Object> out = job.outcomes(ps -> {
                GroupCoordinator g = ps.world();
                int r = g.rankInGroup();
                try {
                    if (r == 0) {
                        g.sendTensorDict(java.util.Map.of("x", floats(r, 1, 2, 0)), 1, null);
                    } else if (r == 1) {
                        g.recv(floats(r, 1, 2, 0), 0); // a plain receive where a dict's tensor comes
                    }
                    return "returned";
                } catch (RuntimeException e) {
                    return e;
                }
            }, T);
            CollectiveMismatchException e = assertInstanceOf(CollectiveMismatchException.class, out.get(1),
                    String.valueOf(out));
            assertTrue(e.getMessage().contains("called recv(f32 [1, 2], src 0) #0 but group rank 0 (global 0) called "
                    + "send(f32 [1, 2], dst 1, tag 0x54440001) #0"), e.getMessage());
        }
    }

    @Test
    void mismatchedTensorDictBroadcastsFailOnEveryRankBeforeTheMetadata() {
        AccelProvider[] providers = providers();
        try (ThreadJob job = start(providers, true, DebugLevel.OFF)) {
            // sources: rank 1 broadcasts from itself, the others from rank 0
            List<String> m = mismatches(job, ps -> {
                GroupCoordinator g = ps.world();
                int r = g.rankInGroup();
                g.broadcastTensorDict(r <= 1 ? java.util.Map.of("x", floats(r, 1, 2, 0)) : null, r == 1 ? 1 : 0);
            });
            assertTrue(m.get(0).contains("this rank (group rank 0, global 0) called broadcastTensorDict(src 0) #0 but "
                    + "group rank 1 (global 1) called broadcastTensorDict(src 1) #0"), m.get(0));
            // operations: rank 2 all-reduces on the device while the others broadcast a dict
            m = mismatches(job, ps -> {
                GroupCoordinator g = ps.world();
                int r = g.rankInGroup();
                if (r == 2) {
                    g.allReduce(floats(r, 1, 4, 0));
                } else {
                    g.broadcastTensorDict(r == 0 ? java.util.Map.of("x", floats(r, 1, 2, 0)) : null, 0);
                }
            });
            assertTrue(m.get(2).contains("called allReduce(f32 [1, 4], SUM) #1 but group rank 0 (global 0) called "
                    + "broadcastTensorDict(src 0) #1"), m.get(2));
            for (AccelProvider p : providers) {
                assertEquals(0, p.calls.get(), "no tensor moved");
            }
        }
    }

    /** Runs {@code body} on every rank, which must each fail with a mismatch, quickly; the messages by rank. */
    private static List<String> mismatches(ThreadJob job, ThreadJob.Body body) {
        long start = System.nanoTime();
        List<Object> outcomes = job.outcomes(ps -> {
            try {
                body.run(ps);
                return "returned";
            } catch (Exception e) {
                return e;
            }
        }, T);
        assertTrue(System.nanoTime() - start < Duration.ofSeconds(10).toNanos(), "detected at once");
        return outcomes.stream().map(o -> {
            CollectiveMismatchException e = assertInstanceOf(CollectiveMismatchException.class, o, String.valueOf(o));
            return e.getMessage();
        }).toList();
    }

    @Test
    void offByDefaultTheDeviceCommunicatorIsCalledDirectly() {
        AccelProvider[] providers = providers();
        try (ThreadJob job = start(providers, null, DebugLevel.OFF)) {
            job.run(ps -> {
                GroupCoordinator g = ps.world();
                assertFalse(g.checksCollectives());
                Tensor x = floats(g.rankInGroup(), 1, 2, 1);
                g.allReduce(x);
                assertArrayEquals(new double[] {N, 2 * N}, host(x).toDoubleArray());
            }, T);
            // a mismatched call goes straight to the device communicator on every rank (here the CPU group
            // underneath notices; NCCL would not)
            job.outcomes(ps -> {
                int r = ps.world().rankInGroup();
                try {
                    ps.world().allReduce(floats(r, 1, r == 2 ? 4 : 2, 0));
                    return "returned";
                } catch (RuntimeException e) {
                    return e;
                }
            }, T);
            for (AccelProvider p : providers) {
                assertEquals(2, p.calls.get());
            }
        }
    }

    /**
     * The cost of the check (docs/PERFORMANCE.md): a small device all-reduce (f32 [1024]) of 2 thread ranks,
     * with the check off, then on. Runs only with {@code -Djcomm.bench=true}.
     */
    @Test
    @EnabledIfSystemProperty(named = "jcomm.bench", matches = "true")
    @Timeout(600)
    void benchmarkTheCheck() {
        int warmup = 5_000;
        int iterations = 20_000;
        for (Boolean on : new Boolean[] {false, true, false, true}) {
            try (ThreadJob job = start(providers(2), on, DebugLevel.OFF)) {
                List<Double> micros = job.call(ps -> {
                    GroupCoordinator g = ps.world();
                    Tensor x = floats(g.rankInGroup(), 1, 1024, 0);
                    for (int i = 0; i < warmup; i++) {
                        g.allReduce(x);
                    }
                    g.barrier();
                    long t0 = System.nanoTime();
                    for (int i = 0; i < iterations; i++) {
                        g.allReduce(x);
                    }
                    return (System.nanoTime() - t0) / 1e3 / iterations;
                }, Duration.ofSeconds(300));
                System.out.printf("BENCH device allReduce f32[1024], 2 thread ranks, check %s: %.1f us/call (rank 0), %.1f (rank 1)%n",
                        on ? "on " : "off", micros.get(0), micros.get(1));
            }
        }
    }

    @Test
    void detailGivesEveryCpuGroupTheDebugOptionAfterTheUsersOptions() {
        DistributedConfig config = DistributedConfig.builder().rank(0).worldSize(2).hostId("h").debug(DebugLevel.DETAIL)
                .build();
        ParallelStateOptions options = ParallelStateOptions.builder().cpuOption("gloo.checkArgs", "false")
                .cpuOption(CpuGroupOptions.DEBUG_OPTION, "off").build();
        try (InMemoryStore store = new InMemoryStore(Duration.ofSeconds(5))) {
            GroupFactory f = new GroupFactory(config, options, store, ParallelStateOptions.defaultCodec(),
                    DeviceCommunicators.of(List.of(new CpuDeviceCommunicatorProvider())));
            CpuGroupOptions o = f.cpuOptions(new GroupFactory.Spec("tp:0", List.of(0, 1), false, "g", false), store, false);
            assertEquals(DebugLevel.DETAIL, o.debug());
            GroupFactory off = new GroupFactory(config, options.toBuilder().debugChecks(false).build(), store,
                    ParallelStateOptions.defaultCodec(), DeviceCommunicators.of(List.of(new CpuDeviceCommunicatorProvider())));
            assertEquals(DebugLevel.OFF, off.cpuOptions(new GroupFactory.Spec("tp:0", List.of(0, 1), false, "g", false),
                    store, false).debug());
        }
        assertThrows(IllegalArgumentException.class, () -> DebugLevel.parse("on"));
    }
}
