package io.jcomm.cpu.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.Availability;
import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.DynamicContainer;
import org.junit.jupiter.api.DynamicNode;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.Timeout;
import io.jcomm.testkit.MultiJvm;

/**
 * The conformance kit every CPU backend re-runs (Netty style): subclass it, return the backend's
 * name from {@link #backend()} (and options from {@link #options()}), and every case of
 * {@link CpuGroupCases} runs against it, plus the bad-input and failure behaviour the
 * {@link ProcessGroup} contract requires.
 *
 * <p>Two flavours: ranks as threads of the test JVM over an {@link InMemoryStore} (fast, for logic),
 * and ranks as separate JVMs ({@link MultiJvm}) over real sockets and the real TCP store, including
 * kill -9 of a rank. The multi-JVM runs start the JVMs once per world size and run every case inside
 * them ({@link CaseWorker}); each case becomes one test here that checks every rank's verdict.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
public abstract class CpuGroupConformanceKit {

    /** A class no codec of the kit registers. */
    public static final class Unregistered {
        public int v = 1;
    }

    /** The backend under test, e.g. {@code tcp}. */
    protected abstract String backend();

    /**
     * Whether the backend can run here (a native library, say); when it cannot, every test of the kit
     * is skipped with the reason, or fails where the run requires {@link #backend()} (see
     * {@link io.jcomm.testkit.Requirements}). Each test reports its own verdict: no suite of "0 tests".
     */
    protected Availability availability() {
        return Availability.available(backend());
    }

    @BeforeEach
    void backendAvailableHere() {
        Availability a = availability();
        io.jcomm.testkit.Requirements.assume(backend(), a.available(), a.reason());
    }

    /** Backend options for every group of the kit. */
    protected Map<String, String> options() {
        return Map.of();
    }

    /** World sizes of the threads-as-ranks runs. */
    protected int[] threadWorldSizes() {
        return new int[] {2, 3, 4};
    }

    /** World sizes of the multi-JVM runs. */
    protected int[] jvmWorldSizes() {
        return new int[] {2, 3, 4};
    }

    /**
     * Whether the kill -9 tests run (each starts 3 JVMs); variants of one backend that differ only in
     * options may turn them off.
     */
    protected boolean failureTests() {
        return true;
    }

    /** Whether the 16 MiB cases run in the multi-JVM flavour. */
    protected boolean bigCasesInJvms() {
        return true;
    }

    /** Whether the 16 MiB cases run in the threads-as-ranks flavour. */
    protected boolean bigCases() {
        return false;
    }

    /**
     * Whether the backend detects inconsistent calls across ranks
     * ({@link CollectiveMismatchException}); backends that cannot must still fail with some
     * {@link CommException} within the timeout instead of hanging.
     */
    protected boolean detectsMismatches() {
        return true;
    }

    /** Default timeout of the kit's groups. */
    protected Duration groupTimeout() {
        return Duration.ofSeconds(30);
    }

    /** Options builder for one rank of a kit group (store, rank and size are filled in by the caller). */
    protected CpuGroupOptions.Builder optionsFor(int rank) {
        CpuGroupOptions.Builder b = CpuGroupOptions.builder().backend(backend()).timeout(groupTimeout())
                .codec(CpuGroupCases.codec()).groupName("kit");
        options().forEach(b::option);
        return b;
    }

    protected ThreadRanks startThreads(int n) {
        return ThreadRanks.start(n, this::optionsFor, groupTimeout());
    }

    // ---------------------------------------------------------------- every case, ranks as threads

    /** Holds one set of groups per world size; recreated when a failed case poisoned it. */
    private final class Ranks {
        final int n;
        ThreadRanks ranks;

        Ranks(int n) {
            this.n = n;
        }

        void run(CpuGroupCases.Case c) {
            if (ranks == null || ranks.group(0).isPoisoned()) {
                if (ranks != null) {
                    ranks.close();
                }
                ranks = startThreads(n);
            }
            ranks.run(c.body(), Duration.ofSeconds(60));
        }

        void close() {
            if (ranks != null) {
                ranks.close();
                ranks = null;
            }
        }
    }

    @TestFactory
    Stream<DynamicNode> casesWithThreadRanks() {
        List<DynamicNode> out = new ArrayList<>();
        for (int n : threadWorldSizes()) {
            Ranks holder = new Ranks(n);
            List<DynamicNode> tests = new ArrayList<>();
            for (CpuGroupCases.Case c : CpuGroupCases.all(bigCases())) {
                tests.add(DynamicTest.dynamicTest(c.name(), () -> holder.run(c)));
            }
            tests.add(DynamicTest.dynamicTest("close", holder::close));
            out.add(DynamicContainer.dynamicContainer(backend() + " N=" + n + " (threads)", tests));
        }
        return out.stream();
    }

    // ---------------------------------------------------------------- every case, ranks as JVMs

    private List<String> workerArgs(long timeoutMillis, String third) {
        List<String> a = new ArrayList<>();
        a.add(backend());
        a.add(Long.toString(timeoutMillis));
        a.add(third);
        options().forEach((k, v) -> a.add(k + "=" + v));
        return a;
    }

    /** One multi-JVM run: the JVMs run every case, the per-case tests read their verdicts. */
    private final class JvmRun {
        final int n;
        MultiJvm.Results results;
        String failure;

        JvmRun(int n) {
            this.n = n;
        }

        void launch() {
            List<String> args = workerArgs(groupTimeout().toMillis(), Boolean.toString(bigCasesInJvms()));
            try (MultiJvm job = MultiJvm.builder().name(backend() + "-cases-" + n).worldSize(n).mainClass(CaseWorker.class)
                    .args(args.toArray(new String[0])).maxHeap("512m").echo(null)
                    .deadline(Duration.ofSeconds(240)).start()) {
                results = job.awaitAll();
            }
            try {
                results.assertAllSucceeded();
            } catch (AssertionError e) {
                failure = e.getMessage();
                throw e;
            }
        }

        void check(String name) {
            if (results == null) {
                throw new AssertionError("the " + n + "-JVM run did not happen");
            }
            for (int r = 0; r < n; r++) {
                List<String> lines = results.linesContaining(r, "CASE " + name + " ");
                String ok = "CASE " + name + " OK";
                if (lines.stream().noneMatch(l -> l.startsWith(ok))) {
                    throw new AssertionError("rank " + r + " of " + n + ": "
                            + (lines.isEmpty() ? "no verdict" + (failure != null ? " (" + failure + ")" : "") : lines.get(0)));
                }
            }
        }
    }

    @TestFactory
    Stream<DynamicNode> casesWithJvmRanks() {
        List<DynamicNode> out = new ArrayList<>();
        for (int n : jvmWorldSizes()) {
            JvmRun run = new JvmRun(n);
            List<DynamicNode> tests = new ArrayList<>();
            tests.add(DynamicTest.dynamicTest("run " + n + " JVMs", run::launch));
            for (CpuGroupCases.Case c : CpuGroupCases.all(bigCasesInJvms())) {
                tests.add(DynamicTest.dynamicTest(c.name(), () -> run.check(c.name())));
            }
            out.add(DynamicContainer.dynamicContainer(backend() + " N=" + n + " (JVMs)", tests));
        }
        return out.stream();
    }

    // ---------------------------------------------------------------- kill -9 of a rank

    /**
     * Starts 3 JVMs looping on {@code mode}, kills rank 1 with SIGKILL, and checks that both survivors
     * fail with {@link PeerFailureException} or {@link CommTimeoutException} within the group timeout
     * (5 s) + 2 s, and that their next call fails fast.
     */
    private void killOneRank(String mode) throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(failureTests(),
                "kill -9 tests are run by the default variant of this backend only");
        long timeoutMs = 5000;
        try (MultiJvm job = MultiJvm.builder().name(backend() + "-kill-" + mode).worldSize(3).mainClass(FailureWorker.class)
                .args(workerArgs(timeoutMs, mode).toArray(new String[0])).maxHeap("512m").keepOthersOnFailure()
                .deadline(Duration.ofSeconds(90)).start()) {
            for (int r = 0; r < 3; r++) {
                job.awaitLine(r, "READY", Duration.ofSeconds(60));
            }
            Thread.sleep(150);
            job.kill(1);
            MultiJvm.Results res = job.awaitAll();
            res.assertSurvivorsSucceeded();
            for (int r : new int[] {0, 2}) {
                List<String> failed = res.linesContaining(r, "FAILED ");
                assertEquals(1, failed.size(), "rank " + r + " output:\n" + String.join("\n", res.output(r)));
                String[] f = failed.get(0).split(" ", 4);
                assertTrue(f[1].equals("PeerFailureException") || f[1].equals("CommTimeoutException"), failed.get(0));
                assertTrue(Long.parseLong(f[2]) <= timeoutMs + 2000, "detection took " + f[2] + " ms: " + failed.get(0));
                String after = res.linesContaining(r, "AFTER ").get(0);
                String[] a = after.split(" ", 4);
                assertTrue(!a[1].equals("none"), "a call after the failure succeeded: " + after);
                assertTrue(Long.parseLong(a[2]) < 1000, "the next call did not fail fast: " + after);
            }
        }
    }

    @Test
    void killDuringAllReduceFailsTheSurvivorsInTime() throws Exception {
        killOneRank("allreduce");
    }

    @Test
    void killDuringBarrierFailsTheSurvivorsInTime() throws Exception {
        killOneRank("barrier");
    }

    // ---------------------------------------------------------------- identity and size 1

    @Test
    void groupOfOneNeedsNoPeers() {
        CpuGroupOptions o = optionsFor(0).store(new InMemoryStore()).rank(0).size(1).groupName("solo").build();
        try (ProcessGroup g = CpuGroups.create(o)) {
            assertEquals(1, g.size());
            assertEquals(List.of(0), g.globalRanks());
            g.barrier();
            Tensor x = Tensor.ofFloats(1, 2, 3);
            g.allReduce(x, ReduceOp.AVG);
            assertEquals(2.0, x.getDouble(1));
            Tensor out = Tensor.allocate(DType.F32, 3);
            g.allGather(out, x);
            assertTrue(out.contentEquals(x));
            Tensor rs = Tensor.allocate(DType.F32, 3);
            g.reduceScatter(rs, x, ReduceOp.SUM);
            assertTrue(rs.contentEquals(x));
            assertEquals("v", g.broadcastObject("v", 0, String.class));
            assertEquals(List.of(7), g.allGatherObject(7, Integer.class));
            assertTrue(g.allReduceAsync(x, ReduceOp.SUM, Duration.ofSeconds(1)).isDone());
            assertThrows(IllegalArgumentException.class, () -> g.send(x, 0, 0));
            assertThrows(IllegalArgumentException.class, () -> g.broadcast(x, 1));
        }
    }

    @Test
    void identityAndBackendName() {
        try (ThreadRanks t = startThreads(2)) {
            for (int r = 0; r < 2; r++) {
                ProcessGroup g = t.group(r);
                assertEquals(r, g.rank());
                assertEquals(2, g.size());
                assertEquals("kit", g.name());
                assertEquals(backend(), g.backendName());
                assertEquals(List.of(0, 1), g.globalRanks());
                assertFalse(g.isPoisoned());
            }
        }
    }

    // ---------------------------------------------------------------- bad input

    @Test
    void invalidArgumentsFailLocallyAndLeaveTheGroupUsable() {
        try (ThreadRanks t = startThreads(2)) {
            t.run(g -> {
                Tensor f = Tensor.ofFloats(1, 2, 3);
                assertContext(assertThrows(IllegalArgumentException.class, () -> g.broadcast(f, 2)), g, "broadcast");
                assertThrows(IllegalArgumentException.class, () -> g.broadcast(f, -1));
                assertThrows(IllegalArgumentException.class, () -> g.allGather(Tensor.allocate(DType.F32, 5), f));
                assertThrows(IllegalArgumentException.class, () -> g.allGather(Tensor.allocate(DType.I32, 6), f));
                assertThrows(IllegalArgumentException.class, () -> g.reduceScatter(Tensor.allocate(DType.F32, 2), f, ReduceOp.SUM));
                assertThrows(IllegalArgumentException.class, () -> g.allReduce(Tensor.allocate(DType.BOOL, 2), ReduceOp.AVG));
                assertThrows(IllegalArgumentException.class, () -> g.allGatherV(Tensor.allocate(DType.F32, 3), f, new long[] {3}));
                assertThrows(IllegalArgumentException.class,
                        () -> g.allGatherV(Tensor.allocate(DType.F32, 4), f, new long[] {3, -1}));
                assertThrows(IllegalArgumentException.class, () -> g.allToAll(Tensor.allocate(DType.F32, 3), f)); // 3 % 2 != 0
                Tensor four = Tensor.allocate(DType.F32, 4);
                assertThrows(IllegalArgumentException.class, () -> g.allToAll(four, four), "same tensor");
                assertThrows(IllegalArgumentException.class, () -> g.allToAll(Tensor.allocate(DType.I32, 4), four));
                assertThrows(IllegalArgumentException.class,
                        () -> g.allToAllV(Tensor.allocate(DType.F32, 3), f, new long[] {3}, new long[] {3}));
                assertThrows(IllegalArgumentException.class,
                        () -> g.allToAllV(Tensor.allocate(DType.F32, 3), f, new long[] {1, 2}, new long[] {4, -1}));
                assertThrows(IllegalArgumentException.class,
                        () -> g.allToAllV(Tensor.allocate(DType.F32, 3), f, new long[] {1, 1}, new long[] {1, 2}));
                assertThrows(IllegalArgumentException.class,
                        () -> g.batchIsendIrecv(List.of(io.jcomm.api.device.P2POp.send(f, g.rank()))), "self");
                assertThrows(IllegalArgumentException.class,
                        () -> g.batchIsendIrecv(List.of(io.jcomm.api.device.P2POp.recv(f, 5))), "out of range");
                assertTrue(g.batchIsendIrecv(List.of()).isSuccess(), "an empty batch completes at once");
                assertThrows(IllegalArgumentException.class, () -> g.gather(null, f, g.rank()));
                assertThrows(IllegalArgumentException.class, () -> g.scatter(f, null, g.rank()));
                assertThrows(IllegalArgumentException.class, () -> g.send(f, g.rank(), 0));
                assertThrows(IllegalArgumentException.class, () -> g.send(f, 1 - g.rank(), -5));
                assertThrows(IllegalArgumentException.class, () -> g.recv(f, 7, 0));
                Tensor dev = Tensor.onDevice(Device.cuda(0), 4096, DType.F32, new long[] {3}, null);
                assertThrows(IllegalArgumentException.class, () -> g.allReduce(dev, ReduceOp.SUM));
                assertThrows(IllegalArgumentException.class, () -> g.barrier(Duration.ofSeconds(-1)));
                assertThrows(IllegalArgumentException.class, () -> g.sendObject(new Unregistered(), 1 - g.rank()));
                assertFalse(g.isPoisoned());
                Tensor x = Tensor.ofFloats(g.rank() + 1);
                g.allReduce(x, ReduceOp.SUM);
                assertEquals(3.0, x.getDouble(0));
            }, Duration.ofSeconds(30));
        }
    }

    /** A misuse names the group, rank and operation in its message as a {@link CommException} does. */
    static void assertContext(IllegalArgumentException e, ProcessGroup g, String op) {
        assertTrue(e.getMessage().startsWith("[group=" + g.name() + " rank=" + g.rank() + " op=" + op + "]"), e.getMessage());
    }

    static void assertContext(CommException e, ProcessGroup g, String op) {
        assertEquals(g.name(), e.group(), e.getMessage());
        assertEquals(g.rank(), e.rank(), e.getMessage());
        assertEquals(op, e.operation(), e.getMessage());
        assertTrue(e.getMessage().startsWith("[group=" + g.name() + " rank=" + g.rank() + " op=" + op + "]"), e.getMessage());
    }

    /**
     * Every rank must fail: with {@link CollectiveMismatchException} when the backend detects
     * mismatches; otherwise (a backend without headers) every rank must at least return, with a
     * result or any {@link CommException}, instead of hanging.
     */
    private void expectMismatch(List<Object> outcomes) {
        for (int r = 0; r < outcomes.size(); r++) {
            Object o = outcomes.get(r);
            if (detectsMismatches()) {
                assertInstanceOf(CollectiveMismatchException.class, o, "rank " + r + ": " + o);
            } else if (o instanceof Throwable) {
                assertInstanceOf(CommException.class, o, "rank " + r + ": " + o);
            }
        }
    }

    @Test
    void mismatchedCountsFailEveryRankWithoutHanging() {
        try (ThreadRanks t = startThreads(2)) {
            long start = System.nanoTime();
            List<Object> out = t.outcomes(g -> {
                Tensor x = Tensor.allocate(DType.F32, g.rank() == 0 ? 100 : 200);
                g.allReduce(x, ReduceOp.SUM, Duration.ofSeconds(5));
                return "completed";
            }, Duration.ofSeconds(20));
            expectMismatch(out);
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(8), "took too long");
            org.junit.jupiter.api.Assumptions.assumeTrue(detectsMismatches(),
                    "the backend does not detect mismatches, so it need not poison the group");
            // the group is poisoned: later calls fail at once with the same kind of error
            List<Object> after = t.outcomes(g -> {
                long s = System.nanoTime();
                CommException e = assertThrows(CommException.class, () -> g.barrier(Duration.ofSeconds(5)));
                assertTrue(System.nanoTime() - s < TimeUnit.SECONDS.toNanos(1), "did not fail fast");
                assertTrue(g.isPoisoned());
                return e;
            }, Duration.ofSeconds(20));
            for (Object o : after) {
                assertInstanceOf(CommException.class, o);
                if (detectsMismatches()) {
                    assertInstanceOf(CollectiveMismatchException.class, o, String.valueOf(o));
                }
            }
        }
    }

    @Test
    void allToAllVCountsThatDisagreeFailEveryRankWithoutHanging() {
        try (ThreadRanks t = startThreads(3)) {
            long start = System.nanoTime();
            List<Object> out = t.outcomes(g -> {
                long[] inCounts = {2, 2, 2};
                long[] outCounts = {2, 2, 2};
                if (g.rank() == 1) {
                    inCounts[2] = 3; // rank 1 sends rank 2 three elements; rank 2 expects two
                }
                Tensor in = Tensor.allocate(DType.F32, Arrays.stream(inCounts).sum());
                Tensor o = Tensor.allocate(DType.F32, Arrays.stream(outCounts).sum());
                g.allToAllV(o, in, outCounts, inCounts, Duration.ofSeconds(5));
                return "completed";
            }, Duration.ofSeconds(20));
            assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(8), "took too long");
            // only the receiver of the wrong count must see it at once; with a pairwise exchange the
            // others may finish their part first (they fail at their next call, below)
            for (int r : new int[] {0, 1}) {
                assertTrue("completed".equals(out.get(r)) || out.get(r) instanceof CommException, "rank " + r + ": "
                        + out.get(r));
            }
            if (!detectsMismatches()) {
                expectMismatch(out);
                return;
            }
            assertInstanceOf(CollectiveMismatchException.class, out.get(2), "rank 2: " + out.get(2));
            String m = ((Throwable) out.get(2)).getMessage();
            assertTrue(m.contains("rank 1"), "the receiver names the sender: " + m);
            // and the group is poisoned everywhere: the next call fails at once, on rank 0 too
            List<Object> after = t.outcomes(g -> {
                CommException e = assertThrows(CommException.class, () -> g.barrier(Duration.ofSeconds(5)));
                return e;
            }, Duration.ofSeconds(20));
            for (Object o : after) {
                assertInstanceOf(CollectiveMismatchException.class, o, String.valueOf(o));
            }
        }
        try (ThreadRanks t = startThreads(2)) {
            List<Object> out = t.outcomes(g -> {
                // equal splits of different sizes on the two ranks
                int n = g.rank() == 0 ? 4 : 6;
                g.allToAll(Tensor.allocate(DType.I32, n), Tensor.allocate(DType.I32, n), Duration.ofSeconds(5));
                return "completed";
            }, Duration.ofSeconds(20));
            expectMismatch(out);
        }
    }

    @Test
    void mismatchedDtypesAndOperationsAreDetected() {
        try (ThreadRanks t = startThreads(2)) {
            List<Object> out = t.outcomes(g -> {
                Tensor x = g.rank() == 0 ? Tensor.allocate(DType.F32, 64) : Tensor.allocate(DType.I32, 64);
                g.allReduce(x, ReduceOp.SUM, Duration.ofSeconds(5));
                return "completed";
            }, Duration.ofSeconds(20));
            expectMismatch(out);
        }
        try (ThreadRanks t = startThreads(3)) {
            List<Object> out = t.outcomes(g -> {
                if (g.rank() == 2) {
                    g.allReduce(Tensor.ofFloats(1), ReduceOp.MAX, Duration.ofSeconds(5));
                } else {
                    g.allReduce(Tensor.ofFloats(1), ReduceOp.SUM, Duration.ofSeconds(5));
                }
                return "completed";
            }, Duration.ofSeconds(20));
            expectMismatch(out);
        }
        try (ThreadRanks t = startThreads(2)) {
            List<Object> out = t.outcomes(g -> {
                if (g.rank() == 0) {
                    g.barrier(Duration.ofSeconds(5));
                } else {
                    g.allGather(Tensor.allocate(DType.F32, 2), Tensor.ofFloats(1), Duration.ofSeconds(5));
                }
                return "completed";
            }, Duration.ofSeconds(20));
            expectMismatch(out);
        }
    }

    @Test
    void oversizedObjectIsRejectedBeforeAllocation() {
        try (ThreadRanks t = ThreadRanks.start(2, r -> optionsFor(r).option(CpuGroupOptions.MAX_OBJECT_BYTES_OPTION,
                r == 1 ? "1000" : "100000000"), groupTimeout())) {
            List<Object> out = t.outcomes(g -> {
                return g.broadcastObject(g.rank() == 0 ? "x".repeat(5000) : null, 0, String.class, Duration.ofSeconds(5));
            }, Duration.ofSeconds(20));
            // the sender may finish or fail (its receiver gave up); the receiver must refuse the length
            assertTrue(out.get(0) instanceof String || out.get(0) instanceof CommException, String.valueOf(out.get(0)));
            assertInstanceOf(ProtocolException.class, out.get(1), String.valueOf(out.get(1)));
            assertTrue(((Throwable) out.get(1)).getMessage().contains("1000"), String.valueOf(out.get(1)));
        }
    }

    @Test
    void objectOfTheWrongTypeFailsOnlyThatCall() {
        try (ThreadRanks t = startThreads(2)) {
            List<Object> out = t.outcomes(g -> g.broadcastObject(g.rank() == 0 ? "text" : null, 0, Object.class)
                    .getClass().getSimpleName(), Duration.ofSeconds(20));
            assertEquals(List.of("String", "String"), out);
            List<Object> typed = t.outcomes(g -> {
                if (g.rank() == 0) {
                    return g.broadcastObject("text", 0, String.class);
                }
                return g.broadcastObject(null, 0, Integer.class);
            }, Duration.ofSeconds(20));
            assertEquals("text", typed.get(0));
            assertInstanceOf(ProtocolException.class, typed.get(1));
            // decoding failures do not poison: the stream was consumed completely
            t.run(g -> {
                assertFalse(g.isPoisoned());
                g.barrier();
            }, Duration.ofSeconds(20));
        }
    }

    // ---------------------------------------------------------------- deadlines, close, poisoning

    @Test
    void timeoutPoisonsAndPeersFailFast() {
        try (ThreadRanks t = startThreads(2)) {
            ProcessGroup g0 = t.group(0);
            ProcessGroup g1 = t.group(1);
            List<Object> first = t.outcomes(g -> {
                if (g.rank() == 0) {
                    long s = System.nanoTime();
                    // waits for a message rank 1 never sends (rank 0 itself sends nothing)
                    CommTimeoutException e = assertThrows(CommTimeoutException.class,
                            () -> g.recv(Tensor.allocate(DType.F32, 4), 1, 0, Duration.ofMillis(300)));
                    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - s);
                    assertTrue(ms >= 250 && ms < 10_000, "timed out after " + ms + " ms");
                    assertContext(e, g, "recv");
                    return e;
                }
                return "idle";
            }, Duration.ofSeconds(20));
            assertInstanceOf(CommTimeoutException.class, first.get(0));
            assertTrue(g0.isPoisoned());
            long s = System.nanoTime();
            CommTimeoutException again = assertThrows(CommTimeoutException.class, g0::barrier);
            assertTrue(System.nanoTime() - s < TimeUnit.MILLISECONDS.toNanos(500));
            assertTrue(again.getCause() == first.get(0), "the original failure is the cause");
            // the peer learns about it at once (abort), not after its own timeout
            List<Object> peer = t.outcomes(g -> {
                if (g.rank() == 1) {
                    long s1 = System.nanoTime();
                    CommException e = assertThrows(CommException.class, () -> g.barrier(Duration.ofSeconds(20)));
                    assertTrue(System.nanoTime() - s1 < TimeUnit.SECONDS.toNanos(5), "peer did not fail fast");
                    return e;
                }
                return "skip";
            }, Duration.ofSeconds(30));
            Object e1 = peer.get(1);
            assertTrue(e1 instanceof PeerFailureException || e1 instanceof CommClosedException
                    || e1 instanceof CommTimeoutException, String.valueOf(e1));
            assertTrue(g1.isPoisoned());
        }
    }

    @Test
    void closeUnblocksACallInProgress() throws Exception {
        try (ThreadRanks t = startThreads(2)) {
            ProcessGroup g0 = t.group(0);
            Thread closer = new Thread(() -> {
                try {
                    Thread.sleep(300);
                } catch (InterruptedException ignored) {
                    return;
                }
                g0.close();
            });
            closer.start();
            List<Object> out = t.outcomes(g -> {
                if (g.rank() == 0) {
                    long s = System.nanoTime();
                    CommException e = assertThrows(CommException.class,
                            () -> g.recv(Tensor.allocate(DType.I64, 1), 1, 0, Duration.ofSeconds(20)));
                    assertTrue(System.nanoTime() - s < TimeUnit.SECONDS.toNanos(5), "close did not unblock");
                    return e;
                }
                return "idle";
            }, Duration.ofSeconds(30));
            closer.join();
            assertInstanceOf(CommClosedException.class, out.get(0));
            assertThrows(CommClosedException.class, g0::barrier);
            g0.close(); // idempotent
            // the peer sees a clean close, not a crash
            List<Object> peer = t.outcomes(g -> {
                if (g.rank() == 1) {
                    return assertThrows(CommException.class, () -> g.barrier(Duration.ofSeconds(10)));
                }
                return null;
            }, Duration.ofSeconds(20));
            assertNull(peer.get(0));
            assertTrue(peer.get(1) instanceof CommClosedException || peer.get(1) instanceof PeerFailureException,
                    String.valueOf(peer.get(1)));
        }
    }

    @Test
    void asyncWorkFailsWhenTheGroupClosesAndAfterPoisoning() {
        try (ThreadRanks t = startThreads(2)) {
            ProcessGroup g0 = t.group(0);
            io.jcomm.api.work.Work<Void> w = g0.recvAsync(Tensor.allocate(DType.F32, 8), 1, 0, Duration.ofSeconds(20));
            io.jcomm.api.work.Work<Void> queued = g0.barrierAsync(Duration.ofSeconds(20));
            assertFalse(w.isDone());
            assertThrows(CommTimeoutException.class, () -> w.await(Duration.ofMillis(50)));
            assertFalse(w.isDone(), "a wait that times out leaves the operation running");
            long s = System.nanoTime();
            g0.close();
            assertInstanceOf(CommClosedException.class, assertThrows(CommException.class, w::await));
            assertInstanceOf(CommClosedException.class, assertThrows(CommException.class, queued::await));
            assertTrue(System.nanoTime() - s < TimeUnit.SECONDS.toNanos(5));
            io.jcomm.api.work.Work<Void> after = g0.barrierAsync(Duration.ofSeconds(1));
            assertTrue(after.isDone() && !after.isSuccess());
            assertInstanceOf(CommClosedException.class, after.failure().orElseThrow());
        }
    }

    @Test
    void differentCodecRegistrationsAreRejectedAtCreation() {
        AssertionError e = assertThrows(AssertionError.class, () -> ThreadRanks.start(2, r -> {
            CpuGroupOptions.Builder b = optionsFor(r);
            if (r == 1) {
                b.codec(io.jcomm.cpu.codec.ForyCodec.defaults());
            }
            return b;
        }, groupTimeout()).close());
        assertInstanceOf(ProtocolException.class, e.getCause(), String.valueOf(e.getCause()));
        assertTrue(e.getCause().getMessage().contains("different classes"), e.getCause().getMessage());
    }

    // ---------------------------------------------------------------- shrink (survive a rank loss)

    /** Closes every group in {@code outcomes} (from the test thread, after every rank returned). */
    private static void closeGroups(List<Object> outcomes) {
        for (Object o : outcomes) {
            if (o instanceof ProcessGroup g) {
                g.close();
            }
        }
    }

    /** Rank {@code r}'s rank in the group without {@code excluded} (ascending, renumbered). */
    private static int rankWithout(int r, int... excluded) {
        int n = r;
        for (int e : excluded) {
            if (e < r) {
                n--;
            }
        }
        return n;
    }

    /**
     * A world of 4 without rank 2, which is alive but never calls: the others shrink, and the new group
     * has ranks 0, 1, 2 (old 0, 1, 3), global ranks [0, 1, 3], generation 1, the same name and backend;
     * its all-reduce, all-gather and object broadcast give the values of the new ranks; the old group
     * refuses every call at once.
     */
    @Test
    void shrinkWithoutAnIdleRankMakesANewGroupThatComputes() {
        try (ThreadRanks t = startThreads(4)) {
            List<Object> out = t.outcomes(g -> {
                if (g.rank() == 2) {
                    return "idle";
                }
                long s = System.nanoTime();
                ProcessGroup n = g.shrink(List.of(2), Duration.ofSeconds(20));
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - s);
                assertTrue(ms < 10_000, "shrink took " + ms + " ms");
                assertEquals(rankWithout(g.rank(), 2), n.rank());
                assertEquals(3, n.size());
                assertEquals(List.of(0, 1, 3), n.globalRanks());
                assertEquals(1, n.generation());
                assertEquals(0, g.generation());
                assertEquals(g.name(), n.name());
                assertEquals(backend(), n.backendName());
                assertFalse(n.isPoisoned());
                Tensor x = Tensor.ofFloats(g.rank() + 1, 10 * (g.rank() + 1));
                n.allReduce(x, ReduceOp.SUM);
                assertEquals(1 + 2 + 4, x.getDouble(0));
                assertEquals(10 + 20 + 40, x.getDouble(1));
                Tensor all = Tensor.allocate(DType.I32, 3);
                n.allGather(all, Tensor.ofInts(1000 * n.rank() + g.rank()));
                assertEquals(List.of(0L, 1001L, 2003L), List.of(all.getLong(0), all.getLong(1), all.getLong(2)));
                assertEquals("from old rank 3", n.broadcastObject("from old rank " + g.rank(), 2, String.class));
                // the old group is aborted: every call fails at once
                assertTrue(g.isPoisoned());
                long b = System.nanoTime();
                assertThrows(CommClosedException.class, () -> g.barrier(Duration.ofSeconds(20)));
                assertTrue(System.nanoTime() - b < TimeUnit.SECONDS.toNanos(1), "the old group did not fail fast");
                n.barrier();
                return n;
            }, Duration.ofSeconds(60));
            try {
                assertEquals("idle", out.get(2));
                for (int r : new int[] {0, 1, 3}) {
                    assertInstanceOf(ProcessGroup.class, out.get(r), "rank " + r + ": " + out.get(r));
                }
            } finally {
                closeGroups(out);
            }
        }
    }

    /**
     * An operation pending on the old group (an all-reduce that the idle rank never joins, 30 s timeout)
     * fails with {@link CommClosedException} within a second of the shrink, and the new group works.
     */
    @Test
    void shrinkFailsAPendingOperationOfTheOldGroupFast() {
        try (ThreadRanks t = startThreads(3)) {
            // both look at their pending all-reduce before either shrinks (a shrink ends the other's too)
            java.util.concurrent.CyclicBarrier looked = new java.util.concurrent.CyclicBarrier(2);
            List<Object> out = t.outcomes(g -> {
                if (g.rank() == 2) {
                    return "idle";
                }
                io.jcomm.api.work.Work<Void> pending = g.allReduceAsync(Tensor.ofFloats(1), ReduceOp.SUM, Duration.ofSeconds(30));
                try {
                    Thread.sleep(200);
                    assertFalse(pending.isDone(), () -> "the all-reduce cannot complete without rank 2: " + pending.failure());
                    looked.await(20, TimeUnit.SECONDS);
                } catch (InterruptedException | java.util.concurrent.BrokenBarrierException
                         | java.util.concurrent.TimeoutException e) {
                    throw new AssertionError(e);
                }
                long s = System.nanoTime();
                ProcessGroup n = g.shrink(List.of(2), Duration.ofSeconds(20));
                CommException e = assertThrows(CommException.class, () -> pending.await(Duration.ofSeconds(5)));
                assertInstanceOf(CommClosedException.class, e, String.valueOf(e));
                assertTrue(System.nanoTime() - s < TimeUnit.SECONDS.toNanos(5), "the pending operation did not fail fast");
                Tensor x = Tensor.ofInts(g.rank() + 1);
                n.allReduce(x, ReduceOp.SUM);
                assertEquals(3, x.getLong(0));
                n.barrier();
                return n;
            }, Duration.ofSeconds(60));
            try {
                assertInstanceOf(ProcessGroup.class, out.get(0), String.valueOf(out));
                assertInstanceOf(ProcessGroup.class, out.get(1), String.valueOf(out));
            } finally {
                closeGroups(out);
            }
        }
    }

    /**
     * Rank 2 is idle; ranks 0 and 1 exclude it, rank 3 excludes ranks 1 and 2: every caller fails with
     * {@link CollectiveMismatchException} long before the 20 s timeout.
     */
    @Test
    void survivorsThatDisagreeOnTheExcludedRanksFailTyped() {
        try (ThreadRanks t = startThreads(4)) {
            long start = System.nanoTime();
            List<Object> out = t.outcomes(g -> {
                if (g.rank() == 2) {
                    return "idle";
                }
                return g.shrink(g.rank() == 3 ? List.of(1, 2) : List.of(2), Duration.ofSeconds(20));
            }, Duration.ofSeconds(60));
            try {
                for (int r : new int[] {0, 1, 3}) {
                    assertInstanceOf(CollectiveMismatchException.class, out.get(r), "rank " + r + ": " + out.get(r));
                    assertTrue(((Throwable) out.get(r)).getMessage().contains("excluded="), String.valueOf(out.get(r)));
                }
                assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(10), "disagreement was not found fast");
            } finally {
                closeGroups(out);
            }
        }
    }

    /**
     * Bad arguments fail locally with {@link IllegalArgumentException} and leave the group usable; then rank 1
     * closes its group (it is gone), ranks 0 and 2 shrink without it within a 5 s deadline, and shrink
     * the new group again without excluding anyone (generation 2, same members).
     */
    @Test
    void shrinkWithoutAClosedRankCompletesWithinItsDeadline() {
        try (ThreadRanks t = startThreads(3)) {
            t.run(g -> {
                assertThrows(IllegalArgumentException.class, () -> g.shrink(List.of(g.rank())));
                assertThrows(IllegalArgumentException.class, () -> g.shrink(List.of(3)));
                assertThrows(IllegalArgumentException.class, () -> g.shrink(List.of((g.rank() + 1) % 3, (g.rank() + 1) % 3)));
                assertFalse(g.isPoisoned());
                g.barrier();
            }, Duration.ofSeconds(30));
            t.group(1).close();
            List<Object> out = t.outcomes(g -> {
                if (g.rank() == 1) {
                    return "gone";
                }
                long s = System.nanoTime();
                ProcessGroup n = g.shrink(List.of(1), Duration.ofSeconds(5));
                assertTrue(System.nanoTime() - s < TimeUnit.SECONDS.toNanos(5));
                assertEquals(List.of(0, 2), n.globalRanks());
                ProcessGroup again = n.shrink(List.of(), Duration.ofSeconds(5));
                assertEquals(2, again.generation());
                assertEquals(n.rank(), again.rank());
                assertTrue(n.isPoisoned());
                List<Integer> ranks = again.allGatherObject(g.rank(), Integer.class);
                assertEquals(List.of(0, 2), ranks);
                again.barrier();
                return again;
            }, Duration.ofSeconds(60));
            try {
                assertInstanceOf(ProcessGroup.class, out.get(0), String.valueOf(out.get(0)));
                assertInstanceOf(ProcessGroup.class, out.get(2), String.valueOf(out.get(2)));
            } finally {
                closeGroups(out);
            }
        }
    }
}
