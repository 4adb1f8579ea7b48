package io.jcomm.parallel.internal.moe;

import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.DType;
import io.jcomm.api.OpContext;
import io.jcomm.api.Tensor;
import io.jcomm.parallel.DispatchResult;
import io.jcomm.parallel.ExpertRouting;
import io.jcomm.parallel.GroupCoordinator;
import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.Objects;

/** Row copies, weighted sums and argument checks shared by the built-in managers. */
final class MoeRows {

    /** Longs of layout metadata each rank sends: token count (or count for the receiver), hidden size, dtype, experts, top-k. */
    static final int META = 5;

    private MoeRows() {
    }

    static OpContext ctx(GroupCoordinator g, String op) {
        return OpContext.of(g.name(), g.rankInGroup(), op);
    }

    /** Checks {@code hidden} against {@code routing} and returns the hidden size. */
    static int hiddenSize(Tensor hidden, ExpertRouting routing, int groupSize) {
        Objects.requireNonNull(hidden, "hidden");
        Objects.requireNonNull(routing, "routing");
        if (!hidden.isHost()) {
            throw new IllegalArgumentException("dispatch moves host tensors, got one on " + hidden.device());
        }
        if (hidden.dim() != 2) {
            throw new IllegalArgumentException("hidden must be [tokens x hidden], got " + Arrays.toString(hidden.shape()));
        }
        if (hidden.size(0) != routing.numTokens()) {
            throw new IllegalArgumentException(hidden.size(0) + " tokens but " + routing.numTokens() + " routed");
        }
        if (hidden.size(1) < 1) {
            throw new IllegalArgumentException("hidden size must be positive, got " + Arrays.toString(hidden.shape()));
        }
        routing.expertsPerRank(groupSize);
        return Math.toIntExact(hidden.size(1));
    }

    /** The metadata row this rank sends: {@code count}, hidden size, dtype, experts, top-k. */
    static long[] meta(long count, int hidden, DType dtype, ExpertRouting routing) {
        return new long[] {count, hidden, dtype.code(), routing.numExperts(), routing.topK()};
    }

    /**
     * Checks that every member's metadata row (in {@code all}, {@code META} longs per member) agrees
     * with {@code mine} apart from the count.
     */
    static void requireSame(GroupCoordinator g, String op, long[] mine, Tensor all) {
        String[] what = {"count", "hidden size", "dtype", "expert count", "top-k"};
        for (int r = 0; r < g.worldSize(); r++) {
            for (int k = 1; k < META; k++) {
                long theirs = all.getLong((long) r * META + k);
                if (theirs != mine[k]) {
                    String a = k == 2 ? DType.fromCode((int) theirs) + "" : theirs + "";
                    String b = k == 2 ? DType.fromCode((int) mine[k]) + "" : mine[k] + "";
                    throw new CollectiveMismatchException(ctx(g, op), "group rank " + r + " has " + what[k] + " " + a
                            + ", this rank " + b);
                }
            }
        }
    }

    /** Checks that {@code out} is the expert output for {@code d}'s tokens. */
    static void requireOutputFor(DispatchResult d, Tensor out) {
        Objects.requireNonNull(out, "expertOutput");
        Tensor in = d.tokens();
        if (!out.isHost() || out.dtype() != in.dtype() || !Arrays.equals(out.shape(), in.shape())) {
            throw new IllegalArgumentException("expert output " + out + " does not match the dispatched tokens " + in);
        }
    }

    /** Copies row {@code srcRow} of {@code src} into row {@code dstRow} of {@code dst} (same row size). */
    static void copyRow(Tensor dst, int dstRow, Tensor src, int srcRow, int rowBytes) {
        ByteBuffer from = src.buffer().slice(srcRow * rowBytes, rowBytes);
        dst.buffer().position(dstRow * rowBytes).put(from);
    }

    /** {@code acc += w * src[row]}. */
    static void addRow(double[] acc, Tensor src, int row, double w) {
        long base = (long) row * acc.length;
        for (int i = 0; i < acc.length; i++) {
            acc[i] += w * src.getDouble(base + i);
        }
    }

    /** {@code dst[row] = acc} (converted to {@code dst}'s dtype). */
    static void putRow(Tensor dst, int row, double[] acc) {
        long base = (long) row * acc.length;
        for (int i = 0; i < acc.length; i++) {
            dst.setDouble(base + i, acc[i]);
        }
    }

    /** {@code d} as this manager's result type; rejects a result made by another manager or for another group. */
    static <R extends MoeResult> R own(Class<R> type, String manager, GroupCoordinator g, DispatchResult d) {
        Objects.requireNonNull(d, "dispatched");
        if (!type.isInstance(d)) {
            throw new IllegalArgumentException("combine of '" + manager + "' got a dispatch result of '" + d.manager() + "'");
        }
        R r = type.cast(d);
        if (!g.name().equals(r.group)) {
            throw new IllegalArgumentException("dispatch result of group " + r.group + " combined over " + g.name());
        }
        return r;
    }
}
