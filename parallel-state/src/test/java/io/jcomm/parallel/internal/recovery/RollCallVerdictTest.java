package io.jcomm.parallel.internal.recovery;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class RollCallVerdictTest {

    private static final List<Integer> MEMBERS = List.of(0, 1, 2, 3);

    @Test
    void aRankThatAnsweredAndDiedCountsOnceAndAsLost() {
        // rank 0 answered, then died; rank 2 died; rank 1 has not answered yet: the roll call is not over
        Set<Integer> alive = Set.of(0, 3);
        Set<Integer> dead = Set.of(0, 2);
        assertFalse(RollCall.accountedFor(MEMBERS, alive, dead, Set.of()),
                "four entries but only three ranks: rank 1 must not be taken for lost");
        Set<Integer> later = Set.of(0, 1, 3);
        assertTrue(RollCall.accountedFor(MEMBERS, later, dead, Set.of()));
        assertEquals(Set.of(0, 2), RollCall.lostRanks(MEMBERS, later, dead, Set.of()));
    }

    @Test
    void silentRanksAreLostAndGoneOnesAreNot() {
        assertEquals(Set.of(1, 2), RollCall.lostRanks(MEMBERS, Set.of(0), Set.of(2), Set.of(3)));
        assertTrue(RollCall.accountedFor(MEMBERS, Set.of(0, 1), Set.of(2), Set.of(3)));
        assertEquals(Set.of(), RollCall.lostRanks(MEMBERS, Set.of(0, 1, 2, 3), Set.of(), Set.of()));
    }
}
