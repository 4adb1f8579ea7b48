package io.jcomm.parallel.internal.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.api.store.Store;
import io.jcomm.parallel.HostTopology;
import io.jcomm.parallel.RankLayout;
import io.jcomm.parallel.Recovery;
import io.jcomm.parallel.internal.JobKeys;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The recovery protocol in-process, through an {@link InMemoryStore} that tracks members (a member killed there is
 * dead to the others, as a process whose store connection ended without a goodbye), each race driven to happen
 * at a chosen point: a death during the roll call, a rank that neither answers nor dies until after the grace,
 * a replacement that dies while it joins. The state's groups are stood in for by {@link Formed}, which records
 * the generations the protocol asked for.
 */
@Timeout(value = 60)
class RecoveryRoundTest {

    private static final String JOB = "job";
    private static final String PREFIX = "t";
    private static final Duration TIMEOUT = Duration.ofSeconds(20);
    private final InMemoryStore store = new InMemoryStore(TIMEOUT);
    private final ExecutorService pool = Executors.newCachedThreadPool();

    @AfterEach
    void stop() {
        pool.shutdownNow();
        store.close();
    }

    /** The generations a rank's round asked its state to form. */
    static final class Formed implements RecoveryRound.Generations {
        final List<String> formed = Collections.synchronizedList(new ArrayList<>());
        volatile int stopped;

        @Override
        public void stopGroups() {
            stopped++;
        }

        @Override
        public void form(Store next, int round, RankLayout after, List<Integer> replaced, HostTopology topology) {
            formed.add("round " + round + " " + after.ranks() + " replaced " + replaced);
        }
    }

    private static RecoveryRound.Context context(int rank, Duration grace) {
        return new RecoveryRound.Context(rank, JOB, PREFIX, grace, 1, 0x5eedL);
    }

    private static HostTopology oneHost(int n) {
        List<String> hosts = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            hosts.add("h");
        }
        return HostTopology.of(hosts);
    }

    private Future<Recovery> round(int rank, boolean replace, int round, RankLayout before, Store current, Duration grace,
                                   Formed f) {
        return pool.submit(() -> RecoveryRound.run(context(rank, grace), replace, round, before, oneHost(before.ranks().size()),
                current, TIMEOUT, f));
    }

    /** A replacement, as {@code config}, that takes a vacancy and agrees with the survivors as the state does. */
    private Future<Joining.Claim> joinAndAgree(DistributedConfig config, Duration grace) {
        return pool.submit(() -> Joining.run(config, store, PREFIX, null, claim -> {
            RecoveryRound.agree(context(claim.rank(), grace), claim.next(), List.of(), claim.keys(),
                    claim.vacancy().layout(), new java.util.TreeSet<>(claim.vacancy().lost()), claim.vacancy().lost(),
                    System.nanoTime() + TIMEOUT.toNanos(), TIMEOUT, io.jcomm.api.OpContext.of("recovery", claim.rank(),
                            "join"));
            return claim;
        }));
    }

    private void awaitKey(String key) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (!store.check(List.of(PREFIX + "/" + key))) {
            assertTrue(System.nanoTime() < end, "no " + key);
            Thread.sleep(5);
        }
    }

    private static Recovery get(Future<Recovery> f) throws Exception {
        return f.get(30, TimeUnit.SECONDS);
    }

    @Test
    void aDeathDuringTheRollCallIsCountedWithTheFirst() throws Exception {
        // three replicas of one rank; rank 2 died, rank 0 starts the roll call, then rank 1 dies before answering
        RankLayout before = RankLayout.of(3, 1, 1, 3);
        Store[] m = {store.withMember(JOB, 0), store.withMember(JOB, 1), store.withMember(JOB, 2)};
        store.killMember(JOB, 2);
        Formed f0 = new Formed();
        Future<Recovery> r0 = round(0, false, 1, before, m[0], Duration.ofSeconds(10), f0);
        awaitKey(JobKeys.recovery(1).round(1).alive(0));
        Thread.sleep(50);
        assertFalse(r0.isDone(), "the roll call must wait for rank 1, which is neither dead nor answered yet");
        store.killMember(JOB, 1);
        Recovery r = get(r0);
        assertEquals(List.of(1, 2), r.lostRanks());
        assertEquals(List.of(1, 2), r.lostReplicas());
        assertEquals(List.of(0), r.survivors());
        assertTrue(r.member());
        assertEquals(List.of("round 1 [0] replaced []"), f0.formed);
        assertEquals(1, f0.stopped);
    }

    @Test
    void aRankSilentPastTheGraceIsLostAndFindsOutWhenItComes() throws Exception {
        // two replicas of TP2: rank 3 died, rank 1 is stopped (no answer, no death) until after the grace
        RankLayout before = RankLayout.of(4, 2, 1, 2);
        Store[] m = new Store[4];
        for (int r = 0; r < 4; r++) {
            m[r] = store.withMember(JOB, r);
        }
        store.killMember(JOB, 3);
        Duration grace = Duration.ofMillis(300);
        Formed f0 = new Formed();
        Formed f2 = new Formed();
        Future<Recovery> r0 = round(0, false, 1, before, m[0], grace, f0);
        Future<Recovery> r2 = round(2, false, 1, before, m[2], grace, f2);
        // rank 1's silence costs its replica (0) and rank 3's death replica 1: nothing is left
        ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class, () -> get(r0));
        assertInstanceOf(io.jcomm.parallel.NoReplicaLeftException.class, e.getCause(), e.toString());
        assertThrows(r2, io.jcomm.parallel.NoReplicaLeftException.class);
        // the straggler comes back after the verdict: it is lost, whatever it says now
        Formed f1 = new Formed();
        assertThrows(round(1, false, 1, before, m[1], grace, f1), io.jcomm.parallel.NoReplicaLeftException.class);
        assertTrue(f0.formed.isEmpty() && f1.formed.isEmpty() && f2.formed.isEmpty());
    }

    @Test
    void aStragglerOfAReplaceRoundLeavesAndItsPlaceIsPosted() throws Exception {
        // TP2 x DP1, replace: rank 1 is stopped past the grace; rank 0 posts its vacancy; rank 1, back, is out
        RankLayout before = RankLayout.of(2, 2, 1, 1);
        Store m0 = store.withMember(JOB, 0);
        Store m1 = store.withMember(JOB, 1);
        Duration grace = Duration.ofMillis(200);
        Formed f0 = new Formed();
        Future<Recovery> r0 = round(0, true, 1, before, m0, grace, f0);
        awaitKey(JobKeys.recovery(1).round(1).vacancy());
        Recovery late = get(round(1, true, 1, before, m1, grace, new Formed()));
        assertFalse(late.member(), "a rank the verdict counts lost is out, even if it answers later");
        assertEquals(List.of(1), late.lostRanks());
        // a spare takes the vacancy and joins: rank 0's round goes on with it
        DistributedConfig spare = DistributedConfig.builder().rank(0).worldSize(2).hostId("h2").jobId(JOB)
                .timeout(TIMEOUT).role(DistributedConfig.Role.SPARE).build();
        Joining.Claim joined = joinAndAgree(spare, grace).get(30, TimeUnit.SECONDS);
        assertEquals("rank 1 round 1 on h2", "rank " + joined.rank() + " round " + joined.round() + " on "
                + joined.topology().hostOf(joined.rank()));
        Recovery r = get(r0);
        assertTrue(r.member());
        assertEquals(List.of(1), r.replaced());
        assertEquals(List.of("round 1 [0, 1] replaced [1]"), f0.formed);
    }

    @Test
    void aReplacementThatDiesWhileJoiningFailsTheRoundAndTheNextOneTakesAnother() throws Exception {
        RankLayout before = RankLayout.of(2, 2, 1, 1);
        Store m0 = store.withMember(JOB, 0);
        store.withMember(JOB, 1);
        store.killMember(JOB, 1);
        Formed f0 = new Formed();
        Future<Recovery> r0 = round(0, true, 1, before, m0, Duration.ofSeconds(5), f0);
        // the first spare claims the vacancy and joins, then dies before agreeing
        DistributedConfig spare = DistributedConfig.builder().rank(0).worldSize(2).hostId("h").jobId(JOB)
                .timeout(TIMEOUT).role(DistributedConfig.Role.SPARE).build();
        Future<String> first = pool.submit(() -> Joining.run(spare, store, PREFIX, null, claim -> {
            store.killMember(JOB + "/g" + claim.round(), claim.rank());
            throw new IllegalStateException("died while joining round " + claim.round());
        }));
        ExecutionException died = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class,
                () -> first.get(30, TimeUnit.SECONDS));
        assertTrue(died.getCause().getMessage().contains("died while joining round 1"), died.toString());
        ExecutionException e = org.junit.jupiter.api.Assertions.assertThrows(ExecutionException.class, () -> get(r0));
        assertInstanceOf(PeerFailureException.class, e.getCause());
        assertTrue(e.getCause().getMessage().contains("rank(s) [1] died"), e.getCause().getMessage());
        assertTrue(store.check(List.of(PREFIX + "/" + JobKeys.recovery(1).round(1).abort())), "round 1 is marked given up");
        // round 2: rank 1 is still dead; a second spare takes the new vacancy, and the round forms the generation
        Future<Recovery> r0b = round(0, true, 2, before, m0, Duration.ofSeconds(5), f0);
        Future<Joining.Claim> second = joinAndAgree(spare, Duration.ofSeconds(5));
        assertEquals("joined round 2", "joined round " + second.get(30, TimeUnit.SECONDS).round());
        Recovery r = get(r0b);
        assertEquals(2, r.round());
        assertEquals(List.of(1), r.replaced());
        assertEquals(List.of("round 2 [0, 1] replaced [1]"), f0.formed);
    }

    @Test
    void aVacancyNumberCountedButNeverWrittenDoesNotHideTheLaterOnes() throws Exception {
        // an earlier round's poster was killed between counting a vacancy and writing it: number 1 stays empty
        assertEquals(1, store.add(PREFIX + "/" + JobKeys.VACANCY_COUNT, 1));
        RankLayout before = RankLayout.of(2, 2, 1, 1);
        Store m0 = store.withMember(JOB, 0);
        store.withMember(JOB, 1);
        store.killMember(JOB, 1);
        Formed f0 = new Formed();
        Future<Recovery> r0 = round(0, true, 2, before, m0, Duration.ofSeconds(5), f0);
        // rank 1's restarted process takes its own place (vacancy 2), past the empty number 1
        DistributedConfig restarted = DistributedConfig.builder().rank(1).worldSize(2).hostId("h").jobId(JOB)
                .timeout(TIMEOUT).role(DistributedConfig.Role.RESTARTED).build();
        Joining.Claim joined = joinAndAgree(restarted, Duration.ofSeconds(5)).get(15, TimeUnit.SECONDS);
        assertEquals("rank 1 joined round 2", "rank " + joined.rank() + " joined round " + joined.round());
        assertEquals(List.of(1), get(r0).replaced());
        assertEquals(List.of("round 2 [0, 1] replaced [1]"), f0.formed);
    }

    private static void assertThrows(Future<Recovery> f, Class<? extends Throwable> type) throws InterruptedException,
            TimeoutException {
        try {
            f.get(30, TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            assertInstanceOf(type, e.getCause(), e.toString());
            return;
        }
        throw new AssertionError("expected " + type.getSimpleName());
    }
}
