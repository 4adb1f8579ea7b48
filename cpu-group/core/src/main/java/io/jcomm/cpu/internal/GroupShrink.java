package io.jcomm.cpu.internal;

import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.store.PrefixStore;
import io.jcomm.api.store.Store;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * {@link ProcessGroup#shrink} of every CPU backend, once: the members that stay agree through the
 * store on the excluded ranks, then connect a group of generation {@code g + 1} in a namespace of
 * its own, nested in the old group's: {@code <old namespace>/shrink/<old incarnation>/<g + 1>}. The
 * old incarnation (what the backend counts in its namespace, {@link io.jcomm.cpu.spi.CpuBackend#incarnation()})
 * keeps the shrinks of two incarnations of one group name apart.
 *
 * <p>Agreement: each member sets {@code vote/<old rank>} to a text record
 * {@code jcomm-shrink gen=<g+1> of=<old size> excluded=[...]} and reads the records of the members
 * it expects, as they appear (a short wait on the missing ones, then a look at each), so that a
 * member that excluded other ranks is found as soon as its record is there, not at the deadline.
 * The excluded ranks are never waited for. Not thread safe: one shrink per group, on one thread.
 */
public final class GroupShrink {

    /** What makes the new group once the members agreed (the same path as a group's creation). */
    @FunctionalInterface
    public interface Connector {
        /**
         * Connects one member of the new group: collective over {@code globalRanks.size()} members, bounded by
         * {@code deadline}.
         */
        ProcessGroup connect(Store namespace, int rank, List<Integer> globalRanks, int generation, Deadline deadline);
    }

    /** The first bytes of every vote. */
    static final String MAGIC = "jcomm-shrink ";
    /** How long one wait on the missing votes lasts before the present ones are checked. */
    private static final long SLICE_NANOS = TimeUnit.MILLISECONDS.toNanos(20);

    private GroupShrink() {
    }

    /**
     * The excluded ranks of a call, checked against a group of {@code size} in which this process is
     * {@code rank}: sorted, distinct, in range, not this rank.
     *
     * @throws IllegalArgumentException otherwise (naming the group, rank and operation)
     */
    public static int[] checkExcluded(List<Integer> excludedRanks, int rank, int size, OpContext ctx) {
        if (excludedRanks == null) {
            throw ctx.invalidArgument("excludedRanks must not be null");
        }
        int[] out = new int[excludedRanks.size()];
        for (int i = 0; i < out.length; i++) {
            Integer r = excludedRanks.get(i);
            if (r == null || r < 0 || r >= size) {
                throw ctx.invalidArgument("excluded rank " + r + " out of range [0, " + size + ")");
            }
            if (r == rank) {
                throw ctx.invalidArgument("excluded rank " + r + " is this rank: a rank that leaves does not call shrink");
            }
            out[i] = r;
        }
        Arrays.sort(out);
        for (int i = 1; i < out.length; i++) {
            if (out[i] == out[i - 1]) {
                throw ctx.invalidArgument("excluded rank " + out[i] + " given twice");
            }
        }
        return out;
    }

    /** The namespace of generation {@code generation}, the successor of a group of {@code namespace} and {@code incarnation}. */
    public static Store successorNamespace(Store namespace, long incarnation, int generation) {
        return new PrefixStore("shrink/" + incarnation + "/" + generation, namespace);
    }

    /** The key of the vote of the member of old rank {@code oldRank}, in the successor's namespace. */
    public static String voteKey(int oldRank) {
        return "vote/" + oldRank;
    }

    /** The vote of a member that goes to {@code generation} from a group of {@code size} without {@code excluded}. */
    static byte[] vote(int generation, int size, int[] excluded) {
        return (MAGIC + "gen=" + generation + " of=" + size + " excluded=" + Arrays.toString(excluded))
                .getBytes(StandardCharsets.UTF_8);
    }

    /**
     * Shrinks a group whose members agreed to drop {@code excluded} (checked): agreement, then the
     * new group through {@code connector}. The caller aborted the old group already.
     *
     * @param namespace   the old group's store namespace (what its backend got)
     * @param incarnation the old backend's {@link io.jcomm.cpu.spi.CpuBackend#incarnation()}
     * @param generation  the old group's generation
     * @param rank        this member's rank in the old group
     * @param globalRanks the old group's global ranks
     */
    public static ProcessGroup shrink(Store namespace, long incarnation, int generation, int rank, List<Integer> globalRanks,
                                      int[] excluded, Connector connector, OpContext ctx, Deadline deadline) {
        int size = globalRanks.size();
        int next = generation + 1;
        List<Integer> stay = new ArrayList<>();
        List<Integer> stayGlobal = new ArrayList<>();
        for (int r = 0; r < size; r++) {
            if (Arrays.binarySearch(excluded, r) < 0) {
                stay.add(r);
                stayGlobal.add(globalRanks.get(r));
            }
        }
        Store ns = successorNamespace(namespace, incarnation, next);
        byte[] mine = vote(next, size, excluded);
        agree(ns, rank, stay, mine, next, ctx, deadline);
        return connector.connect(ns, stay.indexOf(rank), stayGlobal, next, deadline);
    }

    private static void agree(Store ns, int rank, List<Integer> stay, byte[] mine, int generation, OpContext ctx,
                              Deadline deadline) {
        ns.set(voteKey(rank), mine);
        List<Integer> pending = new ArrayList<>(stay);
        pending.remove(Integer.valueOf(rank));
        while (!pending.isEmpty()) {
            long left = deadline.remainingNanos();
            if (left <= 0) {
                throw new CommTimeoutException(ctx, "rank(s) " + pending + " did not shrink to generation " + generation
                        + " with this rank in time (they must call shrink with the same excluded ranks)");
            }
            List<String> keys = new ArrayList<>(pending.size());
            for (int r : pending) {
                keys.add(voteKey(r));
            }
            try {
                ns.wait(keys, Duration.ofNanos(Math.min(left, SLICE_NANOS)));
            } catch (CommTimeoutException e) {
                // some are missing still: check the ones that are there
            }
            for (Iterator<Integer> it = pending.iterator(); it.hasNext(); ) {
                int r = it.next();
                String key = voteKey(r);
                if (ns.check(List.of(key))) {
                    check(ns.get(key, deadline.remaining()), mine, r, generation, ctx);
                    it.remove();
                }
            }
        }
    }

    /** Checks rank {@code r}'s vote against this member's. */
    static void check(byte[] theirs, byte[] mine, int r, int generation, OpContext ctx) {
        if (Arrays.equals(theirs, mine)) {
            return;
        }
        String t = new String(theirs, StandardCharsets.UTF_8);
        String m = new String(mine, StandardCharsets.UTF_8);
        if (!t.startsWith(MAGIC)) {
            throw new ProtocolException(ctx, "the shrink record of rank " + r + " is not one (" + abbreviate(t) + ")");
        }
        String gen = "gen=" + generation + " ";
        if (!t.startsWith(MAGIC + gen)) {
            throw new ProtocolException(ctx, "the shrink record of rank " + r + " belongs to another generation ("
                    + abbreviate(t.substring(MAGIC.length())) + ") where generation " + generation
                    + " was expected: refused (a key of an earlier generation replayed?)");
        }
        throw new CollectiveMismatchException(ctx, "rank " + r + " shrinks with " + t.substring(MAGIC.length() + gen.length())
                + ", this rank with " + m.substring(MAGIC.length() + gen.length())
                + ": every member that stays must exclude the same ranks");
    }

    private static String abbreviate(String s) {
        return s.length() <= 120 ? s : s.substring(0, 120) + "...";
    }
}
