package io.jcomm.parallel;

import java.util.Arrays;

/**
 * The router's decision for one rank's tokens in a mixture-of-experts layer: for every token, the
 * {@link #topK()} experts it goes to and the weight of each expert's output in the token's result.
 * Immutable (the arrays are copied in and out).
 *
 * <p>Experts are numbered globally, {@code [0, numExperts())}, and placed on the ranks of the
 * expert-parallel group in contiguous blocks: with {@code n} ranks, each holds
 * {@code numExperts / n} experts, and expert {@code e} lives on group rank
 * {@code e / (numExperts / n)} ({@link #ownerRank}). {@code numExperts} must be divisible by the
 * group size.
 */
public final class ExpertRouting {

    private final int numExperts;
    private final int topK;
    private final int[] expertIds;
    private final float[] weights;

    private ExpertRouting(int numExperts, int topK, int[] expertIds, float[] weights) {
        if (numExperts < 1) {
            throw new IllegalArgumentException("numExperts must be positive, got " + numExperts);
        }
        if (topK < 1) {
            throw new IllegalArgumentException("topK must be positive, got " + topK);
        }
        if (expertIds.length % topK != 0) {
            throw new IllegalArgumentException(expertIds.length + " expert ids are not a multiple of topK " + topK);
        }
        if (weights.length != expertIds.length) {
            throw new IllegalArgumentException(weights.length + " weights for " + expertIds.length + " expert ids");
        }
        for (int i = 0; i < expertIds.length; i++) {
            if (expertIds[i] < 0 || expertIds[i] >= numExperts) {
                throw new IllegalArgumentException("expert id " + expertIds[i] + " (token " + i / topK + ") not in [0, "
                        + numExperts + ")");
            }
            if (!Float.isFinite(weights[i])) {
                throw new IllegalArgumentException("weight " + weights[i] + " (token " + i / topK + ") is not finite");
            }
        }
        this.numExperts = numExperts;
        this.topK = topK;
        this.expertIds = expertIds;
        this.weights = weights;
    }

    /**
     * Top-k routing: token {@code t} goes to experts {@code expertIds[t * topK + j]} with weights
     * {@code weights[t * topK + j]}, {@code j < topK}.
     *
     * @throws IllegalArgumentException if an id is out of range, a weight is not finite, or the
     *         lengths do not fit
     */
    public static ExpertRouting topK(int numExperts, int topK, int[] expertIds, float[] weights) {
        return new ExpertRouting(numExperts, topK, expertIds.clone(), weights.clone());
    }

    /** Top-1 routing with weight 1: token {@code t} goes to expert {@code expertIds[t]}. */
    public static ExpertRouting top1(int numExperts, int[] expertIds) {
        float[] w = new float[expertIds.length];
        Arrays.fill(w, 1f);
        return new ExpertRouting(numExperts, 1, expertIds.clone(), w);
    }

    /** Number of experts in the layer (over all ranks). */
    public int numExperts() {
        return numExperts;
    }

    /** Experts per token. */
    public int topK() {
        return topK;
    }

    /** Number of tokens routed. */
    public int numTokens() {
        return expertIds.length / topK;
    }

    /** Expert {@code j} of token {@code t}. */
    public int expert(int t, int j) {
        return expertIds[index(t, j)];
    }

    /** Weight of expert {@code j} of token {@code t}. */
    public float weight(int t, int j) {
        return weights[index(t, j)];
    }

    /** A copy of the expert ids, token-major ({@code [numTokens * topK]}). */
    public int[] expertIds() {
        return expertIds.clone();
    }

    /** A copy of the weights, token-major ({@code [numTokens * topK]}). */
    public float[] weights() {
        return weights.clone();
    }

    /**
     * Experts per rank in a group of {@code groupSize} ranks.
     *
     * @throws IllegalArgumentException if {@link #numExperts()} is not divisible by {@code groupSize}
     */
    public int expertsPerRank(int groupSize) {
        if (groupSize < 1 || numExperts % groupSize != 0) {
            throw new IllegalArgumentException(numExperts + " experts cannot be split evenly over " + groupSize + " ranks");
        }
        return numExperts / groupSize;
    }

    /** The group rank that holds expert {@code expert} in a group of {@code groupSize} ranks. */
    public int ownerRank(int expert, int groupSize) {
        return expert / expertsPerRank(groupSize);
    }

    private int index(int t, int j) {
        if (t < 0 || t >= numTokens() || j < 0 || j >= topK) {
            throw new IndexOutOfBoundsException("token " + t + ", slot " + j + " of " + numTokens() + " x " + topK);
        }
        return t * topK + j;
    }

    @Override
    public String toString() {
        return "ExpertRouting{" + numTokens() + " tokens, top-" + topK + " of " + numExperts + " experts}";
    }
}
