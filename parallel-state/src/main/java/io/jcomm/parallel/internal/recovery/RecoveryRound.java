package io.jcomm.parallel.internal.recovery;

import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.store.PrefixStore;
import io.jcomm.api.store.Store;
import io.jcomm.parallel.HostTopology;
import io.jcomm.parallel.NoReplicaLeftException;
import io.jcomm.parallel.RankLayout;
import io.jcomm.parallel.Recovery;
import io.jcomm.parallel.internal.JobKeys;
import io.jcomm.runtime.StoreList;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One recovery round of a surviving rank ({@code ParallelState.shrink} and {@code replace}): the whole protocol
 * through the store, with the state's group lifecycle behind {@link Generations}.
 *
 * <ol>
 *   <li>Every group of the current generation stops, so that a peer blocked with this rank fails at once and
 *       recovers too.</li>
 *   <li>{@link RollCall}, through the current generation's store client: every member of the generation is
 *       declared there (and only there: a rank replaced earlier stays dead under the older job ids).</li>
 *   <li>Shrink: the data-parallel replicas that lost a rank leave ({@link JobKeys.Recovery#left}); replace: the
 *       lowest living rank posts one vacancy per lost rank ({@link Vacancy}), and every survivor waits until each
 *       is taken ({@link Joining} is the other side).</li>
 *   <li>The members of the next generation open a client of it, declared under the job id
 *       {@code <job>/g<round>} (a member's death from now on fails the others' waits at once, a leaver's never
 *       does), check that they all decided alike ({@link #agree}), and the state forms the generation's
 *       groups.</li>
 * </ol>
 * A failure is thrown after the round is marked given up ({@link JobKeys.Round#abort}: the replacements waiting
 * in it learn at once); the state's next call starts the next round.
 */
public final class RecoveryRound {

    private static final Logger LOG = LoggerFactory.getLogger(RecoveryRound.class);

    private RecoveryRound() {
    }

    /** What the state does for a round: its groups' lifecycle. */
    public interface Generations {
        /** Stops every group of the current generation (their transports close; no goodbye is owed). */
        void stopGroups();

        /**
         * Destroys the current generation's groups and makes generation {@code round}'s, through {@code next}
         * (the state keeps {@code next} as its store client from now on).
         */
        void form(Store next, int round, RankLayout after, List<Integer> replaced, HostTopology topology);
    }

    /**
     * Who runs the round.
     *
     * @param rank          this rank
     * @param jobId         the job's id (the next generation's clients are declared under {@code <job>/g<round>})
     * @param storePrefix   the prefix of the job's keys
     * @param rollCallGrace how long a rank that neither answers nor dies is waited for
     * @param incarnation   this start of the job on the store ({@link JobKeys})
     * @param jobNonce      the job's nonce (a replacement needs it)
     */
    public record Context(int rank, String jobId, String storePrefix, Duration rollCallGrace, long incarnation,
                          long jobNonce) {
    }

    /**
     * Runs round {@code round} for this rank.
     *
     * @param replace  the policy: replace (true) or shrink
     * @param before   the current generation's layout
     * @param topology every configured rank's host
     * @param current  the current generation's store client
     * @return the recovery (for a rank that leaves: {@link Recovery#member()} false, and no group was formed)
     */
    public static Recovery run(Context c, boolean replace, int round, RankLayout before, HostTopology topology,
                               Store current, Duration timeout, Generations g) {
        long t0 = System.nanoTime();
        long deadline = t0 + timeout.toNanos();
        OpContext ctx = OpContext.of("recovery", c.rank(), (replace ? "replace#" : "shrink#") + round);
        g.stopGroups();
        JobKeys.Recovery rec = JobKeys.recovery(c.incarnation());
        JobKeys.Round rk = rec.round(round);
        Store keys = new PrefixStore(c.storePrefix(), current);
        List<Store> watched = List.of(current);
        RollCall rc = RollCall.run(keys, watched, before.ranks(), rec, round, c.rank(), c.rollCallGrace(), deadline,
                timeout, ctx);
        TreeSet<Integer> dead = rc.dead();
        List<Integer> lostReplicas = new ArrayList<>();
        RankLayout after;
        if (replace) {
            after = before;
            if (dead.contains(c.rank())) {
                // this rank answered too late: the others count it lost and give its place to another process (no
                // "left" mark: the rank stays a member, served by its replacement)
                LOG.warn("rank {}: counted lost by the roll call of round {}; it leaves the job", c.rank(), round);
                return new Recovery(round, new ArrayList<>(dead), lostReplicas, before.ranks(), false, before,
                        Duration.ofNanos(System.nanoTime() - t0), List.of());
            }
            if (!dead.isEmpty() && rc.alive().first() == c.rank()) {
                postVacancies(keys, c, round, before, topology, dead);
            }
        } else {
            // the replicas that lost a rank leave (a rank gone before went with a replica that lost one)
            TreeSet<Integer> lost = new TreeSet<>();
            for (int d : dead) {
                lost.add(before.replicaOf(d));
            }
            for (int gone : rc.gone()) {
                lost.add(before.replicaOf(gone));
            }
            lostReplicas.addAll(lost);
            if (lost.size() == before.dataParallelSize()) {
                throw new NoReplicaLeftException(ctx, dead.isEmpty() ? -1 : dead.first(), "every data-parallel replica "
                        + "lost a rank (dead: " + dead + ", gone before: " + rc.gone() + "): nothing to go on with");
            }
            after = before.withoutReplicas(lost);
            if (!after.ranks().contains(c.rank())) {
                keys.set(rec.left(c.rank()), new byte[] {1});
                LOG.info("rank {}: its replica {} lost rank(s) {}; it leaves the job (round {})", c.rank(),
                        before.replicaOf(c.rank()), dead, round);
                return new Recovery(round, new ArrayList<>(dead), lostReplicas, after.ranks(), false, after,
                        Duration.ofNanos(System.nanoTime() - t0), List.of());
            }
        }
        Store next = current.withMember(c.jobId() + "/g" + round, c.rank());
        boolean formed = false;
        try {
            HostTopology hosts = topology;
            if (replace && !dead.isEmpty()) {
                awaitReplacements(keys, next, watched, rk, before.ranks(), dead, deadline, timeout, ctx);
                hosts = withReplacementHosts(topology, keys, rk, dead, timeout, ctx);
            }
            List<Integer> replaced = replace ? new ArrayList<>(dead) : List.of();
            agree(c, next, watched, rk, after, dead, replaced, deadline, timeout, ctx);
            g.form(next, round, after, replaced, hosts);
            formed = true;
            Recovery r = new Recovery(round, new ArrayList<>(dead), lostReplicas, after.ranks(), true, after,
                    Duration.ofNanos(System.nanoTime() - t0), replaced);
            LOG.info("rank {}: round {}: ranks {} lost{}; {} ranks re-formed in {} ms", c.rank(), round, dead,
                    replace ? ", replaced" : " with replica(s) " + lostReplicas, after.ranks().size(), r.took().toMillis());
            return r;
        } catch (RuntimeException e) {
            // the replacements waiting in this round learn at once that it failed
            keys.set(rk.abort(), new byte[] {1});
            if (!formed) {
                next.close();
            }
            throw e;
        }
    }

    /** Posts one vacancy per dead rank, with what a replacement needs to join ({@link Vacancy}). */
    static void postVacancies(Store keys, Context c, int round, RankLayout before, HostTopology topology,
                              Set<Integer> dead) {
        Vacancy v = new Vacancy(round, c.incarnation(), c.jobNonce(), before.tensorParallelSize(),
                before.pipelineParallelSize(), before.ranks(), new ArrayList<>(dead), hostsOf(topology));
        keys.set(JobKeys.recovery(c.incarnation()).round(round).vacancy(), v.encode());
        keys.set(JobKeys.VACANCY_ROUND, Integer.toString(round).getBytes(StandardCharsets.UTF_8));
        StoreList vacancies = JobKeys.vacancies(keys);
        for (int d : dead) {
            vacancies.append((c.incarnation() + " " + round + " " + d).getBytes(StandardCharsets.UTF_8));
        }
    }

    /** Waits until every vacancy of this round is taken; a death of a member or of a replacement fails it. */
    static void awaitReplacements(Store keys, Store next, List<Store> watched, JobKeys.Round rk, List<Integer> members,
                                  Set<Integer> dead, long deadline, Duration timeout, OpContext ctx) {
        List<String> joined = new ArrayList<>();
        dead.forEach(d -> joined.add(rk.joined(d)));
        Recoveries.awaitRound(keys, joined, rk, next, watched, members, dead,
                "while the vacancies " + dead + " were being taken; call replace again", deadline, () -> {
                    List<Integer> open = new ArrayList<>();
                    for (int d : dead) {
                        if (!keys.check(List.of(rk.joined(d)))) {
                            open.add(d);
                        }
                    }
                    return "no process took the place of rank(s) " + open + " within " + timeout.toMillis()
                            + " ms (replacements come from commrun --spares or --max-restarts)";
                }, ctx);
    }

    /** The topology with the hosts the replacements of {@code replaced} said they are on. */
    static HostTopology withReplacementHosts(HostTopology t, Store keys, JobKeys.Round rk, Set<Integer> replaced,
                                             Duration timeout, OpContext ctx) {
        List<String> before = hostsOf(t);
        List<String> hosts = new ArrayList<>(before);
        for (int d : replaced) {
            byte[] h = keys.get(rk.host(d), timeout);
            if (h.length == 0 || h.length > JobKeys.MAX_HOST_ID_BYTES) {
                throw new ProtocolException(ctx, "the host id of rank " + d + "'s replacement is empty or too long");
            }
            hosts.set(d, new String(h, StandardCharsets.UTF_8));
        }
        return hosts.equals(before) ? t : HostTopology.of(hosts);
    }

    /** Every configured rank's host id, by global rank. */
    static List<String> hostsOf(HostTopology t) {
        List<String> hosts = new ArrayList<>();
        for (int r = 0; r < t.worldSize(); r++) {
            hosts.add(t.hostOf(r));
        }
        return hosts;
    }

    /**
     * The members of the next generation agree on it: each publishes its decision (the members, the lost and the
     * replaced ranks) through {@code next}, the next generation's client, and checks every other's. A death of a
     * member (or of a replacement) fails it at once.
     *
     * @throws CollectiveMismatchException when a member decided otherwise
     */
    public static void agree(Context c, Store next, List<Store> watched, JobKeys.Round rk, RankLayout after,
                             Set<Integer> dead, List<Integer> replaced, long deadline, Duration timeout, OpContext ctx) {
        List<Integer> members = after.ranks();
        Store nextKeys = new PrefixStore(c.storePrefix(), next);
        byte[] decision = (members + " lost " + dead + (replaced.isEmpty() ? "" : " replaced " + replaced))
                .getBytes(StandardCharsets.UTF_8);
        nextKeys.set(rk.decision(c.rank()), decision);
        List<String> theirs = new ArrayList<>();
        members.forEach(r -> theirs.add(rk.decision(r)));
        Recoveries.awaitRound(nextKeys, theirs, rk, next, watched, members, new HashSet<>(replaced),
                "during the recovery; call it again", deadline,
                () -> "the members " + members + " did not all decide within " + timeout.toMillis() + " ms", ctx);
        List<byte[]> got = nextKeys.multiGet(theirs, Duration.ofNanos(Math.max(1, deadline - System.nanoTime())));
        for (int i = 0; i < members.size(); i++) {
            if (!Arrays.equals(decision, got.get(i))) {
                throw new CollectiveMismatchException(ctx, "rank " + members.get(i) + " decided "
                        + new String(got.get(i), StandardCharsets.UTF_8) + ", this rank "
                        + new String(decision, StandardCharsets.UTF_8));
            }
        }
    }
}
