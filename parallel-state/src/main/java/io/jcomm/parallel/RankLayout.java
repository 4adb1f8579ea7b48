package io.jcomm.parallel;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;

/**
 * vLLM's rank layout for tensor (TP), pipeline (PP), data (DP) and expert (EP) parallel groups, as a
 * pure function of the sizes. Immutable.
 *
 * <p>With {@code E = world / (DP * PP * TP)} outer replicas, ranks are laid out as
 * {@code all_ranks = arange(world).reshape(E, DP, PP, TP)} — TP varies fastest — and:
 * <ul>
 *   <li>TP groups are the rows of {@code all_ranks.reshape(-1, TP)};</li>
 *   <li>PP groups are the rows of {@code all_ranks.transpose(2, 3).reshape(-1, PP)};</li>
 *   <li>DP groups are the rows of {@code all_ranks.transpose(1, 3).reshape(-1, DP)};</li>
 *   <li>EP groups are the rows of {@code all_ranks.transpose(1, 2).reshape(-1, DP * TP)}
 *       (an EP group spans DP x TP for one PP stage).</li>
 * </ul>
 * Worked example, world 8 with DP=2, PP=2, TP=2: TP {@code [[0,1],[2,3],[4,5],[6,7]]}, PP
 * {@code [[0,2],[1,3],[4,6],[5,7]]}, DP {@code [[0,4],[2,6],[1,5],[3,7]]}, EP
 * {@code [[0,1,4,5],[2,3,6,7]]}.
 */
public final class RankLayout {

    private final int worldSize;
    private final int tp;
    private final int pp;
    private final int dp;
    private final int outer;
    private final List<List<Integer>> tpGroups;
    private final List<List<Integer>> ppGroups;
    private final List<List<Integer>> dpGroups;
    private final List<List<Integer>> epGroups;

    private RankLayout(int worldSize, int tp, int pp, int dp) {
        this.worldSize = worldSize;
        this.tp = tp;
        this.pp = pp;
        this.dp = dp;
        this.outer = worldSize / (tp * pp * dp);
        this.tpGroups = build(Kind.TP);
        this.ppGroups = build(Kind.PP);
        this.dpGroups = build(Kind.DP);
        this.epGroups = build(Kind.EP);
    }

    /**
     * Computes the layout.
     *
     * @throws IllegalArgumentException unless every size is positive and {@code tp * pp * dp}
     *                                  divides {@code worldSize}
     */
    public static RankLayout of(int worldSize, int tp, int pp, int dp) {
        if (worldSize < 1 || tp < 1 || pp < 1 || dp < 1) {
            throw new IllegalArgumentException("sizes must be positive: world=" + worldSize + " tp=" + tp
                    + " pp=" + pp + " dp=" + dp);
        }
        long product = (long) tp * pp * dp;
        if (worldSize % product != 0) {
            throw new IllegalArgumentException("world size " + worldSize + " is not divisible by tp*pp*dp = "
                    + tp + "*" + pp + "*" + dp + " = " + product);
        }
        return new RankLayout(worldSize, tp, pp, dp);
    }

    private enum Kind { TP, PP, DP, EP }

    private int rank(int e, int d, int p, int t) {
        return ((e * dp + d) * pp + p) * tp + t;
    }

    private List<List<Integer>> build(Kind kind) {
        List<List<Integer>> groups = new ArrayList<>();
        for (int e = 0; e < outer; e++) {
            switch (kind) {
                case TP:
                    for (int d = 0; d < dp; d++) {
                        for (int p = 0; p < pp; p++) {
                            List<Integer> g = new ArrayList<>(tp);
                            for (int t = 0; t < tp; t++) {
                                g.add(rank(e, d, p, t));
                            }
                            groups.add(Collections.unmodifiableList(g));
                        }
                    }
                    break;
                case PP:
                    for (int d = 0; d < dp; d++) {
                        for (int t = 0; t < tp; t++) {
                            List<Integer> g = new ArrayList<>(pp);
                            for (int p = 0; p < pp; p++) {
                                g.add(rank(e, d, p, t));
                            }
                            groups.add(Collections.unmodifiableList(g));
                        }
                    }
                    break;
                case DP:
                    for (int t = 0; t < tp; t++) {
                        for (int p = 0; p < pp; p++) {
                            List<Integer> g = new ArrayList<>(dp);
                            for (int d = 0; d < dp; d++) {
                                g.add(rank(e, d, p, t));
                            }
                            groups.add(Collections.unmodifiableList(g));
                        }
                    }
                    break;
                case EP:
                    for (int p = 0; p < pp; p++) {
                        List<Integer> g = new ArrayList<>(dp * tp);
                        for (int d = 0; d < dp; d++) {
                            for (int t = 0; t < tp; t++) {
                                g.add(rank(e, d, p, t));
                            }
                        }
                        groups.add(Collections.unmodifiableList(g));
                    }
                    break;
                default:
                    throw new IllegalStateException(kind.name());
            }
        }
        return Collections.unmodifiableList(groups);
    }

    public int worldSize() {
        return worldSize;
    }

    public int tensorParallelSize() {
        return tp;
    }

    public int pipelineParallelSize() {
        return pp;
    }

    public int dataParallelSize() {
        return dp;
    }

    /** Size of an expert-parallel group ({@code DP * TP}). */
    public int expertParallelSize() {
        return dp * tp;
    }

    public List<List<Integer>> tpGroups() {
        return tpGroups;
    }

    public List<List<Integer>> ppGroups() {
        return ppGroups;
    }

    public List<List<Integer>> dpGroups() {
        return dpGroups;
    }

    public List<List<Integer>> epGroups() {
        return epGroups;
    }

    /** Index of the group in {@code groups} that contains {@code rank}. */
    public static int indexOf(List<List<Integer>> groups, int rank) {
        for (int i = 0; i < groups.size(); i++) {
            if (groups.get(i).contains(rank)) {
                return i;
            }
        }
        throw new IllegalArgumentException("rank " + rank + " is in no group");
    }

    @Override
    public String toString() {
        return "RankLayout{world=" + worldSize + ", tp=" + tp + ", pp=" + pp + ", dp=" + dp + ", TP=" + tpGroups
                + ", PP=" + ppGroups + ", DP=" + dpGroups + ", EP=" + epGroups + "}";
    }
}
