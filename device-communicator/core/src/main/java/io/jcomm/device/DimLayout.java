package io.jcomm.device;

import io.jcomm.api.DType;
import java.nio.ByteBuffer;

/**
 * The geometry of "concatenate along a dimension" (all-gather, gather) and "split along a
 * dimension" (reduce-scatter), shared by every device communicator.
 *
 * <p>Each rank owns a <em>piece</em> of shape {@code S}; the whole tensor has shape {@code S} with
 * {@code S[dim]} multiplied by the world size. With {@code outer = S[0] * ... * S[dim-1]} and a
 * piece <em>row</em> of {@code S[dim] * S[dim+1] * ... } elements, two memory layouts of the whole
 * tensor matter:
 * <ul>
 *   <li><b>rank-major</b> {@code [world][outer][row]}: what NCCL's all-gather produces and its
 *       reduce-scatter consumes (rank r's piece is one contiguous block);</li>
 *   <li><b>concatenated</b> {@code [outer][world][row]}: the row-major tensor concatenated along
 *       {@code dim}.</li>
 * </ul>
 * They coincide when {@code outer == 1} (for example {@code dim == 0}); otherwise a communicator
 * gathers into a temporary rank-major buffer and rearranges it, or rearranges before a
 * reduce-scatter, with one strided 2-D copy per rank ({@code cudaMemcpy2DAsync} on a GPU,
 * {@link #rankMajorToConcat}/{@link #concatToRankMajor} on the host). For rank {@code r} that copy
 * is {@link #height()} rows of {@link #rowBytes()} bytes, at {@link #concatOffset(int)} with pitch
 * {@link #concatPitch()} on the concatenated side and at {@link #rankMajorOffset(int)} with pitch
 * {@link #rowBytes()} on the rank-major side.
 *
 * @param dim          the (normalised, non-negative) dimension
 * @param worldSize    number of pieces
 * @param outer        product of the piece's sizes before {@code dim}
 * @param rowElements  product of the piece's sizes from {@code dim} on
 * @param elementBytes size of one element
 */
public record DimLayout(int dim, int worldSize, long outer, long rowElements, int elementBytes) {

    public DimLayout {
        if (dim < 0 || worldSize < 1 || outer < 0 || rowElements < 0 || elementBytes < 1) {
            throw new IllegalArgumentException("bad layout dim=" + dim + " world=" + worldSize + " outer=" + outer
                    + " row=" + rowElements + " elementBytes=" + elementBytes);
        }
    }

    /**
     * The layout for pieces of shape {@code pieceShape} concatenated along {@code dim}.
     *
     * @param dim a dimension index in {@code [0, pieceShape.length)} (already normalised)
     */
    public static DimLayout of(long[] pieceShape, int dim, int worldSize, DType dtype) {
        if (dim < 0 || dim >= pieceShape.length) {
            throw new IllegalArgumentException("dimension " + dim + " out of range for a " + pieceShape.length + "-d piece");
        }
        long outer = 1;
        for (int i = 0; i < dim; i++) {
            outer = Math.multiplyExact(outer, pieceShape[i]);
        }
        long row = 1;
        for (int i = dim; i < pieceShape.length; i++) {
            row = Math.multiplyExact(row, pieceShape[i]);
        }
        return new DimLayout(dim, worldSize, outer, row, dtype.byteSize());
    }

    /** True when the rank-major and concatenated layouts are the same memory layout (no rearrangement). */
    public boolean isRankMajor() {
        return outer <= 1 || worldSize == 1;
    }

    /** Elements of one piece. */
    public long pieceElements() {
        return outer * rowElements;
    }

    /** Bytes of one piece. */
    public long pieceBytes() {
        return pieceElements() * elementBytes;
    }

    /** Bytes of the whole tensor. */
    public long totalBytes() {
        return pieceBytes() * worldSize;
    }

    /** Bytes of one piece row (the width of each 2-D copy). */
    public long rowBytes() {
        return rowElements * elementBytes;
    }

    /** Rows per piece (the height of each 2-D copy). */
    public long height() {
        return outer;
    }

    /** Byte offset of rank {@code r}'s first row in the concatenated layout. */
    public long concatOffset(int r) {
        return r * rowBytes();
    }

    /** Distance in bytes between consecutive rows of one piece in the concatenated layout. */
    public long concatPitch() {
        return worldSize * rowBytes();
    }

    /** Byte offset of rank {@code r}'s piece in the rank-major layout. */
    public long rankMajorOffset(int r) {
        return r * pieceBytes();
    }

    /**
     * Copies a rank-major host buffer into the concatenated layout. Both buffers must hold
     * {@link #totalBytes()} bytes from index 0; positions and limits are not used or changed.
     */
    public void rankMajorToConcat(ByteBuffer rankMajor, ByteBuffer concat) {
        copy(rankMajor, concat, true);
    }

    /** The inverse of {@link #rankMajorToConcat}. */
    public void concatToRankMajor(ByteBuffer concat, ByteBuffer rankMajor) {
        copy(concat, rankMajor, false);
    }

    private void copy(ByteBuffer src, ByteBuffer dst, boolean fromRankMajor) {
        long total = totalBytes();
        if (src.capacity() < total || dst.capacity() < total) {
            throw new IllegalArgumentException("buffers of " + src.capacity() + " and " + dst.capacity()
                    + " bytes for a layout of " + total + " bytes");
        }
        int row = Math.toIntExact(rowBytes());
        for (int r = 0; r < worldSize; r++) {
            long rm = rankMajorOffset(r);
            long cc = concatOffset(r);
            for (long o = 0; o < outer; o++) {
                int rmAt = Math.toIntExact(rm + o * row);
                int ccAt = Math.toIntExact(cc + o * concatPitch());
                if (fromRankMajor) {
                    dst.put(ccAt, src, rmAt, row);
                } else {
                    dst.put(rmAt, src, ccAt, row);
                }
            }
        }
    }
}
