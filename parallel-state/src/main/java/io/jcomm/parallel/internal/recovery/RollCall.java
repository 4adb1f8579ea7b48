package io.jcomm.parallel.internal.recovery;

import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.store.Store;
import io.jcomm.parallel.internal.JobKeys;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.locks.LockSupport;
import java.util.stream.Collectors;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The roll call of a recovery round: every member marks itself alive and watches the others answer, die (their
 * store connection ended without a goodbye) or turn out gone with their replica in an earlier round. The first
 * member to see every rank accounted for, or the grace pass with ranks that neither answered nor died (cut off,
 * stopped), proposes a verdict; the store keeps the first proposal (compare-and-set) and every member adopts it,
 * so that all of them go on with the same lost ranks. A member that finds itself lost in the verdict (it answered
 * too late) is out like a dead one.
 *
 * @param alive the members the verdict keeps (this one among them, unless it answered too late)
 * @param dead  the members the verdict counts lost: dead ones, and those that never answered
 * @param gone  the members that left with their replica in an earlier round
 */
public record RollCall(TreeSet<Integer> alive, TreeSet<Integer> dead, Set<Integer> gone) {

    private static final Logger LOG = LoggerFactory.getLogger(RollCall.class);

    /**
     * Runs the roll call of {@code round} for rank {@code rank}.
     *
     * @param keys    the job's keys (prefixed)
     * @param watched the stores whose dead members count ({@link Store#deadMembers()})
     * @param members the ranks of the current generation
     * @param grace   how long a rank that neither answers nor dies is waited for
     * @throws CommTimeoutException when no verdict came by {@code deadline}
     * @throws ProtocolException    when the verdict in the store is malformed
     */
    public static RollCall run(Store keys, List<Store> watched, List<Integer> members, JobKeys.Recovery rec, int round,
                               int rank, Duration grace, long deadline, Duration timeout, OpContext ctx) {
        JobKeys.Round rk = rec.round(round);
        keys.set(rk.alive(rank), new byte[] {1});
        String verdictKey = rk.verdict();
        TreeSet<Integer> dead = new TreeSet<>();
        Set<Integer> gone = new TreeSet<>();
        TreeSet<Integer> alive = new TreeSet<>();
        alive.add(rank);
        long graceEnd = System.nanoTime() + grace.toNanos();
        while (true) {
            byte[] verdict = keys.check(List.of(verdictKey)) ? keys.get(verdictKey, timeout) : null;
            if (verdict == null) {
                Recoveries.collectDead(watched, members, dead);
                for (int r : members) {
                    if (!alive.contains(r) && !dead.contains(r) && !gone.contains(r)) {
                        if (keys.check(List.of(rk.alive(r)))) {
                            alive.add(r);
                        } else if (keys.check(List.of(rec.left(r)))) {
                            gone.add(r);
                        }
                    }
                }
                boolean complete = accountedFor(members, alive, dead, gone);
                if (complete || System.nanoTime() - graceEnd > 0) {
                    TreeSet<Integer> lost = lostRanks(members, alive, dead, gone);
                    if (!complete) {
                        TreeSet<Integer> silent = new TreeSet<>(lost);
                        silent.removeAll(dead);
                        LOG.warn("rank {}: ranks {} neither answered the roll call ({}) nor died within {} ms; they "
                                + "count as lost", rank, silent, ctx.operation(), grace.toMillis());
                    }
                    verdict = keys.compareSet(verdictKey, new byte[0], encodeVerdict(lost, gone));
                }
            }
            if (verdict != null) {
                TreeSet<Integer> lost = new TreeSet<>();
                Set<Integer> out = new TreeSet<>();
                decodeVerdict(verdict, members, lost, out, ctx);
                TreeSet<Integer> in = new TreeSet<>(members);
                in.removeAll(lost);
                in.removeAll(out);
                return new RollCall(in, lost, out);
            }
            if (System.nanoTime() > deadline) {
                throw new CommTimeoutException(ctx, "no roll-call verdict within " + timeout.toMillis() + " ms");
            }
            LockSupport.parkNanos(1_000_000L);
        }
    }

    /** Whether every member answered, died or is gone (a rank that answered and died since counts once). */
    static boolean accountedFor(List<Integer> members, Set<Integer> alive, Set<Integer> dead, Set<Integer> gone) {
        for (int r : members) {
            if (!alive.contains(r) && !dead.contains(r) && !gone.contains(r)) {
                return false;
            }
        }
        return true;
    }

    /** The members a verdict counts lost: dead ones (even if they answered first), and those that never answered. */
    static TreeSet<Integer> lostRanks(List<Integer> members, Set<Integer> alive, Set<Integer> dead, Set<Integer> gone) {
        TreeSet<Integer> lost = new TreeSet<>();
        for (int r : members) {
            if (dead.contains(r) || !alive.contains(r) && !gone.contains(r)) {
                lost.add(r);
            }
        }
        return lost;
    }

    static byte[] encodeVerdict(Set<Integer> lost, Set<Integer> gone) {
        return ("lost " + join(lost) + " gone " + join(gone)).getBytes(StandardCharsets.UTF_8);
    }

    private static String join(Set<Integer> s) {
        return s.isEmpty() ? "-" : s.stream().map(String::valueOf).collect(Collectors.joining(","));
    }

    /** Parses a verdict from the store, checking that it names members only. */
    static void decodeVerdict(byte[] v, List<Integer> members, Set<Integer> lost, Set<Integer> gone, OpContext ctx) {
        String[] f = v.length > 16 * (members.size() + 4) ? new String[0]
                : new String(v, StandardCharsets.UTF_8).split(" ");
        if (f.length != 4 || !f[0].equals("lost") || !f[2].equals("gone")) {
            throw new ProtocolException(ctx, "malformed roll-call verdict");
        }
        for (int i : new int[] {1, 3}) {
            if (f[i].equals("-")) {
                continue;
            }
            for (String r : f[i].split(",")) {
                int rank;
                try {
                    rank = Integer.parseInt(r);
                } catch (NumberFormatException e) {
                    throw new ProtocolException(ctx, "malformed rank in a roll-call verdict");
                }
                if (!members.contains(rank)) {
                    throw new ProtocolException(ctx, "roll-call verdict names rank " + rank + ", not a member");
                }
                (i == 1 ? lost : gone).add(rank);
            }
        }
    }
}
