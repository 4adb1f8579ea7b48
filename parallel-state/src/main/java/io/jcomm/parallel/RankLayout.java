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

    private RankLayout(int worldSize, int tp, int pp, int dp, List<List<Integer>> tpGroups,
                       List<List<Integer>> ppGroups, List<List<Integer>> dpGroups, List<List<Integer>> epGroups) {
        this.worldSize = worldSize;
        this.tp = tp;
        this.pp = pp;
        this.dp = dp;
        this.outer = 1;
        this.tpGroups = tpGroups;
        this.ppGroups = ppGroups;
        this.dpGroups = dpGroups;
        this.epGroups = epGroups;
    }

    /**
     * The data-parallel replica of {@code rank} (its DP index), in a layout without outer replicas
     * ({@code worldSize == tp * pp * dp}).
     */
    public int replicaOf(int rank) {
        requireNoOuter();
        // TP groups are listed replica by replica, PP stage by stage within one
        for (int g = 0; g < tpGroups.size(); g++) {
            if (tpGroups.get(g).contains(rank)) {
                return g / pp;
            }
        }
        throw new IllegalArgumentException("rank " + rank + " is not in this layout");
    }

    /** The ranks of every data-parallel replica, replica 0 first (layouts without outer replicas). */
    public List<List<Integer>> replicas() {
        requireNoOuter();
        List<List<Integer>> out = new ArrayList<>(dp);
        for (int d = 0; d < dp; d++) {
            List<Integer> r = new ArrayList<>(tp * pp);
            for (int g = d * pp; g < (d + 1) * pp; g++) {
                r.addAll(tpGroups.get(g));
            }
            out.add(Collections.unmodifiableList(r));
        }
        return Collections.unmodifiableList(out);
    }

    /**
     * This layout without the data-parallel replicas {@code lost} (their DP indices): the surviving
     * replicas keep their TP and PP groups and their global ranks; DP and EP groups span the survivors,
     * in the order of their replicas. The DP size is the number of surviving replicas.
     *
     * @throws IllegalArgumentException when no replica survives or an index is out of range
     * @throws UnsupportedOperationException for a layout with outer replicas
     */
    public RankLayout withoutReplicas(java.util.Set<Integer> lost) {
        requireNoOuter();
        List<List<Integer>> replicas = replicas();
        List<Integer> survivors = new ArrayList<>();
        int kept = 0;
        for (int d = 0; d < dp; d++) {
            if (!lost.contains(d)) {
                survivors.addAll(replicas.get(d));
                kept++;
            }
        }
        for (int d : lost) {
            if (d < 0 || d >= dp) {
                throw new IllegalArgumentException("no replica " + d + " in a layout of " + dp);
            }
        }
        if (kept == 0) {
            throw new IllegalArgumentException("no data-parallel replica survives");
        }
        return over(survivors, tp, pp);
    }

    /**
     * The layout of {@code tp * pp} ranks per replica laid over {@code ranks} (ascending) as
     * {@link #of} lays it over {@code 0..n-1}: rank {@code i} of the compact layout is {@code ranks.get(i)}.
     *
     * @throws IllegalArgumentException unless {@code tp * pp} divides the number of ranks
     */
    public static RankLayout over(List<Integer> ranks, int tp, int pp) {
        if (ranks.isEmpty() || ranks.size() % (tp * pp) != 0) {
            throw new IllegalArgumentException(ranks.size() + " ranks do not hold replicas of tp=" + tp + " pp=" + pp);
        }
        int replicas = ranks.size() / (tp * pp);
        RankLayout compact = of(ranks.size(), tp, pp, replicas);
        return new RankLayout(ranks.size(), tp, pp, replicas, mapped(compact.tpGroups, ranks),
                mapped(compact.ppGroups, ranks), mapped(compact.dpGroups, ranks), mapped(compact.epGroups, ranks));
    }

    private static List<List<Integer>> mapped(List<List<Integer>> groups, List<Integer> ranks) {
        List<List<Integer>> out = new ArrayList<>(groups.size());
        for (List<Integer> g : groups) {
            List<Integer> m = new ArrayList<>(g.size());
            for (int i : g) {
                m.add(ranks.get(i));
            }
            out.add(Collections.unmodifiableList(m));
        }
        return Collections.unmodifiableList(out);
    }

    private void requireNoOuter() {
        if (outer != 1) {
            throw new UnsupportedOperationException("a layout with " + outer + " outer replicas (world " + worldSize
                    + " > tp*pp*dp) has no single data-parallel replica per DP index");
        }
    }

    /** Every rank of this layout, ascending. */
    public List<Integer> ranks() {
        List<Integer> all = new ArrayList<>(worldSize);
        for (List<Integer> g : tpGroups) {
            all.addAll(g);
        }
        Collections.sort(all);
        return Collections.unmodifiableList(all);
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
