package io.jcomm.parallel;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import io.jcomm.api.CommException;
import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.P2POp;
import io.jcomm.parallel.testkit.ThreadJob;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * A programming error is not a communication failure: a call with invalid arguments on any layer
 * (the CPU {@link ProcessGroup}, the {@link DeviceCommunicator}, the {@link GroupCoordinator})
 * throws {@link IllegalArgumentException} (or {@link IllegalStateException}) naming the group, rank
 * and operation, never a {@link CommException}, before anything is sent, and the group keeps working
 * on every rank. So the recovery pattern ({@code catch
 * (CommException e) { ps.recover(); }}) never starts a job-wide recovery for a bug in one rank.
 *
 * <p>Also: every layer takes a destination and a source in one order, the output first.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class MisuseIsNotACommExceptionTest {

    private static final Duration T = Duration.ofSeconds(30);
    private static final StreamHandle HOST = StreamHandle.HOST;

    private ThreadJob job;

    @BeforeAll
    void start() {
        job = ThreadJob.start(2, ParallelStateOptions.builder().tpMessageQueue(false)
                .cpuOption("tcp.shm.ringBytes", "65536").build(), T);
        job.run(ps -> ps.initializeModelParallel(1, 1), T);
    }

    @AfterAll
    void stop() {
        if (job != null) {
            job.close();
        }
    }

    /** What a misuse call sees on one rank: the world's three layers. */
    record Layers(GroupCoordinator g, ProcessGroup pg, DeviceCommunicator dc) {
        int rank() {
            return g.rankInGroup();
        }

        int peer() {
            return 1 - g.rankInGroup();
        }
    }

    /** A call that is invalid on every rank, whatever the rank. */
    @FunctionalInterface
    interface Misuse {
        void call(Layers l) throws Exception;
    }

    private static Tensor f32(long n) {
        return Tensor.allocate(DType.F32, n);
    }

    private static Tensor onCuda() {
        return Tensor.onDevice(Device.cuda(0), 4096, DType.F32, new long[] {4}, null);
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    private static Class<Object> stringAsObject() {
        return (Class) String.class;
    }

    private static Arguments misuse(String name, Misuse m) {
        return Arguments.of(name, m);
    }

    /** Every public collective, point-to-point and object call of each layer, with a bad argument. */
    static Stream<Arguments> misuses() {
        List<Arguments> l = new ArrayList<>();
        // ---- ProcessGroup (the CPU group)
        l.add(misuse("pg.barrier null timeout", x -> x.pg().barrier(null)));
        l.add(misuse("pg.barrier negative timeout", x -> x.pg().barrier(Duration.ofSeconds(-1))));
        l.add(misuse("pg.monitoredBarrier null timeout", x -> x.pg().monitoredBarrier(null)));
        l.add(misuse("pg.broadcast null tensor", x -> x.pg().broadcast(null, 0)));
        l.add(misuse("pg.broadcast src out of range", x -> x.pg().broadcast(f32(4), 2)));
        l.add(misuse("pg.broadcast src negative", x -> x.pg().broadcast(f32(4), -1)));
        l.add(misuse("pg.broadcast device tensor", x -> x.pg().broadcast(onCuda(), 0)));
        l.add(misuse("pg.allReduce null tensor", x -> x.pg().allReduce(null, ReduceOp.SUM)));
        l.add(misuse("pg.allReduce null op", x -> x.pg().allReduce(f32(4), null)));
        l.add(misuse("pg.allReduce avg of bool", x -> x.pg().allReduce(Tensor.allocate(DType.BOOL, 2), ReduceOp.AVG)));
        l.add(misuse("pg.allReduce device tensor", x -> x.pg().allReduce(onCuda(), ReduceOp.SUM)));
        l.add(misuse("pg.allGather output too small", x -> x.pg().allGather(f32(5), f32(4))));
        l.add(misuse("pg.allGather dtype mismatch", x -> x.pg().allGather(Tensor.allocate(DType.I32, 8), f32(4))));
        l.add(misuse("pg.allGather null output", x -> x.pg().allGather(null, f32(4))));
        l.add(misuse("pg.allGatherV counts of the wrong length",
                x -> x.pg().allGatherV(f32(4), f32(2), new long[] {2})));
        l.add(misuse("pg.allToAll same tensor", x -> {
            Tensor t = f32(4);
            x.pg().allToAll(t, t);
        }));
        l.add(misuse("pg.allToAll indivisible", x -> x.pg().allToAll(f32(3), f32(3))));
        l.add(misuse("pg.allToAllV null counts", x -> x.pg().allToAllV(f32(2), f32(2), null, new long[] {1, 1})));
        l.add(misuse("pg.allToAllV negative count",
                x -> x.pg().allToAllV(f32(2), f32(2), new long[] {1, 1}, new long[] {3, -1})));
        l.add(misuse("pg.gather output of the wrong size on the destination",
                x -> x.pg().gather(f32(1), f32(4), x.rank())));
        l.add(misuse("pg.gather dst out of range", x -> x.pg().gather(f32(8), f32(4), 5)));
        l.add(misuse("pg.scatter no input on the source", x -> x.pg().scatter(f32(4), null, x.rank())));
        l.add(misuse("pg.reduceScatter input of the wrong size",
                x -> x.pg().reduceScatter(f32(2), f32(3), ReduceOp.SUM)));
        l.add(misuse("pg.send to self", x -> x.pg().send(f32(4), x.rank(), 0)));
        l.add(misuse("pg.send negative tag", x -> x.pg().send(f32(4), x.peer(), -1)));
        l.add(misuse("pg.recv src out of range", x -> x.pg().recv(f32(4), 9, 0)));
        l.add(misuse("pg.broadcastAsync src out of range", x -> x.pg().broadcastAsync(f32(4), 7, T)));
        l.add(misuse("pg.allReduceAsync null timeout", x -> x.pg().allReduceAsync(f32(4), ReduceOp.SUM, null)));
        l.add(misuse("pg.allGatherAsync output too small", x -> x.pg().allGatherAsync(f32(4), f32(4), T)));
        l.add(misuse("pg.reduceScatterAsync input too small",
                x -> x.pg().reduceScatterAsync(f32(4), f32(4), ReduceOp.SUM, T)));
        l.add(misuse("pg.allToAllAsync same tensor", x -> {
            Tensor t = f32(4);
            x.pg().allToAllAsync(t, t, T);
        }));
        l.add(misuse("pg.allToAllVAsync counts that do not sum to the tensor",
                x -> x.pg().allToAllVAsync(f32(2), f32(2), new long[] {1, 1}, new long[] {2, 2}, T)));
        l.add(misuse("pg.sendAsync to self", x -> x.pg().sendAsync(f32(4), x.rank(), 0, T)));
        l.add(misuse("pg.recvAsync null tensor", x -> x.pg().recvAsync(null, x.peer(), 0, T)));
        l.add(misuse("pg.batchIsendIrecv null ops", x -> x.pg().batchIsendIrecv(null, 0, T)));
        l.add(misuse("pg.batchIsendIrecv send to self", x -> x.pg().batchIsendIrecv(List.of(P2POp.send(f32(4), x.rank())))));
        l.add(misuse("pg.broadcastObject src out of range", x -> x.pg().broadcastObject("x", 3, String.class)));
        l.add(misuse("pg.broadcastObject value of another type", x -> x.pg().broadcastObject(1, x.rank(), stringAsObject())));
        l.add(misuse("pg.allGatherObject unencodable value", x -> x.pg().allGatherObject(new Thread(), Object.class)));
        l.add(misuse("pg.gatherObject dst out of range", x -> x.pg().gatherObject("x", 4, String.class)));
        l.add(misuse("pg.sendObject to self", x -> x.pg().sendObject("x", x.rank())));
        l.add(misuse("pg.sendObject unencodable value", x -> x.pg().sendObject(new Thread(), x.peer())));
        l.add(misuse("pg.recvObject src out of range", x -> x.pg().recvObject(5, String.class)));
        l.add(misuse("pg.shrink without this rank", x -> x.pg().shrink(List.of(x.rank()))));
        l.add(misuse("pg.shrink null ranks", x -> x.pg().shrink(null)));
        // ---- DeviceCommunicator (the data plane; cpu in this job)
        l.add(misuse("dc.allReduce size mismatch", x -> x.dc().allReduce(f32(5), f32(4), ReduceOp.SUM, HOST)));
        l.add(misuse("dc.allReduce dtype mismatch",
                x -> x.dc().allReduce(Tensor.allocate(DType.I32, 4), f32(4), ReduceOp.SUM, HOST)));
        l.add(misuse("dc.allReduce null input", x -> x.dc().allReduce(f32(4), null, ReduceOp.SUM, HOST)));
        l.add(misuse("dc.allReduce null op", x -> {
            Tensor t = f32(4);
            x.dc().allReduce(t, t, null, HOST);
        }));
        l.add(misuse("dc.allReduce tensor on another device", x -> {
            Tensor t = onCuda();
            x.dc().allReduce(t, t, ReduceOp.SUM, HOST);
        }));
        l.add(misuse("dc.allGather output shape", x -> x.dc().allGather(f32(7), f32(4), 0, HOST)));
        l.add(misuse("dc.allGather dim out of range", x -> x.dc().allGather(f32(8), f32(4), 3, HOST)));
        l.add(misuse("dc.reduceScatter input shape", x -> x.dc().reduceScatter(f32(2), f32(5), ReduceOp.SUM, 0, HOST)));
        l.add(misuse("dc.gather null output on the destination", x -> x.dc().gather(null, f32(4), x.rank(), 0, HOST)));
        l.add(misuse("dc.gather dst negative", x -> x.dc().gather(null, f32(4), -1, 0, HOST)));
        l.add(misuse("dc.broadcast src out of range", x -> x.dc().broadcast(f32(4), 2, HOST)));
        l.add(misuse("dc.send to self", x -> x.dc().send(f32(4), x.rank(), HOST)));
        l.add(misuse("dc.recv src out of range", x -> x.dc().recv(f32(4), 2, HOST)));
        l.add(misuse("dc.batchP2P null ops", x -> x.dc().batchP2P(null, HOST)));
        l.add(misuse("dc.batchP2P unmatched receive from self",
                x -> x.dc().batchP2P(List.of(P2POp.recv(f32(4), x.rank())), HOST)));
        l.add(misuse("dc.allToAll same tensor", x -> {
            Tensor t = f32(4);
            x.dc().allToAll(t, t, HOST);
        }));
        l.add(misuse("dc.allToAllV self counts differ",
                x -> x.dc().allToAllV(f32(4), f32(4), new long[] {2, 2}, new long[] {3, 1}, HOST)));
        l.add(misuse("dc.shrink without this rank", x -> x.dc().shrink(List.of(x.rank()), x.pg(), T)));
        // ---- GroupCoordinator
        l.add(misuse("g.allReduce tensor on a device the group does not serve", x -> x.g().allReduce(onCuda())));
        l.add(misuse("g.allReduce out of place, size mismatch", x -> x.g().allReduce(f32(5), f32(4), ReduceOp.SUM)));
        l.add(misuse("g.allGather dim out of range", x -> x.g().allGather(f32(4), 3)));
        l.add(misuse("g.allGather into an output of the wrong shape", x -> x.g().allGather(f32(7), f32(4), 0)));
        l.add(misuse("g.reduceScatter indivisible", x -> x.g().reduceScatter(f32(3), 0)));
        l.add(misuse("g.reduceScatter into an output of the wrong shape",
                x -> x.g().reduceScatter(f32(3), f32(4), ReduceOp.SUM, 0)));
        l.add(misuse("g.gather dst out of range", x -> x.g().gather(f32(4), 5, 0)));
        l.add(misuse("g.broadcast src negative", x -> x.g().broadcast(f32(4), -1)));
        l.add(misuse("g.send to self", x -> x.g().send(f32(4), x.rank())));
        l.add(misuse("g.recv src out of range", x -> x.g().recv(f32(4), 7)));
        l.add(misuse("g.recv new tensor from self", x -> x.g().recv(new long[] {2}, DType.F32, x.rank())));
        l.add(misuse("g.broadcastObject src out of range", x -> x.g().broadcastObject("x", 9, String.class)));
        l.add(misuse("g.broadcastObject value of another type", x -> x.g().broadcastObject(1, x.rank(), stringAsObject())));
        l.add(misuse("g.sendObject to self", x -> x.g().sendObject("x", x.rank())));
        l.add(misuse("g.recvObject src out of range", x -> x.g().recvObject(5, String.class)));
        l.add(misuse("g.broadcastTensorDict unencodable value",
                x -> x.g().broadcastTensorDict(Map.of("v", new Thread()), x.rank())));
        l.add(misuse("g.sendTensorDict unencodable value",
                x -> x.g().sendTensorDict(Map.of("v", new Thread()), x.peer(), null)));
        l.add(misuse("g.sendTensorDict to self", x -> x.g().sendTensorDict(Map.of("t", f32(2)), x.rank(), null)));
        l.add(misuse("g.recvTensorDict src out of range", x -> x.g().recvTensorDict(3, null)));
        l.add(misuse("g.monitoredBarrier null timeout", x -> x.g().monitoredBarrier(null)));
        l.add(misuse("g.dispatch routing for other tokens", x -> x.g().dispatch(Tensor.allocate(DType.F32, 3, 4),
                ExpertRouting.top1(2, new int[] {0, 1}))));
        return l.stream();
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("misuses")
    void aBadArgumentIsNotACommunicationFailureAndTheGroupKeepsWorking(String name, Misuse m) {
        job.run(ps -> {
            GroupCoordinator g = ps.world();
            Layers layers = new Layers(g, g.cpuGroup(), g.deviceCommunicator().orElseThrow());
            Throwable e = null;
            try {
                m.call(layers);
            } catch (Throwable t) {
                e = t;
            }
            assertNotNull(e, name + ": nothing was thrown");
            assertFalse(e instanceof CommException, name + ": a misuse must not look like a communication failure: " + e);
            assertTrue(e instanceof IllegalArgumentException || e instanceof IllegalStateException, name + ": " + e);
            if (!name.startsWith("g.dispatch")) { // the MoE managers' own checks name no group
                assertTrue(e.getMessage().startsWith("[group=world rank=" + ps.rank() + " op="), name + ": " + e);
            }
            assertFalse(g.cpuGroup().isPoisoned(), name + ": the group was poisoned");
            assertFalse(layers.dc().isClosed(), name + ": the device communicator was closed");
            // the next valid collective works on every rank
            Tensor t = Tensor.ofFloats(ps.rank() + 1);
            g.allReduce(t);
            assertEquals(3.0, t.getDouble(0), name);
        }, T);
    }

    @Test
    void aMisuseOnOneRankNamesTheCallAndLeavesEveryRankWorking() {
        job.run(ps -> {
            GroupCoordinator g = ps.world();
            if (ps.rank() == 1) {
                try {
                    g.broadcast(Tensor.ofFloats(1, 2), 5);
                    fail("a broadcast from rank 5 of 2 was accepted");
                } catch (CommException e) {
                    fail("the recovery pattern would start a job-wide recovery for a programming error: " + e);
                } catch (IllegalArgumentException e) {
                    assertTrue(e.getMessage().startsWith("[group=world rank=1 op=broadcast]"), e.getMessage());
                    assertTrue(e.getMessage().contains("5"), e.getMessage());
                }
                Tensor dup = Tensor.allocate(DType.F32, 4);
                IllegalArgumentException same = org.junit.jupiter.api.Assertions.assertThrows(
                        IllegalArgumentException.class, () -> g.cpuGroup().allToAll(dup, dup));
                assertTrue(same.getMessage().startsWith("[group=world rank=1 op=allToAll]"), same.getMessage());
            }
            // rank 0 goes straight on; rank 1 joins after its misuses: every collective completes
            Tensor t = Tensor.ofFloats(ps.rank() + 1, 10);
            g.allReduce(t);
            assertArrayEquals(new double[] {3, 20}, t.toDoubleArray());
            assertEquals("from 1", g.broadcastObject(ps.rank() == 1 ? "from 1" : null, 1, String.class));
            g.barrier();
            assertFalse(g.cpuGroup().isPoisoned());
        }, T);
    }

    /**
     * {@code (output, input[, outputCounts, inputCounts])} on every layer: the first tensor receives the
     * result, the second is left as it was.
     */
    @Test
    void everyLayerTakesTheOutputFirst() {
        job.run(ps -> {
            GroupCoordinator g = ps.world();
            ProcessGroup pg = g.cpuGroup();
            DeviceCommunicator dc = g.deviceCommunicator().orElseThrow();
            int r = ps.rank();
            double[] mine = {10 * r, 10 * r + 1};
            double[] gathered = {0, 1, 10, 11};

            Tensor in = Tensor.ofFloats(10 * r, 10 * r + 1);
            Tensor out = f32(4);
            pg.allGather(out, in);
            assertArrayEquals(gathered, out.toDoubleArray(), "ProcessGroup.allGather");
            out = f32(4);
            dc.allGather(out, in, 0, HOST);
            assertArrayEquals(gathered, out.toDoubleArray(), "DeviceCommunicator.allGather");
            out = f32(4);
            g.allGather(out, in, 0);
            assertArrayEquals(gathered, out.toDoubleArray(), "GroupCoordinator.allGather");
            assertArrayEquals(mine, in.toDoubleArray(), "inputs unchanged");

            Tensor four = Tensor.ofFloats(1, 2, 3, 4);
            double[] part = r == 0 ? new double[] {2, 4} : new double[] {6, 8};
            Tensor o2 = f32(2);
            pg.reduceScatter(o2, four, ReduceOp.SUM);
            assertArrayEquals(part, o2.toDoubleArray(), "ProcessGroup.reduceScatter");
            o2 = f32(2);
            dc.reduceScatter(o2, four, ReduceOp.SUM, 0, HOST);
            assertArrayEquals(part, o2.toDoubleArray(), "DeviceCommunicator.reduceScatter");
            o2 = f32(2);
            g.reduceScatter(o2, four, ReduceOp.SUM, 0);
            assertArrayEquals(part, o2.toDoubleArray(), "GroupCoordinator.reduceScatter");

            Tensor sum = f32(2);
            dc.allReduce(sum, in, ReduceOp.SUM, HOST);
            assertArrayEquals(new double[] {10, 12}, sum.toDoubleArray(), "DeviceCommunicator.allReduce");
            sum = f32(2);
            g.allReduce(sum, in, ReduceOp.SUM);
            assertArrayEquals(new double[] {10, 12}, sum.toDoubleArray(), "GroupCoordinator.allReduce");
            assertArrayEquals(mine, in.toDoubleArray(), "input unchanged");

            // all-to-all: chunk j of rank r's input goes to rank j
            Tensor a2aIn = Tensor.ofFloats(10 * r, 10 * r + 1);
            double[] a2a = {r, 10 + r};
            Tensor a2aOut = f32(2);
            pg.allToAll(a2aOut, a2aIn);
            assertArrayEquals(a2a, a2aOut.toDoubleArray(), "ProcessGroup.allToAll");
            a2aOut = f32(2);
            dc.allToAll(a2aOut, a2aIn, HOST);
            assertArrayEquals(a2a, a2aOut.toDoubleArray(), "DeviceCommunicator.allToAll");

            // all-to-all-v: rank 0 sends 1 element to itself and 2 to rank 1; rank 1 sends 1 to rank 0, 0 to itself
            long[] inputCounts = r == 0 ? new long[] {1, 2} : new long[] {1, 0};
            long[] outputCounts = r == 0 ? new long[] {1, 1} : new long[] {2, 0};
            Tensor vIn = r == 0 ? Tensor.ofFloats(0, 1, 2) : Tensor.ofFloats(10);
            double[] vWant = r == 0 ? new double[] {0, 10} : new double[] {1, 2};
            Tensor vOut = f32(2);
            pg.allToAllV(vOut, vIn, outputCounts, inputCounts);
            assertArrayEquals(vWant, vOut.toDoubleArray(), "ProcessGroup.allToAllV");
            vOut = f32(2);
            dc.allToAllV(vOut, vIn, outputCounts, inputCounts, HOST);
            assertArrayEquals(vWant, vOut.toDoubleArray(), "DeviceCommunicator.allToAllV");
        }, T);
    }
}
