package io.jcomm.parallel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class RankLayoutTest {

    @Test
    void workedExampleFromVllm() {
        RankLayout l = RankLayout.of(8, 2, 2, 2);
        assertEquals(List.of(List.of(0, 1), List.of(2, 3), List.of(4, 5), List.of(6, 7)), l.tpGroups());
        assertEquals(List.of(List.of(0, 2), List.of(1, 3), List.of(4, 6), List.of(5, 7)), l.ppGroups());
        assertEquals(List.of(List.of(0, 4), List.of(2, 6), List.of(1, 5), List.of(3, 7)), l.dpGroups());
        assertEquals(List.of(List.of(0, 1, 4, 5), List.of(2, 3, 6, 7)), l.epGroups());
    }

    @Test
    void tp2pp2OnFour() {
        RankLayout l = RankLayout.of(4, 2, 2, 1);
        assertEquals(List.of(List.of(0, 1), List.of(2, 3)), l.tpGroups());
        assertEquals(List.of(List.of(0, 2), List.of(1, 3)), l.ppGroups());
        assertEquals(List.of(List.of(0), List.of(2), List.of(1), List.of(3)), l.dpGroups());
        assertEquals(List.of(List.of(0, 1), List.of(2, 3)), l.epGroups());
    }

    /**
     * An independent reference: a tiny strided-array emulation of numpy's
     * {@code arange(world).reshape(-1, DP, PP, TP).transpose(a, b).reshape(-1, n)}.
     */
    private static List<List<Integer>> reference(int world, int tp, int pp, int dp, int swapA, int swapB, int rowLen) {
        int[] shape = {world / (dp * pp * tp), dp, pp, tp};
        int[] strides = {dp * pp * tp, pp * tp, tp, 1};
        int tmp = shape[swapA];
        shape[swapA] = shape[swapB];
        shape[swapB] = tmp;
        tmp = strides[swapA];
        strides[swapA] = strides[swapB];
        strides[swapB] = tmp;
        List<Integer> flat = new ArrayList<>();
        for (int i = 0; i < shape[0]; i++) {
            for (int j = 0; j < shape[1]; j++) {
                for (int k = 0; k < shape[2]; k++) {
                    for (int m = 0; m < shape[3]; m++) {
                        flat.add(i * strides[0] + j * strides[1] + k * strides[2] + m * strides[3]);
                    }
                }
            }
        }
        List<List<Integer>> rows = new ArrayList<>();
        for (int r = 0; r < flat.size(); r += rowLen) {
            rows.add(flat.subList(r, r + rowLen));
        }
        return rows;
    }

    @Test
    void matchesTheNumpyFormulaForManyShapes() {
        int checked = 0;
        for (int tp = 1; tp <= 8; tp *= 2) {
            for (int pp = 1; pp <= 4; pp++) {
                for (int dp = 1; dp <= 4; dp++) {
                    for (int outer = 1; outer <= 3; outer++) {
                        int world = tp * pp * dp * outer;
                        RankLayout l = RankLayout.of(world, tp, pp, dp);
                        String at = "world=" + world + " tp=" + tp + " pp=" + pp + " dp=" + dp;
                        assertEquals(reference(world, tp, pp, dp, 0, 0, tp), l.tpGroups(), "TP " + at);
                        assertEquals(reference(world, tp, pp, dp, 2, 3, pp), l.ppGroups(), "PP " + at);
                        assertEquals(reference(world, tp, pp, dp, 1, 3, dp), l.dpGroups(), "DP " + at);
                        assertEquals(reference(world, tp, pp, dp, 1, 2, dp * tp), l.epGroups(), "EP " + at);
                        for (List<List<Integer>> kind : List.of(l.tpGroups(), l.ppGroups(), l.dpGroups(), l.epGroups())) {
                            Set<Integer> seen = new HashSet<>();
                            kind.forEach(seen::addAll);
                            assertEquals(world, seen.size(), "every rank in exactly one group: " + at);
                        }
                        checked++;
                    }
                }
            }
        }
        assertTrue(checked > 100);
    }

    @Test
    void rejectsBadSizes() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RankLayout.of(6, 4, 1, 1));
        assertTrue(e.getMessage().contains("not divisible"));
        assertThrows(IllegalArgumentException.class, () -> RankLayout.of(4, 0, 1, 1));
        assertEquals(1, RankLayout.indexOf(RankLayout.of(4, 2, 2, 1).ppGroups(), 3));
    }
    @Test
    void replicasAndALayoutWithoutSomeOfThem() {
        RankLayout l = RankLayout.of(12, 2, 2, 3); // replicas {0..3}, {4..7}, {8..11}
        assertEquals(List.of(List.of(0, 1, 2, 3), List.of(4, 5, 6, 7), List.of(8, 9, 10, 11)), l.replicas());
        assertEquals(0, l.replicaOf(3));
        assertEquals(1, l.replicaOf(6));
        assertEquals(2, l.replicaOf(8));
        RankLayout s = l.withoutReplicas(java.util.Set.of(1));
        assertEquals(8, s.worldSize());
        assertEquals(2, s.dataParallelSize());
        assertEquals(List.of(0, 1, 2, 3, 8, 9, 10, 11), s.ranks());
        // TP and PP groups of the survivors as they were; DP and EP groups of the survivors only
        assertEquals(List.of(List.of(0, 1), List.of(2, 3), List.of(8, 9), List.of(10, 11)), s.tpGroups());
        assertEquals(List.of(List.of(0, 2), List.of(1, 3), List.of(8, 10), List.of(9, 11)), s.ppGroups());
        assertEquals(List.of(List.of(0, 8), List.of(2, 10), List.of(1, 9), List.of(3, 11)), s.dpGroups());
        assertEquals(List.of(List.of(0, 1, 8, 9), List.of(2, 3, 10, 11)), s.epGroups());
        assertEquals(1, s.replicaOf(9), "replica indices of the new layout count the survivors");
        // shrinking again, and the errors
        RankLayout t = s.withoutReplicas(java.util.Set.of(0));
        assertEquals(List.of(8, 9, 10, 11), t.ranks());
        assertEquals(List.of(List.of(8), List.of(10), List.of(9), List.of(11)), t.dpGroups());
        assertThrows(IllegalArgumentException.class, () -> t.withoutReplicas(java.util.Set.of(0)));
        assertThrows(IllegalArgumentException.class, () -> l.withoutReplicas(java.util.Set.of(3)));
        assertThrows(IllegalArgumentException.class, () -> l.replicaOf(12));
        assertThrows(UnsupportedOperationException.class, () -> RankLayout.of(8, 2, 2, 1).replicas());
    }

    @Test
    void aLayoutLaidOverRanksIsTheCompactLayoutRenamed() {
        RankLayout full = RankLayout.of(8, 2, 1, 4);
        assertEquals(full.tpGroups(), RankLayout.over(full.ranks(), 2, 1).tpGroups());
        assertEquals(full.epGroups(), RankLayout.over(full.ranks(), 2, 1).epGroups());
        RankLayout shrunk = full.withoutReplicas(Set.of(1));
        RankLayout over = RankLayout.over(shrunk.ranks(), 2, 1);
        assertEquals(shrunk.tpGroups(), over.tpGroups());
        assertEquals(shrunk.dpGroups(), over.dpGroups());
        assertEquals(List.of(List.of(0, 4, 6), List.of(1, 5, 7)), over.dpGroups());
        assertThrows(IllegalArgumentException.class, () -> RankLayout.over(List.of(0, 1, 2), 2, 1));
    }
}
