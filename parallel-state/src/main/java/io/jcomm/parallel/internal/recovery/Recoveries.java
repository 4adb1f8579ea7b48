package io.jcomm.parallel.internal.recovery;

import io.jcomm.runtime.Backoff;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.store.Store;
import io.jcomm.parallel.internal.JobKeys;
import java.time.Duration;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.function.Supplier;

/** What the steps of the recovery protocol share: who is dead, and waiting for the members of a round. */
final class Recoveries {

    private Recoveries() {
    }

    /** Adds to {@code dead} the ranks of {@code members} that any of {@code stores} knows dead. */
    static void collectDead(List<Store> stores, List<Integer> members, Set<Integer> dead) {
        for (Store st : stores) {
            for (int d : st.deadMembers()) {
                if (members.contains(d)) {
                    dead.add(d);
                }
            }
        }
    }

    /**
     * Waits until every key of {@code done} exists. Fails at once when a member dies (declared under the next
     * generation's job id in {@code next}; under an older one in {@code watched}, where the {@code replaced} ranks
     * stay dead and do not count) or another member gave this round up, and at {@code deadline} with
     * {@code late}'s message.
     *
     * @param during what the death message says the round was doing, and what to do next
     */
    static void awaitRound(Store keys, List<String> done, JobKeys.Round round, Store next, List<Store> watched,
                           List<Integer> members, Set<Integer> replaced, String during, long deadline,
                           Supplier<String> late, OpContext ctx) {
        Backoff pause = Backoff.doubling(Duration.ofNanos(100_000), Duration.ofMillis(1));
        while (!keys.check(done)) {
            TreeSet<Integer> lost = new TreeSet<>();
            collectDead(List.of(next), members, lost);
            TreeSet<Integer> old = new TreeSet<>();
            collectDead(watched, members, old);
            old.removeAll(replaced);
            lost.addAll(old);
            if (!lost.isEmpty()) {
                throw new PeerFailureException(ctx, lost.first(), "rank(s) " + lost + " died " + during);
            }
            if (keys.check(List.of(round.abort()))) {
                throw new PeerFailureException(ctx, -1, "another member gave up this round; call it again");
            }
            if (System.nanoTime() > deadline) {
                throw new CommTimeoutException(ctx, late.get());
            }
            pause.pauseUntil(deadline);
        }
    }

    /** A short text value from the store, bounded. */
    static String text(byte[] b, int max, OpContext ctx) {
        if (b == null || b.length > max) {
            throw new ProtocolException(ctx, "store value missing or longer than " + max + " bytes");
        }
        return new String(b, StandardCharsets.UTF_8);
    }
}
