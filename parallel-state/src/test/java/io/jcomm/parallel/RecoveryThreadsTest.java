package io.jcomm.parallel;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.Tensor;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.api.store.Store;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A whole recovery in one JVM: four thread ranks as DP2 x TP2, each with its own {@link ParallelState} over its
 * member handle of one {@link InMemoryStore}; rank 3 dies (the store sees its member die, its state closes),
 * and the others recover: rank 2 leaves with its replica, ranks 0 and 1 re-form their groups and all-reduce
 * over them. No process is killed: the store's member liveness is what a real job's store gives.
 */
@Timeout(value = 120)
class RecoveryThreadsTest {

    private static final Duration T = Duration.ofSeconds(30);

    @Test
    void aLostRankInProcessShrinksTheJob() throws Exception {
        InMemoryStore store = new InMemoryStore(T);
        ExecutorService pool = Executors.newFixedThreadPool(4);
        List<ParallelState> states = new ArrayList<>();
        try {
            List<Future<ParallelState>> made = new ArrayList<>();
            for (int r = 0; r < 4; r++) {
                int rank = r;
                Store member = store.withMember("job", rank);
                DistributedConfig cfg = DistributedConfig.builder().rank(rank).worldSize(4).hostId("h").jobId("job")
                        .timeout(T).build();
                made.add(pool.submit(() -> ParallelState.initialize(cfg, member, ParallelStateOptions.builder()
                        .tpMessageQueue(false).rollCallGrace(Duration.ofSeconds(5)).build(), ParallelSizes.of(2, 1, 2))));
            }
            for (Future<ParallelState> f : made) {
                states.add(f.get(60, TimeUnit.SECONDS));
            }
            store.killMember("job", 3);
            states.get(3).close();
            List<Future<Recovery>> rec = new ArrayList<>();
            for (int r = 0; r < 3; r++) {
                ParallelState ps = states.get(r);
                rec.add(pool.submit(ps::recover));
            }
            Recovery r0 = rec.get(0).get(60, TimeUnit.SECONDS);
            Recovery r1 = rec.get(1).get(60, TimeUnit.SECONDS);
            Recovery r2 = rec.get(2).get(60, TimeUnit.SECONDS);
            assertEquals(List.of(3), r0.lostRanks());
            assertEquals(List.of(1), r0.lostReplicas());
            assertEquals(List.of(0, 1), r0.survivors());
            assertTrue(r0.member() && r1.member());
            assertFalse(r2.member(), "rank 2's replica lost rank 3: it leaves");
            List<Future<double[]>> sums = new ArrayList<>();
            for (int r = 0; r < 2; r++) {
                ParallelState ps = states.get(r);
                sums.add(pool.submit(() -> ps.tp().allReduce(Tensor.ofFloats(ps.rank() + 1, 10)).toDoubleArray()));
            }
            for (Future<double[]> s : sums) {
                assertArrayEquals(new double[] {3, 20}, s.get(30, TimeUnit.SECONDS));
            }
            assertEquals(2, states.get(0).world().worldSize());
            assertEquals(1, states.get(0).dp().worldSize());
        } finally {
            for (ParallelState ps : states) {
                ps.close();
            }
            pool.shutdownNow();
            store.close();
        }
    }
}
