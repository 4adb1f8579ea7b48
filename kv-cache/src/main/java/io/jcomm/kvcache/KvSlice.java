package io.jcomm.kvcache;

/**
 * The part of a model's KV cache a block holds: layers {@code [layerStart, layerEnd)} and KV heads
 * {@code [headStart, headEnd)}, what one rank of a TP x PP layout keeps (its pipeline stage's layers,
 * its tensor-parallel share of the KV heads). A block of a TP2 job names half the heads; a TP1 job
 * needing all of them reads two such blocks ({@link #intersect}). Immutable.
 */
public record KvSlice(int layerStart, int layerEnd, int headStart, int headEnd) {

    /** Largest layer or head index a slice may name. */
    public static final int MAX_INDEX = 1 << 16;

    public KvSlice {
        if (layerStart < 0 || layerEnd <= layerStart || layerEnd > MAX_INDEX || headStart < 0 || headEnd <= headStart
                || headEnd > MAX_INDEX) {
            throw new IllegalArgumentException("a slice of layers [" + layerStart + ", " + layerEnd + ") and heads ["
                    + headStart + ", " + headEnd + ") (non-empty ranges within [0, " + MAX_INDEX + "])");
        }
    }

    /** The whole model: every layer and KV head. */
    public static KvSlice whole(int layers, int kvHeads) {
        return new KvSlice(0, layers, 0, kvHeads);
    }

    /**
     * What rank {@code tpRank} of {@code tpSize} at pipeline stage {@code ppRank} of {@code ppSize} holds
     * of a model of {@code layers} layers and {@code kvHeads} KV heads, split as vLLM splits them: KV heads
     * in equal contiguous ranges, layers in ranges of {@code layers / ppSize}, the last stage taking the
     * remainder.
     *
     * @throws IllegalArgumentException when {@code tpSize} does not divide {@code kvHeads} or a size is out of range
     */
    public static KvSlice ofRank(int layers, int kvHeads, int tpRank, int tpSize, int ppRank, int ppSize) {
        if (tpSize < 1 || kvHeads % tpSize != 0 || tpRank < 0 || tpRank >= tpSize || ppSize < 1 || ppSize > layers
                || ppRank < 0 || ppRank >= ppSize) {
            throw new IllegalArgumentException("no slice of rank tp " + tpRank + "/" + tpSize + ", pp " + ppRank + "/"
                    + ppSize + " for " + layers + " layers and " + kvHeads + " KV heads");
        }
        int per = kvHeads / tpSize;
        int l0 = ppRank * (layers / ppSize);
        int l1 = ppRank == ppSize - 1 ? layers : l0 + layers / ppSize;
        return new KvSlice(l0, l1, tpRank * per, (tpRank + 1) * per);
    }

    public int layers() {
        return layerEnd - layerStart;
    }

    public int heads() {
        return headEnd - headStart;
    }

    /** The overlap of two slices, or null when they share no layer or no head. */
    public KvSlice intersect(KvSlice o) {
        int l0 = Math.max(layerStart, o.layerStart);
        int l1 = Math.min(layerEnd, o.layerEnd);
        int h0 = Math.max(headStart, o.headStart);
        int h1 = Math.min(headEnd, o.headEnd);
        return l0 < l1 && h0 < h1 ? new KvSlice(l0, l1, h0, h1) : null;
    }

    /** Whether {@code o} lies within this slice. */
    public boolean contains(KvSlice o) {
        return o.layerStart >= layerStart && o.layerEnd <= layerEnd && o.headStart >= headStart && o.headEnd <= headEnd;
    }

    @Override
    public String toString() {
        return "layers [" + layerStart + ", " + layerEnd + ") heads [" + headStart + ", " + headEnd + ")";
    }
}
