package io.jcomm.examples.llama;

/**
 * What one rank holds of a model, split the way vLLM splits a Llama:
 *
 * <ul>
 *   <li>tensor parallel ({@code tpSize}): attention heads and KV heads split in contiguous ranges (query
 *       head {@code h} uses KV head {@code h / (heads / kvHeads)}, which is then on the same rank), the
 *       MLP's intermediate dimension likewise; the vocabulary in ranges of {@link #vocabPerRank()} =
 *       {@code ceil(vocab / tp)} rows (the last range may be short; its padding gives logits that are cut
 *       off after the gather);</li>
 *   <li>pipeline parallel ({@code ppSize}): the layers in contiguous ranges of {@code layers / pp}, the
 *       last stage taking the remainder (vLLM's default partition); the embedding lives on the first
 *       stage, the final norm and the LM head on the last.</li>
 * </ul>
 *
 * <p>Immutable.
 */
public record ShardPlan(LlamaConfig config, int tpRank, int tpSize, int ppRank, int ppSize) {

    public ShardPlan {
        if (tpSize < 1 || tpRank < 0 || tpRank >= tpSize || ppSize < 1 || ppRank < 0 || ppRank >= ppSize) {
            throw new IllegalArgumentException("bad ranks: tp " + tpRank + "/" + tpSize + ", pp " + ppRank + "/" + ppSize);
        }
        if (config.heads() % tpSize != 0 || config.kvHeads() % tpSize != 0) {
            throw new IllegalArgumentException("TP " + tpSize + " must divide the attention heads (" + config.heads()
                    + ") and the KV heads (" + config.kvHeads() + "): each rank holds whole KV heads");
        }
        if (config.intermediate() % tpSize != 0) {
            throw new IllegalArgumentException("TP " + tpSize + " must divide intermediate_size " + config.intermediate());
        }
        if (config.layers() < ppSize) {
            throw new IllegalArgumentException("PP " + ppSize + " needs at least as many layers, the model has "
                    + config.layers());
        }
    }

    /** The whole model on one rank. */
    public static ShardPlan single(LlamaConfig config) {
        return new ShardPlan(config, 0, 1, 0, 1);
    }

    public boolean firstStage() {
        return ppRank == 0;
    }

    public boolean lastStage() {
        return ppRank == ppSize - 1;
    }

    /** First layer of this stage. */
    public int firstLayer() {
        return ppRank * (config.layers() / ppSize);
    }

    /** One past the last layer of this stage. */
    public int endLayer() {
        return lastStage() ? config.layers() : firstLayer() + config.layers() / ppSize;
    }

    public int localLayers() {
        return endLayer() - firstLayer();
    }

    public int localHeads() {
        return config.heads() / tpSize;
    }

    public int localKvHeads() {
        return config.kvHeads() / tpSize;
    }

    /** Floats of one position's keys (or values) on this rank: local KV heads x head dim. */
    public int kvRowFloats() {
        return localKvHeads() * config.headDim();
    }

    public int localIntermediate() {
        return config.intermediate() / tpSize;
    }

    /** Rows of the vocabulary each rank owns (the last may own fewer): {@code ceil(vocab / tp)}. */
    public int vocabPerRank() {
        return (config.vocab() + tpSize - 1) / tpSize;
    }

    /** First vocabulary row of this rank. */
    public int vocabStart() {
        return Math.min(config.vocab(), tpRank * vocabPerRank());
    }

    /** Vocabulary rows this rank owns. */
    public int vocabCount() {
        return Math.min(config.vocab(), vocabStart() + vocabPerRank()) - vocabStart();
    }

    @Override
    public String toString() {
        return "tp " + tpRank + "/" + tpSize + ", pp " + ppRank + "/" + ppSize + ": layers [" + firstLayer() + ", "
                + endLayer() + "), heads " + localHeads() + ", kv heads " + localKvHeads() + ", intermediate "
                + localIntermediate() + ", vocab [" + vocabStart() + ", " + (vocabStart() + vocabCount()) + ")";
    }
}
