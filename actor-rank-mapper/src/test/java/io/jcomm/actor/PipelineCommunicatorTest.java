package io.jcomm.actor;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.DType;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.ray.ActorId;
import io.jcomm.api.ray.Communicator;
import io.jcomm.parallel.ParallelStateOptions;
import io.jcomm.parallel.testkit.ThreadJob;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The PP adapter and the actor map with ranks as threads (logic; the multi-JVM version is in integration-tests). */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class PipelineCommunicatorTest {

    private static final Duration T = Duration.ofSeconds(30);

    private static ActorId actor(int rank) {
        return new ActorId(0xA11CE000L + rank, 0xBEEFL * (rank + 1));
    }

    private static ThreadJob job(int n) {
        return ThreadJob.start(n, ParallelStateOptions.builder().tpMessageQueue(false)
                .cpuOption("tcp.shm.ringBytes", "65536").build(), T);
    }

    @Test
    void mapsActorsAndMovesTensorsByActorRank() {
        try (ThreadJob job = job(4)) {
            List<Object> maps = job.call(ps -> {
                ps.initializeModelParallel(1, 4); // one PP group of 4: ranks 0..3
                PipelineCommunicator c = PipelineCommunicator.create(ps.pp(), actor(ps.rank()));
                c.initialize(99); // ignored: the group knows the rank
                assertTrue(c.isInitialized());
                assertEquals(ps.pp().rankInGroup(), c.selfRank());
                assertEquals(4, c.worldSize());
                assertEquals("cpu", c.transportName());
                for (int r = 0; r < 4; r++) {
                    assertEquals(r, c.rankOf(actor(r)));
                }
                ActorId stranger = ActorId.parse("0123456789abcdef0123456789abcdef");
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> c.rankOf(stranger));
                assertTrue(e.getMessage().contains("0123456789abcdef0123456789abcdef"), e.getMessage());

                // send by actor: every rank sends to the actor after it, receives from the one before
                int me = c.selfRank();
                int next = c.rankOf(actor((me + 1) % 4));
                int prev = c.rankOf(actor((me + 3) % 4));
                if (me % 2 == 0) {
                    c.send(Tensor.ofFloats(me, me + 0.5f), next);
                    assertArrayEquals(new double[] {prev, prev + 0.5}, c.recv(new long[] {2}, DType.F32, prev,
                            (s, d) -> Tensor.allocate(d, s)).toDoubleArray());
                } else {
                    assertArrayEquals(new double[] {prev, prev + 0.5}, c.recv(new long[] {2}, DType.F32, prev,
                            (s, d) -> Tensor.allocate(d, s)).toDoubleArray());
                    c.send(Tensor.ofFloats(me, me + 0.5f), next);
                }

                // collectives over the PP group
                Tensor sum = Tensor.allocate(DType.I64, 2);
                c.allReduce(sum, Tensor.ofLongs(me, 10L * me), ReduceOp.SUM);
                assertArrayEquals(new long[] {6, 60}, sum.toLongArray());
                Tensor all = Tensor.allocate(DType.I32, 4, 2);
                c.allGather(all, Tensor.ofInts(me, -me).reshape(1, 2));
                assertArrayEquals(new long[] {0, 0, 1, -1, 2, -2, 3, -3}, all.toLongArray());
                Tensor part = Tensor.allocate(DType.F64, 1);
                c.reduceScatter(part, Tensor.ofDoubles(1, 2, 3, 4), ReduceOp.MAX);
                assertEquals(me + 1, part.getDouble(0));
                return c.actorRankMap();
            }, T);
            for (Object m : maps) {
                assertEquals(maps.get(0), m); // identical on every rank
            }
            assertEquals(List.of(actor(0), actor(1), actor(2), actor(3)), ((ActorRankMap) maps.get(0)).actors());
        }
    }

    @Test
    void destroyFailsLaterAndPendingReceivesWithClosed() {
        // the ranks are threads of this JVM: rank 1 says when it has destroyed its adapter (its group
        // is busy with the pending receive, so this cannot be a barrier)
        CountDownLatch destroyed = new CountDownLatch(1);
        try (ThreadJob job = job(2)) {
            job.run(ps -> {
                ps.initializeModelParallel(1, 2);
                PipelineCommunicator c = PipelineCommunicator.create(ps.pp(), actor(ps.rank()));
                Communicator api = c;
                if (c.selfRank() == 0) {
                    // the peer destroys while its receive waits; the data then arrives
                    ps.pp().barrier();
                    assertTrue(destroyed.await(20, TimeUnit.SECONDS));
                    c.send(Tensor.ofInts(7), 1);
                    ps.pp().barrier();
                    api.destroy();
                } else {
                    AtomicReference<Throwable> got = new AtomicReference<>();
                    CountDownLatch started = new CountDownLatch(1);
                    Thread receiver = new Thread(() -> {
                        started.countDown();
                        try {
                            c.recv(new long[] {1}, DType.I32, 0, (s, d) -> Tensor.allocate(d, s));
                        } catch (Throwable t) {
                            got.set(t);
                        }
                    });
                    ps.pp().barrier();
                    receiver.start();
                    started.await();
                    Thread.sleep(100); // most likely inside recv by now; a recv that starts later fails the same way
                    api.destroy();
                    destroyed.countDown();
                    receiver.join(20_000);
                    assertFalse(receiver.isAlive());
                    assertInstanceOf(CommClosedException.class, got.get());
                    ps.pp().barrier();
                }
                // later calls fail at once, the PP group itself still works
                assertThrows(CommClosedException.class, () -> c.send(Tensor.ofInts(1), 1 - c.group().rankInGroup()));
                assertThrows(CommClosedException.class, () -> c.recv(new long[] {1}, DType.I32, 0,
                        (s, d) -> Tensor.allocate(d, s)));
                assertThrows(CommClosedException.class, () -> c.rankOf(actor(0)));
                assertEquals(2, ps.pp().allReduce(Tensor.ofInts(1)).getLong(0));
                c.destroy(); // idempotent
                assertTrue(c.isDestroyed());
            }, T);
        }
    }

    @Test
    void groupOfOneAndMapErrors() {
        try (ThreadJob job = job(1)) {
            job.run(ps -> {
                ps.initializeModelParallel(1, 1);
                PipelineCommunicator c = PipelineCommunicator.create(ps.pp(), actor(5));
                assertEquals(0, c.rankOf(actor(5)));
                assertEquals(List.of(actor(5)), c.actorHandles());
                Tensor out = Tensor.allocate(DType.F32, 2);
                c.allReduce(out, Tensor.ofFloats(1, 2), ReduceOp.SUM);
                assertArrayEquals(new double[] {1, 2}, out.toDoubleArray());
                assertEquals("cpu", c.transportName());
            }, T);
        }
        assertThrows(IllegalArgumentException.class, () -> ActorRankMap.of("pp:0", List.of(actor(1), actor(1))));
        byte[] gathered = new byte[64];
        System.arraycopy(actor(0).toAsciiBytes(), 0, gathered, 0, 32);
        System.arraycopy(actor(1).toAsciiBytes(), 0, gathered, 32, 32);
        assertEquals(List.of(actor(0), actor(1)), ActorRankMap.fromGathered("pp:0", gathered, 2).actors());
        assertThrows(ProtocolException.class, () -> ActorRankMap.fromGathered("pp:0", gathered, 3));
        gathered[40] = 'z';
        ProtocolException e = assertThrows(ProtocolException.class, () -> ActorRankMap.fromGathered("pp:0", gathered, 2));
        assertTrue(e.getMessage().contains("rank 1"), e.getMessage());
    }
}
