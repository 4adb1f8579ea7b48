package io.jcomm.parallel;

import java.time.Duration;
import java.util.List;

/**
 * What {@link ParallelState#shrink} or {@link ParallelState#replace} did on one rank (for a replacement
 * process: what its joining did, {@link ParallelState#joined()}).
 *
 * @param round         the recovery round (1 for the first recovery of a state, +1 per attempt)
 * @param lostRanks     the ranks that died (left the store without a goodbye), sorted
 * @param lostReplicas  the data-parallel replicas (DP indices of the layout before) that lost a rank
 * @param survivors     the ranks of the new generation, ascending (global ranks keep their numbers)
 * @param member        whether this rank is one of them; {@code false}: its replica lost a rank, this
 *                      rank is out of the job and should close its state
 * @param layout        the layout of the new generation (TP and PP groups as before, DP and EP groups of
 *                      the survivors)
 * @param took          from the call to the new generation's groups being ready on this rank
 * @param replaced      the lost ranks whose places new processes took ({@link ParallelState#replace}), sorted;
 *                      empty after a shrink
 */
public record Recovery(int round, List<Integer> lostRanks, List<Integer> lostReplicas, List<Integer> survivors,
                       boolean member, RankLayout layout, Duration took, List<Integer> replaced) {

    public Recovery {
        replaced = List.copyOf(replaced);
        lostRanks = List.copyOf(lostRanks);
        lostReplicas = List.copyOf(lostReplicas);
        survivors = List.copyOf(survivors);
    }
}
