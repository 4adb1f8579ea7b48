package io.jcomm.device.internal.nccl;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.Availability;
import io.jcomm.api.BackendException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.api.device.P2POp;
import io.jcomm.device.NcclDeviceCommunicatorProvider;
import io.jcomm.device.testkit.DeviceMemory;
import io.jcomm.device.testkit.ThreadRanksGroup;
import java.time.Duration;
import java.util.ArrayList;
import java.util.concurrent.ConcurrentHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.IntFunction;
import org.bytedeco.cuda.global.cudart;
import org.bytedeco.cuda.global.nccl;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Unit tests of the NCCL communicator's Java logic over {@link FakeNccl}: mappings, group
 * bracketing, error strings, the asynchronous-error and deadline paths (abort, poison, fail fast),
 * bounded teardown and the unique-id exchange over the CPU group.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class NcclCommunicatorTest {

    private static final long STREAM = 0x77;

    /** Runs {@code body} on {@code n} threads (ranks) and returns each rank's value or Throwable. */
    static List<Object> onRanks(int n, IntFunction<Object> body) {
        Object[] out = new Object[n];
        List<Thread> threads = new ArrayList<>();
        for (int r = 0; r < n; r++) {
            int rank = r;
            Thread t = new Thread(() -> {
                try {
                    out[rank] = body.apply(rank);
                } catch (Throwable e) {
                    out[rank] = e;
                }
            }, "rank-" + r);
            t.setDaemon(true);
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            try {
                t.join(30_000);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
            assertFalse(t.isAlive(), t.getName() + " hung");
        }
        return List.of(out);
    }

    /** Creates a world of {@code n} communicators (rank r on fake device r). */
    static List<NcclCommunicator> world(FakeNccl fake, int n, Map<String, String> options, Duration timeout) {
        List<ThreadRanksGroup> groups = ThreadRanksGroup.create("g" + n, n, timeout);
        List<Object> res = onRanks(n, r -> NcclCommunicator.create("cuda:nccl", fake,
                new DeviceCommunicatorContext(groups.get(r), Device.cuda(r), timeout, options)));
        List<NcclCommunicator> comms = new ArrayList<>();
        for (Object o : res) {
            if (o instanceof Throwable) {
                throw new AssertionError("create failed", (Throwable) o);
            }
            comms.add((NcclCommunicator) o);
        }
        return comms;
    }

    static StreamHandle stream(int rank) {
        return new StreamHandle(Device.cuda(rank), STREAM);
    }

    static void await(String what, BooleanSupplier cond, Duration limit) {
        long end = System.nanoTime() + limit.toNanos();
        while (!cond.getAsBoolean()) {
            if (System.nanoTime() > end) {
                throw new AssertionError("timed out waiting for " + what);
            }
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        }
    }

    /** The calls of rank {@code rank} made after the first {@code from}. */
    static List<String> callsSince(FakeNccl fake, int rank, int from) {
        List<String> all = fake.calls(rank);
        return all.subList(from, all.size());
    }

    @Test
    void constantsMatchTheJavaCppBindings() {
        // compile-time constants: reading them does not initialise (load) the bindings
        assertEquals(nccl.ncclFloat16, NcclConstants.dataType(DType.F16));
        assertEquals(nccl.ncclBfloat16, NcclConstants.dataType(DType.BF16));
        assertEquals(nccl.ncclFloat32, NcclConstants.dataType(DType.F32));
        assertEquals(nccl.ncclFloat64, NcclConstants.dataType(DType.F64));
        assertEquals(nccl.ncclInt8, NcclConstants.dataType(DType.I8));
        assertEquals(nccl.ncclUint8, NcclConstants.dataType(DType.U8));
        assertEquals(nccl.ncclUint8, NcclConstants.dataType(DType.BOOL));
        assertEquals(nccl.ncclInt32, NcclConstants.dataType(DType.I32));
        assertEquals(nccl.ncclInt64, NcclConstants.dataType(DType.I64));
        assertEquals(nccl.ncclSum, NcclConstants.redOp(ReduceOp.SUM, DType.F32));
        assertEquals(nccl.ncclProd, NcclConstants.redOp(ReduceOp.PROD, DType.F32));
        assertEquals(nccl.ncclMin, NcclConstants.redOp(ReduceOp.MIN, DType.F32));
        assertEquals(nccl.ncclMax, NcclConstants.redOp(ReduceOp.MAX, DType.F32));
        assertEquals(nccl.ncclAvg, NcclConstants.redOp(ReduceOp.AVG, DType.F32));
        assertEquals(nccl.ncclMax, NcclConstants.redOp(ReduceOp.SUM, DType.BOOL), "bool sum is logical or");
        assertEquals(nccl.ncclMin, NcclConstants.redOp(ReduceOp.PROD, DType.BOOL), "bool product is logical and");
        assertEquals(nccl.ncclSuccess, NcclConstants.SUCCESS);
        assertEquals(nccl.ncclInvalidArgument, NcclConstants.INVALID_ARGUMENT);
        assertEquals(nccl.ncclInvalidUsage, NcclConstants.INVALID_USAGE);
        assertEquals(nccl.ncclRemoteError, NcclConstants.REMOTE_ERROR);
        assertEquals(nccl.ncclInProgress, NcclConstants.IN_PROGRESS);
        assertEquals(nccl.NCCL_UNIQUE_ID_BYTES, NcclConstants.UNIQUE_ID_BYTES);
        assertEquals(nccl.NCCL_VERSION_CODE / 100, NcclConstants.BINDINGS_VERSION_CODE / 100, "bindings are NCCL 2.29");
        assertEquals(cudart.cudaErrorNotReady, NcclConstants.CUDA_ERROR_NOT_READY);
        assertEquals(cudart.cudaStreamCaptureStatusNone, NcclConstants.CUDA_STREAM_CAPTURE_STATUS_NONE);
        assertEquals("2.29.3", NcclConstants.versionString(22903));
        assertEquals("2.8.4", NcclConstants.versionString(2804));
        assertEquals(2804, NcclConstants.versionCode(2, 8, 4));
    }

    @Test
    void boolReductionsAndIntegerAverageHaveTorchSemantics() {
        FakeNccl fake = new FakeNccl();
        List<NcclCommunicator> comms = world(fake, 2, Map.of(), Duration.ofSeconds(10));
        List<Object> res = onRanks(2, r -> {
            DeviceMemory mem = fake.memory(r, STREAM);
            Tensor b = mem.upload(Tensor.ofBytes(new byte[] {1, 1, 0, 0}));
            Tensor bool = Tensor.onDevice(Device.cuda(r), b.address(), DType.BOOL, new long[] {4}, null);
            Tensor mine = mem.upload(Tensor.ofBytes(r == 0 ? new byte[] {1, 0, 1, 0} : new byte[] {1, 1, 0, 0}));
            Tensor boolMine = Tensor.onDevice(Device.cuda(r), mine.address(), DType.BOOL, new long[] {4}, null);
            comms.get(r).allReduce(boolMine, boolMine, ReduceOp.SUM, stream(r));
            comms.get(r).allReduce(bool, bool, ReduceOp.PROD, stream(r));
            Tensor avg = mem.upload(Tensor.ofInts(r == 0 ? 3 : 4, -3));
            comms.get(r).allReduce(avg, avg, ReduceOp.AVG, stream(r));
            assertThrows(IllegalArgumentException.class, () -> comms.get(r).allReduce(boolMine, boolMine, ReduceOp.AVG, stream(r)));
            return new Object[] {mem.read(mine).toByteArray(), mem.read(b).toByteArray(), mem.read(avg).toLongArray()};
        });
        for (Object o : res) {
            if (o instanceof Throwable) {
                throw new AssertionError((Throwable) o);
            }
            Object[] v = (Object[]) o;
            assertArrayEquals(new byte[] {1, 1, 1, 0}, (byte[]) v[0], "sum of bools is or");
            assertArrayEquals(new byte[] {1, 1, 0, 0}, (byte[]) v[1], "product of bools is and");
            assertArrayEquals(new long[] {3, -3}, (long[]) v[2], "integer average truncates");
        }
        comms.forEach(NcclCommunicator::close);
        assertEquals(List.of(), fake.violations());
    }

    @Test
    void batchIsBracketedByAGroupCallAndTheEndIsCalledWhenAnOpFails() {
        FakeNccl fake = new FakeNccl();
        NcclCommunicator comm = world(fake, 1, Map.of(), Duration.ofSeconds(10)).get(0);
        DeviceMemory mem = fake.memory(0, STREAM);
        Tensor a = mem.upload(Tensor.ofFloats(1, 2, 3));
        Tensor b = mem.allocate(DType.F32, 3);
        int from = fake.calls(0).size();
        comm.batchP2P(List.of(P2POp.send(a, 0), P2POp.recv(b, 0)), stream(0));
        assertEquals(List.of("ncclGroupStart", "ncclSend@119", "ncclRecv@119", "ncclGroupEnd", "cudaEventRecord@119"),
                callsSince(fake, 0, from));
        comm.synchronize(stream(0));
        assertArrayEquals(new double[] {1, 2, 3}, mem.read(b).toDoubleArray());

        fake.failNext(0, "ncclRecv", NcclConstants.INVALID_ARGUMENT);
        from = fake.calls(0).size();
        BackendException e = assertThrows(BackendException.class,
                () -> comm.batchP2P(List.of(P2POp.send(a, 0), P2POp.recv(b, 0)), stream(0)));
        assertTrue(e.getMessage().contains("ncclRecv failed: invalid argument (run with NCCL_DEBUG=WARN for details) (ncclResult 4)"),
                e.getMessage());
        assertEquals("batchP2P", e.operation());
        assertEquals(List.of("ncclGroupStart", "ncclSend@119", "ncclRecv@119", "ncclGroupEnd"), callsSince(fake, 0, from));
        assertEquals(0, fake.groupDepth(), "group left open");
        assertFalse(comm.isClosed(), "an argument error must not poison the communicator");
        comm.close();
        assertEquals(List.of(), fake.violations());
    }

    @Test
    void aFailedCallCarriesNcclsErrorStringsAndPoisonsAndAborts() {
        FakeNccl fake = new FakeNccl();
        List<NcclCommunicator> comms = world(fake, 2, Map.of(), Duration.ofSeconds(10));
        fake.failNext(0, "ncclAllReduce", NcclConstants.UNHANDLED_CUDA_ERROR);
        fake.lastError("Cuda failure 'out of memory'");
        List<Object> res = onRanks(2, r -> {
            Tensor t = fake.memory(r, STREAM).upload(Tensor.ofFloats(1, 2));
            comms.get(r).allReduce(t, t, ReduceOp.SUM, stream(r));
            return "ok";
        });
        BackendException e = assertInstanceOf(BackendException.class, res.get(0));
        assertEquals("[group=g2 rank=0 op=allReduce] ncclAllReduce failed: unhandled cuda error (run with NCCL_DEBUG=INFO "
                + "for details) (ncclResult 1); last NCCL error: Cuda failure 'out of memory'", e.getMessage());
        assertTrue(comms.get(0).isClosed());
        assertEquals(1, fake.abortsOf(0));
        // the peer, left alone in the collective, sees a remote error
        BackendException peer = assertInstanceOf(BackendException.class, res.get(1));
        assertTrue(peer.getMessage().contains("remote process exited"), peer.getMessage());
        // later calls fail fast, with the first cause
        Tensor t = fake.memory(0, STREAM).allocate(DType.F32, 2);
        CommClosedException closed = assertThrows(CommClosedException.class,
                () -> comms.get(0).allReduce(t, t, ReduceOp.SUM, stream(0)));
        assertTrue(closed.getCause() == e, "cause is the original failure");
        comms.forEach(NcclCommunicator::close);
        assertEquals(List.of(), fake.violations(), "no call after abort, no double abort");
    }

    @Test
    void asyncErrorMakesTheWatchdogAbortAndLaterCallsFailFast() {
        FakeNccl fake = new FakeNccl();
        List<NcclCommunicator> comms = world(fake, 2, Map.of(NcclSettings.WATCHDOG_INTERVAL_MS, "10"), Duration.ofSeconds(10));
        fake.asyncError(1, NcclConstants.REMOTE_ERROR);
        NcclCommunicator c1 = comms.get(1);
        await("rank 1 poisoned", c1::isClosed, Duration.ofSeconds(5));
        await("rank 1 aborted", c1::isAbortComplete, Duration.ofSeconds(5));
        assertEquals(1, fake.abortsOf(1));
        assertFalse(comms.get(0).isClosed());
        assertEquals("[group=g2 rank=1 op=watchdog] asynchronous NCCL error: remote process exited or there was a network "
                + "error (ncclResult 6)", c1.poisonCause().getMessage());
        Tensor t = fake.memory(1, STREAM).allocate(DType.F32, 2);
        long start = System.nanoTime();
        CommClosedException e = assertThrows(CommClosedException.class, () -> c1.broadcast(t, 0, stream(1)));
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(1), "did not fail fast");
        assertTrue(e.getMessage().contains("asynchronous NCCL error"), e.getMessage());
        comms.forEach(NcclCommunicator::close);
        assertEquals(List.of(), fake.violations());
    }

    @Test
    void anOperationPastItsDeadlineAbortsTheCommunicator() {
        FakeNccl fake = new FakeNccl();
        // 1 s: long enough that the in-flight count can be read before the watchdog acts, even on a loaded machine
        NcclCommunicator comm = world(fake, 1, Map.of(NcclSettings.WATCHDOG_INTERVAL_MS, "10",
                NcclSettings.OP_TIMEOUT_MS, "1000"), Duration.ofSeconds(10)).get(0);
        DeviceMemory mem = fake.memory(0, STREAM);
        Tensor a = mem.upload(Tensor.ofFloats(1));
        Tensor b = mem.allocate(DType.F32, 1);
        fake.hang(true);
        comm.batchP2P(List.of(P2POp.send(a, 0), P2POp.recv(b, 0)), stream(0));
        assertEquals(1, comm.trackedInFlight());
        await("deadline abort", comm::isClosed, Duration.ofSeconds(5));
        CommTimeoutException cause = assertInstanceOf(CommTimeoutException.class, comm.poisonCause());
        assertTrue(cause.getMessage().contains("batchP2P enqueued") && cause.getMessage().contains("has not completed within 1000 ms"),
                cause.getMessage());
        await("aborted", comm::isAbortComplete, Duration.ofSeconds(5));
        assertEquals(1, fake.abortsOf(0));
        comm.close();
        assertEquals(List.of(), fake.violations());
    }

    @Test
    void synchronizeIsBoundedAndAbortsOnItsDeadline() {
        FakeNccl fake = new FakeNccl();
        NcclCommunicator comm = world(fake, 1, Map.of(NcclSettings.OP_TIMEOUT_MS, "200", NcclSettings.TRACK_OPS, "false"),
                Duration.ofSeconds(10)).get(0);
        fake.hang(true);
        long start = System.nanoTime();
        CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> comm.synchronize(stream(0)));
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(ms >= 150 && ms < 5_000, "took " + ms + " ms");
        assertEquals("synchronize", e.operation());
        assertTrue(comm.isClosed());
        assertEquals(1, fake.abortsOf(0));
        comm.close();
    }

    @Test
    void closeIsBoundedEvenWhenAbortHangs() {
        FakeNccl fake = new FakeNccl();
        NcclCommunicator comm = world(fake, 1, Map.of(NcclSettings.ABORT_TIMEOUT_MS, "200"), Duration.ofSeconds(10)).get(0);
        fake.abortDelay(Duration.ofSeconds(20));
        long start = System.nanoTime();
        comm.close();
        long ms = (System.nanoTime() - start) / 1_000_000;
        assertTrue(ms < 3_000, "close took " + ms + " ms");
        assertTrue(comm.isClosed());
        assertFalse(comm.isAbortComplete(), "abort is still running in the background");
        comm.close(); // idempotent, immediate
        comm.abort();
        Tensor t = fake.memory(0, STREAM).allocate(DType.F32, 1);
        assertThrows(CommClosedException.class, () -> comm.allReduce(t, t, ReduceOp.SUM, stream(0)));
    }

    @Test
    void rankZeroMakesTheUniqueIdAndTheCpuGroupCarriesIt() {
        FakeNccl fake = new FakeNccl();
        List<NcclCommunicator> comms = world(fake, 3, Map.of(), Duration.ofSeconds(10));
        assertEquals(1, fake.uniqueIdCalls());
        assertTrue(fake.calls(0).contains("ncclGetUniqueId"));
        assertFalse(fake.calls(1).contains("ncclGetUniqueId"));
        assertFalse(fake.calls(2).contains("ncclGetUniqueId"));
        byte[] id0 = fake.idsUsedBy(0).get(0);
        assertEquals(128, id0.length);
        assertArrayEquals(id0, fake.idsUsedBy(1).get(0));
        assertArrayEquals(id0, fake.idsUsedBy(2).get(0));
        // each rank initialised on its own device, then warmed up on stream 0 before returning
        for (int r = 0; r < 3; r++) {
            assertTrue(fake.calls(r).contains("ncclCommInitRank"), "rank " + r + " " + fake.calls(r));
            assertTrue(fake.calls(r).contains("ncclAllReduce@0"), "warm-up on rank " + r);
        }
        comms.forEach(NcclCommunicator::close);
    }

    @Test
    void aUniqueIdFailureOnRankZeroFailsEveryRankAtOnce() {
        FakeNccl fake = new FakeNccl();
        fake.failNext("ncclGetUniqueId", NcclConstants.SYSTEM_ERROR);
        List<ThreadRanksGroup> groups = ThreadRanksGroup.create("g", 3, Duration.ofSeconds(20));
        long start = System.nanoTime();
        List<Object> res = onRanks(3, r -> NcclCommunicator.create("cuda:nccl", fake,
                new DeviceCommunicatorContext(groups.get(r), Device.cuda(r), Duration.ofSeconds(20), Map.of())));
        assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(5), "ranks waited for a timeout");
        BackendException e0 = assertInstanceOf(BackendException.class, res.get(0));
        assertEquals("[group=g rank=0 op=init] ncclGetUniqueId failed: unhandled system error (run with NCCL_DEBUG=INFO "
                + "for details) (ncclResult 2)", e0.getMessage());
        for (int r = 1; r < 3; r++) {
            BackendException e = assertInstanceOf(BackendException.class, res.get(r));
            assertTrue(e.getMessage().contains("group rank 0 could not create the NCCL unique id"), e.getMessage());
        }
        for (int r = 0; r < 3; r++) {
            assertFalse(fake.calls(r).contains("ncclCommInitRank"));
        }
    }

    @Test
    void initIsBoundedAndALateCommunicatorIsReleased() {
        FakeNccl fake = new FakeNccl();
        fake.initDelay(Duration.ofMillis(1500));
        List<ThreadRanksGroup> groups = ThreadRanksGroup.create("g", 1, Duration.ofSeconds(20));
        long start = System.nanoTime();
        CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> NcclCommunicator.create("cuda:nccl", fake,
                new DeviceCommunicatorContext(groups.get(0), Device.cuda(0), Duration.ofMillis(300), Map.of())));
        assertTrue(System.nanoTime() - start < TimeUnit.MILLISECONDS.toNanos(1400), "init was not bounded");
        assertTrue(e.getMessage().contains("ncclCommInitRank did not complete"), e.getMessage());
        await("late communicator aborted", () -> fake.abortsOf(0) == 1, Duration.ofSeconds(5));
    }

    @Test
    void twoRanksOnOneDeviceAreRefusedWithNcclsError() {
        FakeNccl fake = new FakeNccl(8, 22903, Duration.ofSeconds(1));
        List<ThreadRanksGroup> groups = ThreadRanksGroup.create("g", 2, Duration.ofSeconds(10));
        List<Object> res = onRanks(2, r -> NcclCommunicator.create("cuda:nccl", fake,
                new DeviceCommunicatorContext(groups.get(r), Device.cuda(0), Duration.ofSeconds(10), Map.of())));
        int invalidUsage = 0;
        for (Object o : res) {
            BackendException e = assertInstanceOf(BackendException.class, o);
            invalidUsage += e.getMessage().contains("ncclCommInitRank(nranks=2") && e.getMessage().contains("invalid usage") ? 1 : 0;
        }
        assertEquals(1, invalidUsage, res.toString());
    }

    @Test
    void nothingIsTrackedWhileTheStreamIsCaptured() {
        FakeNccl fake = new FakeNccl();
        NcclCommunicator comm = world(fake, 1, Map.of(), Duration.ofSeconds(10)).get(0);
        DeviceMemory mem = fake.memory(0, STREAM);
        Tensor a = mem.upload(Tensor.ofFloats(1));
        Tensor b = mem.allocate(DType.F32, 1);
        fake.hang(true);
        fake.capturing(STREAM, true);
        comm.batchP2P(List.of(P2POp.send(a, 0), P2POp.recv(b, 0)), stream(0));
        assertEquals(0, comm.trackedInFlight());
        fake.capturing(STREAM, false);
        comm.batchP2P(List.of(P2POp.send(a, 0), P2POp.recv(b, 0)), stream(0));
        assertEquals(1, comm.trackedInFlight());
        fake.hang(false);
        comm.close();
    }

    @Test
    void everyCallOfAnOperationUsesTheCallersStream() {
        FakeNccl fake = new FakeNccl();
        List<NcclCommunicator> comms = world(fake, 2, Map.of(), Duration.ofSeconds(10));
        Map<Integer, List<String>> calls = new ConcurrentHashMap<>();
        List<Object> res = onRanks(2, r -> {
            DeviceMemory mem = fake.memory(r, STREAM);
            Tensor in = mem.upload(Tensor.ofFloats(1, 2, 3, 4, 5, 6).reshape(2, 3));
            Tensor out = mem.allocate(DType.F32, 2, 6);
            int from = fake.calls(r).size();
            comms.get(r).allGather(out, in, 1, stream(r));
            comms.get(r).synchronize(stream(r));
            calls.put(r, callsSince(fake, r, from));
            return mem.read(out).toDoubleArray();
        });
        for (int r = 0; r < 2; r++) {
            assertArrayEquals(new double[] {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6}, (double[]) res.get(r));
            List<String> c = calls.get(r);
            assertEquals(List.of("cudaMallocAsync@119", "ncclAllGather@119", "cudaMemcpy2DAsync@119", "cudaMemcpy2DAsync@119",
                    "cudaFreeAsync@119", "cudaEventRecord@119"), c);
        }
        comms.forEach(NcclCommunicator::close);
    }

    @Test
    void worldSizeOneCollectivesAreLocalCopiesOnTheStream() {
        FakeNccl fake = new FakeNccl();
        NcclCommunicator comm = world(fake, 1, Map.of(), Duration.ofSeconds(10)).get(0);
        DeviceMemory mem = fake.memory(0, STREAM);
        Tensor in = mem.upload(Tensor.ofFloats(4, 5));
        Tensor out = mem.allocate(DType.F32, 2);
        int from = fake.calls(0).size();
        comm.allReduce(out, in, ReduceOp.AVG, stream(0));
        comm.allReduce(in, in, ReduceOp.SUM, stream(0));
        comm.broadcast(in, 0, stream(0));
        assertEquals(List.of("cudaMemcpyAsync@119"), callsSince(fake, 0, from));
        assertArrayEquals(new double[] {4, 5}, mem.read(out).toDoubleArray());
        comm.close();
    }

    @Test
    void providerRefusesWithTheProbesReasonAndChecksTheDevice() {
        NcclDeviceCommunicatorProvider unavailable = new NcclDeviceCommunicatorProvider(
                () -> new NcclProbe.Result(Availability.unavailable("libnccl.so.2 not found (test)"), null, 0, 0, null));
        ThreadRanksGroup g = ThreadRanksGroup.create("g", 1, Duration.ofSeconds(5)).get(0);
        BackendException e = assertThrows(BackendException.class,
                () -> unavailable.create(new DeviceCommunicatorContext(g, Device.cuda(0))));
        assertEquals("[group=g rank=0 op=create] device communicator provider 'cuda:nccl' is unavailable: libnccl.so.2 not "
                + "found (test)", e.getMessage());
        FakeNccl fake = new FakeNccl(2, 22903, Duration.ofSeconds(5));
        NcclDeviceCommunicatorProvider two = new NcclDeviceCommunicatorProvider(
                () -> new NcclProbe.Result(Availability.available("fake"), null, 22903, 2, fake));
        BackendException e2 = assertThrows(BackendException.class, () -> two.create(new DeviceCommunicatorContext(g, Device.cuda(2))));
        assertTrue(e2.getMessage().contains("cuda:2 requested but only 2 CUDA device(s) are visible"), e2.getMessage());
        BackendException e3 = assertThrows(BackendException.class, () -> two.create(new DeviceCommunicatorContext(g, Device.CPU)));
        assertTrue(e3.getMessage().contains("not cpu tensors"), e3.getMessage());
        DeviceCommunicator ok = two.create(new DeviceCommunicatorContext(g, Device.cuda(1)));
        assertNotNull(ok);
        assertEquals("cuda:nccl", ok.name());
        assertEquals(Device.cuda(1), ok.device());
        ok.close();
    }
}
