package io.jcomm.cpu.gloo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.BackendException;
import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DType;
import io.jcomm.api.Deadline;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.cpu.CpuGroupOptions;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Errors of the gloo backend: typed, prompt, never a hang or a crash. */
@Timeout(120)
class GlooFailureTest {

    private static Deadline d(long millis) {
        return Deadline.after(Duration.ofMillis(millis));
    }

    private static long elapsedMillis(long startNanos) {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startNanos);
    }

    @Test
    void localArgumentErrorsFailBeforeSendingAndKeepTheGroupUsable() {
        ThreadRanks.run(2, (b, rank) -> {
            Tensor in = Tensor.ofFloats(1, 2);
            assertThrows(IllegalArgumentException.class, () -> b.allGather(Tensor.allocate(DType.F32, 3), in, d(5000)));
            assertThrows(IllegalArgumentException.class, () -> b.allGather(Tensor.allocate(DType.F64, 4), in, d(5000)));
            assertThrows(IllegalArgumentException.class, () -> b.broadcast(in, 2, d(5000)));
            assertThrows(IllegalArgumentException.class, () -> b.send(in, rank, 0, d(5000)));
            assertThrows(IllegalArgumentException.class, () -> b.recv(in, 7, 0, d(5000)));
            assertThrows(IllegalArgumentException.class, () -> b.allReduce(Tensor.allocate(DType.BOOL, 1), ReduceOp.AVG, d(5000)));
            assertThrows(IllegalArgumentException.class, () -> b.reduceScatter(Tensor.allocate(DType.F32, 2), in, ReduceOp.SUM, d(5000)));
            assertThrows(IllegalArgumentException.class, () -> b.allGatherV(Tensor.allocate(DType.F32, 3), in, new long[] {2, 2}, d(5000)));
            assertThrows(IllegalArgumentException.class, () -> b.scatter(Tensor.allocate(DType.F32, 1), null, rank, d(5000)));
            assertEquals(0, b.nextTag(), "no tag consumed");
            b.allReduce(in, ReduceOp.SUM, d(10_000));
            assertEquals(4.0, in.getDouble(1));
        });
    }

    @Test
    void inconsistentCollectivesAcrossRanksFailOnEveryRank() {
        ThreadRanks.run(3, (b, rank) -> {
            // rank 2 passes a different element count: without the check libgloo would abort the
            // process when the larger segment arrives.
            Tensor x = Tensor.allocate(DType.F32, rank == 2 ? 8 : 4);
            CollectiveMismatchException e = assertThrows(CollectiveMismatchException.class,
                    () -> b.allReduce(x, ReduceOp.SUM, d(10_000)));
            assertEquals("allReduce", e.operation());
            assertTrue(e.getMessage().contains("count="), e.getMessage());
            // poisoned: fails at once with the first failure as cause
            CommException again = assertThrows(CollectiveMismatchException.class, () -> b.barrier(d(10_000)));
            assertSame(e, again.getCause());
            assertTrue(b.isPoisoned());
        });
    }

    @Test
    void debugDetailForcesTheArgumentCheckOnOverTheOption() {
        // JCOMM_DEBUG=detail reaches the backend as the group option "debug"; it wins over gloo.checkArgs=false
        ThreadRanks.run(2, Map.of(GlooBackend.CHECK_ARGS_OPTION, "false", CpuGroupOptions.DEBUG_OPTION, "detail"),
                Duration.ofSeconds(60), (b, rank) -> {
                    assertTrue(b.checksArguments());
                    Tensor x = Tensor.allocate(DType.F32, rank == 1 ? 8 : 4);
                    CollectiveMismatchException e = assertThrows(CollectiveMismatchException.class,
                            () -> b.allReduce(x, ReduceOp.SUM, d(10_000)));
                    assertTrue(e.getMessage().contains("count="), e.getMessage());
                });
        ThreadRanks.run(2, Map.of(GlooBackend.CHECK_ARGS_OPTION, "false", CpuGroupOptions.DEBUG_OPTION, "off"),
                Duration.ofSeconds(60), (b, rank) -> assertTrue(!b.checksArguments()));
    }

    @Test
    void differentOperationsOnDifferentRanksAreAMismatch() {
        ThreadRanks.run(2, (b, rank) -> {
            long start = System.nanoTime();
            if (rank == 0) {
                assertThrows(CollectiveMismatchException.class, () -> b.barrier(d(10_000)));
            } else {
                assertThrows(CollectiveMismatchException.class,
                        () -> b.broadcast(Tensor.ofLongs(1, 2, 3), 0, d(10_000)));
            }
            assertTrue(elapsedMillis(start) < 5000, "detected at once");
        });
    }

    @Test
    void receiveOfTheWrongSizeIsAMismatch() {
        ThreadRanks.run(2, (b, rank) -> {
            if (rank == 0) {
                b.send(Tensor.ofInts(1, 2, 3), 1, 4, d(10_000));
            } else {
                Tensor big = Tensor.allocate(DType.I32, 5);
                CollectiveMismatchException e = assertThrows(CollectiveMismatchException.class,
                        () -> b.recv(big, 0, 4, d(10_000)));
                assertTrue(e.getMessage().contains("expected 20 bytes but the sender sent 12"), e.getMessage());
            }
        });
    }

    @Test
    void timeoutPoisonsTheBackendAndPeersFailFast() {
        CountDownLatch rank0Failed = new CountDownLatch(1);
        ThreadRanks.run(2, (b, rank) -> {
            if (rank == 0) {
                long start = System.nanoTime();
                CommTimeoutException e = assertThrows(CommTimeoutException.class,
                        () -> b.allReduce(Tensor.ofFloats(1), ReduceOp.SUM, d(500)));
                long took = elapsedMillis(start);
                assertTrue(took >= 400 && took < 5000, "timed out after " + took + " ms");
                rank0Failed.countDown();
                start = System.nanoTime();
                CommTimeoutException again = assertThrows(CommTimeoutException.class,
                        () -> b.barrier(d(10_000)));
                assertTrue(elapsedMillis(start) < 1000, "poisoned call fails at once");
                assertSame(e, again.getCause());
            } else {
                assertTrue(rank0Failed.await(30, TimeUnit.SECONDS));
                // rank 0 closed its connections after its timeout: this rank fails fast too.
                long start = System.nanoTime();
                PeerFailureException e = assertThrows(PeerFailureException.class,
                        () -> b.allReduce(Tensor.ofFloats(1), ReduceOp.SUM, d(20_000)));
                assertTrue(elapsedMillis(start) < 5000, "peer failure seen promptly");
                assertEquals(0, e.peerRank(), e.getMessage());
            }
        });
    }

    @Test
    void aSendNobodyReceivesPoisonsTheBackendLater() {
        CountDownLatch done = new CountDownLatch(1);
        ThreadRanks.run(2, (b, rank) -> {
            b.barrier(d(10_000));
            if (rank == 0) {
                b.send(Tensor.ofInts(1), 1, 5, d(300)); // returns at once: buffered
                Thread.sleep(1500);
                long start = System.nanoTime();
                CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> b.barrier(d(10_000)));
                assertTrue(elapsedMillis(start) < 1000, "reported at once");
                assertTrue(e.getMessage().contains("an earlier send failed"), e.getMessage());
                done.countDown();
            } else {
                assertTrue(done.await(30, TimeUnit.SECONDS));
            }
        });
    }

    @Test
    void expiredDeadlineIsATimeout() {
        ThreadRanks.run(2, (b, rank) -> {
            b.barrier(d(10_000)); // both connected before either closes
            assertThrows(CommTimeoutException.class, () -> b.barrier(Deadline.afterNanos(0)));
            assertTrue(b.isPoisoned());
        });
    }

    @Test
    void peerThatClosesIsACleanCloseForTheOthers() {
        ThreadRanks.run(3, (b, rank) -> {
            b.barrier(d(10_000));
            if (rank == 1) {
                b.close(); // says goodbye, then closes its connections
                return;
            }
            long start = System.nanoTime();
            CommClosedException e = assertThrows(CommClosedException.class, () -> {
                b.barrier(d(20_000));
                b.barrier(d(20_000));
            });
            assertTrue(elapsedMillis(start) < 10_000, "failed promptly: " + elapsedMillis(start) + " ms");
            assertTrue(e.getMessage().contains("closed the group"), e.getMessage());
        });
    }

    @Test
    void peerThatGoesAwayWithoutGoodbyeIsAPeerFailureNamingIt() {
        // gloo.goodbye=false: a close looks like a crash to the others (connections just end)
        ThreadRanks.run(3, Map.of(GlooBackend.GOODBYE_OPTION, "false"), Duration.ofSeconds(60), (b, rank) -> {
            b.barrier(d(10_000));
            if (rank == 1) {
                b.close();
                return;
            }
            long start = System.nanoTime();
            CommException e = assertThrows(CommException.class, () -> {
                b.barrier(d(20_000));
                b.barrier(d(20_000));
            });
            assertTrue(elapsedMillis(start) < 10_000, "failed promptly: " + elapsedMillis(start) + " ms");
            assertInstanceOf(PeerFailureException.class, e, e.toString());
            int peer = ((PeerFailureException) e).peerRank();
            assertTrue(peer == 1 || peer == 2 - rank, "peer rank " + peer + " in " + e.getMessage() + " " + b.deviceNames());
        });
    }

    @Test
    void closeFromAnotherThreadUnblocksACallInProgress() {
        CountDownLatch closed = new CountDownLatch(1);
        ThreadRanks.run(2, (b, rank) -> {
            if (rank == 1) {
                assertTrue(closed.await(30, TimeUnit.SECONDS));
                return;
            }
            AtomicReference<Throwable> closer = new AtomicReference<>();
            Thread t = new Thread(() -> {
                try {
                    Thread.sleep(300);
                    b.close();
                } catch (Throwable x) {
                    closer.set(x);
                }
            });
            t.start();
            long start = System.nanoTime();
            CommClosedException e = assertThrows(CommClosedException.class,
                    () -> b.recv(Tensor.allocate(DType.F32, 4), 1, 0, d(30_000)));
            assertTrue(elapsedMillis(start) < 5000, "unblocked after " + elapsedMillis(start) + " ms");
            t.join(10_000);
            assertEquals(null, closer.get());
            assertThrows(CommClosedException.class, () -> b.barrier(d(1000)));
            b.close(); // idempotent
            closed.countDown();
            assertTrue(e.getMessage().contains("closed"), e.getMessage());
        });
    }

    @Test
    void concurrentClosesAndCallsNeverCrash() {
        ThreadRanks.run(2, (b, rank) -> {
            b.barrier(d(10_000)); // both connected before either closes
            Thread[] closers = new Thread[4];
            for (int i = 0; i < closers.length; i++) {
                closers[i] = new Thread(b::close);
            }
            for (Thread t : closers) {
                t.start();
            }
            for (int i = 0; i < 50; i++) {
                try {
                    b.allReduce(Tensor.ofFloats(i), ReduceOp.SUM, d(2000));
                } catch (CommClosedException | PeerFailureException | CommTimeoutException
                         | CollectiveMismatchException expected) {
                    // any typed failure is fine; a crash or a hang is not
                }
            }
            for (Thread t : closers) {
                t.join(10_000);
            }
            assertTrue(b.isPoisoned());
        });
    }

    @Test
    void rendezvousTimesOutWhenAPeerNeverComes() {
        ThreadRanks.assumeGloo();
        InMemoryStore store = new InMemoryStore(Duration.ofSeconds(30));
        long start = System.nanoTime();
        CommTimeoutException e = assertThrows(CommTimeoutException.class, () -> GlooBackend.connect(
                ThreadRanks.context(store, 0, 2, Duration.ofMillis(800), Map.of())));
        long took = elapsedMillis(start);
        assertTrue(took >= 700 && took < 5000, "took " + took + " ms");
        assertEquals("connect", e.operation());
    }

    @Test
    void badOptionsAreRejected() {
        ThreadRanks.assumeGloo();
        InMemoryStore store = new InMemoryStore(Duration.ofSeconds(30));
        assertThrows(BackendException.class, () -> GlooBackend.connect(ThreadRanks.context(store, 0, 2,
                Duration.ofSeconds(1), Map.of(GlooBackend.DEVICES_OPTION, "0"))));
        assertThrows(BackendException.class, () -> GlooBackend.connect(ThreadRanks.context(store, 0, 2,
                Duration.ofSeconds(1), Map.of(GlooBackend.DEVICES_OPTION, "x"))));
        assertThrows(BackendException.class, () -> GlooBackend.connect(ThreadRanks.context(store, 0, 2,
                Duration.ofSeconds(1), Map.of(GlooBackend.CHECK_ARGS_OPTION, "maybe"))));
        assertThrows(BackendException.class, () -> GlooBackend.connect(ThreadRanks.context(store, 0, 2,
                Duration.ofSeconds(1), Map.of(CpuGroupOptions.DEBUG_OPTION, "loud"))));
        BackendException e = assertThrows(BackendException.class, () -> GlooBackend.connect(ThreadRanks.context(
                store, 0, 2, Duration.ofSeconds(5), Map.of(GlooBackend.IFNAME_OPTION, "nosuchif0"))));
        assertTrue(e.getMessage().contains("nosuchif0"), e.getMessage());
    }
}
