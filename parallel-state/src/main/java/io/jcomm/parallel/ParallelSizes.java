package io.jcomm.parallel;

/**
 * The sizes of the model-parallel dimensions: tensor ({@code tp}), pipeline ({@code pp}) and data
 * ({@code dp}) parallel. Their product must divide the world size (the remaining factor replicates
 * the layout, as in vLLM). Immutable.
 */
public record ParallelSizes(int tp, int pp, int dp) {

    public ParallelSizes {
        if (tp < 1 || pp < 1 || dp < 1) {
            throw new IllegalArgumentException("sizes must be positive: tp=" + tp + " pp=" + pp + " dp=" + dp);
        }
    }

    public static ParallelSizes of(int tp, int pp) {
        return new ParallelSizes(tp, pp, 1);
    }

    public static ParallelSizes of(int tp, int pp, int dp) {
        return new ParallelSizes(tp, pp, dp);
    }
}
