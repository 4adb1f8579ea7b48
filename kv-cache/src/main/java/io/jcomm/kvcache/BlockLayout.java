package io.jcomm.kvcache;

import java.nio.ByteBuffer;
import java.util.zip.CRC32C;

/**
 * The bytes of one KV block: for each layer of the slice, its keys then its values, each as one run
 * per KV head of {@code blockTokens x headDim} elements ({@code [layer][K|V][head][token][dim]}, vLLM's
 * "HND" layout per block). A head's run for a layer and plane is contiguous, so a reader that needs
 * some of the heads (another tensor-parallel split) reads one range per layer, plane and head. A
 * block holding fewer tokens than the block size uses the first {@code tokens} rows of each run.
 *
 * <p>Head checksums: CRC32C over a head's runs (their first {@code tokens} rows) in the order layer,
 * then keys before values. Immutable.
 *
 * @param slice        the layers and KV heads a block holds
 * @param blockTokens  positions per block
 * @param headDim      elements of one head of one position
 * @param elementBytes bytes of one element (4 for float32)
 */
public record BlockLayout(KvSlice slice, int blockTokens, int headDim, int elementBytes) {

    public BlockLayout {
        if (blockTokens < 1 || headDim < 1 || elementBytes < 1 || (long) slice.layers() * 2 * slice.heads() * blockTokens
                * headDim * elementBytes > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a block of " + slice + " x " + blockTokens + " tokens x " + headDim
                    + " x " + elementBytes + " bytes");
        }
    }

    /** Bytes of a block. */
    public int bytes() {
        return slice.layers() * 2 * slice.heads() * runBytes();
    }

    /** Bytes of one head's run for one layer and plane (the whole block size). */
    public int runBytes() {
        return blockTokens * headDim * elementBytes;
    }

    /** Bytes of {@code tokens} rows of one head. */
    public int rowsBytes(int tokens) {
        return tokens * headDim * elementBytes;
    }

    /**
     * Offset within the block of the run of {@code head} (a model head index, within the slice) of
     * {@code plane} (0 keys, 1 values) of {@code layer} (a model layer index, within the slice).
     */
    public int runOffset(int layer, int plane, int head) {
        if (layer < slice.layerStart() || layer >= slice.layerEnd() || head < slice.headStart() || head >= slice.headEnd()
                || (plane & ~1) != 0) {
            throw new IndexOutOfBoundsException("layer " + layer + " plane " + plane + " head " + head + " of " + slice);
        }
        return (((layer - slice.layerStart()) * 2 + plane) * slice.heads() + head - slice.headStart()) * runBytes();
    }

    /** The head checksums of the block in {@code block} (from its position) holding {@code tokens} tokens. */
    public int[] headChecksums(ByteBuffer block, int tokens) {
        int[] out = new int[slice.heads()];
        for (int h = slice.headStart(); h < slice.headEnd(); h++) {
            CRC32C crc = new CRC32C();
            for (int l = slice.layerStart(); l < slice.layerEnd(); l++) {
                for (int p = 0; p < 2; p++) {
                    int o = block.position() + runOffset(l, p, h);
                    crc.update(block.duplicate().limit(o + rowsBytes(tokens)).position(o));
                }
            }
            out[h - slice.headStart()] = (int) crc.getValue();
        }
        return out;
    }
}
