package io.jcomm.device;

import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.OpContext;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.P2POp;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.List;

/**
 * Argument checks shared by every {@link io.jcomm.api.device.DeviceCommunicator}: each one either
 * returns or throws {@link IllegalArgumentException} naming the group, rank and operation
 * ({@link OpContext#invalidArgument}), before anything is enqueued. A bad argument is a programming
 * error, never a {@link io.jcomm.api.CommException} (which would start a job's recovery). Vendors
 * implementing the SPI are encouraged to use them so that every provider rejects the same inputs
 * with the same messages (the conformance kit checks the exception type). Like the communicators,
 * every check of a pair of tensors takes the output first: {@code (ctx, output, input, ...)}.
 */
public final class DeviceArgs {

    private DeviceArgs() {
    }

    /** {@code t} is non-null and lives on {@code device}. */
    public static void requireOn(OpContext ctx, String role, Tensor t, Device device) {
        if (t == null) {
            throw ctx.invalidArgument(role + " tensor is null");
        }
        if (!t.device().equals(device)) {
            throw ctx.invalidArgument(role + " tensor " + t + " is on " + t.device()
                    + " but this communicator serves " + device);
        }
    }

    /** A device communicator needs a stream of its own device ({@code handle 0} is the default stream). */
    public static void requireStream(OpContext ctx, StreamHandle stream, Device device) {
        if (stream == null) {
            throw ctx.invalidArgument("stream is null (pass the caller's stream; StreamHandle.defaultStream(device) for the default)");
        }
        if (!stream.device().equals(device)) {
            throw ctx.invalidArgument("stream belongs to " + stream.device() + " but this communicator serves " + device);
        }
    }

    public static void requireOp(OpContext ctx, ReduceOp op) {
        if (op == null) {
            throw ctx.invalidArgument("reduce op is null");
        }
    }

    /** {@code r} is a group-local rank in {@code [0, worldSize)}. */
    public static void requireRank(OpContext ctx, String role, int r, int worldSize) {
        if (r < 0 || r >= worldSize) {
            throw ctx.invalidArgument(role + " rank " + r + " out of range [0, " + worldSize + ")");
        }
    }

    /**
     * The arguments of a {@code shrink}: the excluded ranks sorted, distinct, in range and not this rank;
     * {@code survivors} a group of the remaining ranks in which this rank has its new number; a
     * positive timeout.
     *
     * @return the excluded ranks, sorted
     */
    public static int[] shrink(OpContext ctx, List<Integer> excludedRanks, io.jcomm.api.ProcessGroup survivors,
                               java.time.Duration timeout, int rank, int worldSize) {
        if (excludedRanks == null || survivors == null || timeout == null || timeout.isNegative() || timeout.isZero()) {
            throw ctx.invalidArgument("shrink needs the excluded ranks, the survivors' group and a positive timeout");
        }
        int[] ex = new int[excludedRanks.size()];
        for (int i = 0; i < ex.length; i++) {
            Integer r = excludedRanks.get(i);
            if (r == null) {
                throw ctx.invalidArgument("excluded rank null");
            }
            requireRank(ctx, "excluded", r, worldSize);
            if (r == rank) {
                throw ctx.invalidArgument("excluded rank " + r + " is this rank: a rank that leaves does not call shrink");
            }
            ex[i] = r;
        }
        Arrays.sort(ex);
        int below = 0;
        for (int i = 0; i < ex.length; i++) {
            if (i > 0 && ex[i] == ex[i - 1]) {
                throw ctx.invalidArgument("excluded rank " + ex[i] + " given twice");
            }
            if (ex[i] < rank) {
                below++;
            }
        }
        if (survivors.size() != worldSize - ex.length || survivors.rank() != rank - below) {
            throw ctx.invalidArgument("the survivors' group (rank " + survivors.rank() + " of " + survivors.size()
                    + ") does not fit rank " + rank + " of " + worldSize + " without ranks " + Arrays.toString(ex)
                    + " (make it with ProcessGroup.shrink and the same excluded ranks)");
        }
        return ex;
    }

    /** Output and input of an all-reduce: same device, dtype and element count. */
    public static void allReduce(OpContext ctx, Tensor output, Tensor input, ReduceOp op, Device device) {
        requireOn(ctx, "input", input, device);
        requireOn(ctx, "output", output, device);
        requireOp(ctx, op);
        sameDtype(ctx, input, output);
        if (input.numel() != output.numel()) {
            throw ctx.invalidArgument("output has " + output.numel() + " elements, input " + input.numel());
        }
        if (op == ReduceOp.AVG && input.dtype() == DType.BOOL) {
            throw ctx.invalidArgument("AVG is not defined for bool tensors");
        }
    }

    /**
     * Output and input of an all-gather (or of a gather on its destination) along {@code dim}:
     * {@code output.size(dim) == worldSize * input.size(dim)}, every other size equal.
     *
     * @return the layout, with {@code dim} normalised
     */
    public static DimLayout concat(OpContext ctx, Tensor output, Tensor input, int dim, int worldSize, Device device) {
        requireOn(ctx, "input", input, device);
        requireOn(ctx, "output", output, device);
        sameDtype(ctx, input, output);
        int d = normalizeDim(ctx, input, dim);
        checkScaled(ctx, input.shape(), output.shape(), d, worldSize, "output", "input");
        return DimLayout.of(input.shape(), d, worldSize, input.dtype());
    }

    /**
     * Output and input of a reduce-scatter along {@code dim}:
     * {@code input.size(dim) == worldSize * output.size(dim)}, every other size equal.
     *
     * @return the layout of the output pieces, with {@code dim} normalised
     */
    public static DimLayout split(OpContext ctx, Tensor output, Tensor input, ReduceOp op, int dim, int worldSize,
                                  Device device) {
        requireOn(ctx, "input", input, device);
        requireOn(ctx, "output", output, device);
        requireOp(ctx, op);
        sameDtype(ctx, input, output);
        if (op == ReduceOp.AVG && input.dtype() == DType.BOOL) {
            throw ctx.invalidArgument("AVG is not defined for bool tensors");
        }
        int d = normalizeDim(ctx, output, dim);
        checkScaled(ctx, output.shape(), input.shape(), d, worldSize, "input", "output");
        return DimLayout.of(output.shape(), d, worldSize, output.dtype());
    }

    /**
     * Output and input of an equal-split all-to-all: same device and dtype, distinct tensors, equal
     * element counts divisible by {@code worldSize}.
     *
     * @return the counts, {@code worldSize} chunks of {@code input.numel() / worldSize} elements
     */
    public static long[] allToAll(OpContext ctx, Tensor output, Tensor input, int worldSize, Device device) {
        requireOn(ctx, "input", input, device);
        requireOn(ctx, "output", output, device);
        sameDtype(ctx, input, output);
        distinct(ctx, input, output);
        if (input.numel() != output.numel()) {
            throw ctx.invalidArgument("output has " + output.numel() + " elements, input " + input.numel());
        }
        if (input.numel() % worldSize != 0) {
            throw ctx.invalidArgument("input has " + input.numel() + " elements, not divisible by the world size "
                    + worldSize);
        }
        long[] counts = new long[worldSize];
        Arrays.fill(counts, input.numel() / worldSize);
        return counts;
    }

    /**
     * Output and input of an all-to-all with per-rank counts (output first, as in the
     * {@link io.jcomm.api.device.DeviceCommunicator} it checks): same device and dtype, distinct
     * tensors, one non-negative count per rank in each array, the sums equal to the element counts,
     * and what this rank sends to itself ({@code inputCounts[rank]}) equal to what it expects from
     * itself ({@code outputCounts[rank]}), the one pair of counts a rank can check alone.
     *
     * @return copies of the counts, {@code {outputCounts, inputCounts}}
     */
    public static long[][] allToAllV(OpContext ctx, Tensor output, Tensor input, long[] outputCounts,
                                      long[] inputCounts, int rank, int worldSize, Device device) {
        requireOn(ctx, "input", input, device);
        requireOn(ctx, "output", output, device);
        sameDtype(ctx, input, output);
        distinct(ctx, input, output);
        long[] in = counts(ctx, "inputCounts", inputCounts, input, "input", worldSize);
        long[] out = counts(ctx, "outputCounts", outputCounts, output, "output", worldSize);
        if (in[rank] != out[rank]) {
            throw ctx.invalidArgument("inputCounts[" + rank + "] = " + in[rank] + " elements sent to self but outputCounts["
                    + rank + "] = " + out[rank] + " expected from self");
        }
        return new long[][] {out, in};
    }

    private static void distinct(OpContext ctx, Tensor input, Tensor output) {
        if (input == output) {
            throw ctx.invalidArgument("input and output must be different tensors (no in-place all-to-all)");
        }
    }

    private static long[] counts(OpContext ctx, String what, long[] counts, Tensor t, String role, int worldSize) {
        if (counts == null || counts.length != worldSize) {
            throw ctx.invalidArgument(what + " must have one entry per rank (" + worldSize + "), got "
                    + (counts == null ? "null" : counts.length));
        }
        long[] c = counts.clone();
        long total = 0;
        for (int r = 0; r < c.length; r++) {
            if (c[r] < 0) {
                throw ctx.invalidArgument(what + "[" + r + "] is negative: " + c[r]);
            }
            total += c[r];
            if (total < 0) {
                throw ctx.invalidArgument(what + " overflow");
            }
        }
        if (total != t.numel()) {
            throw ctx.invalidArgument(what + " sum to " + total + " but " + role + " has " + t.numel() + " elements");
        }
        return c;
    }

    /** Normalises {@code dim} for {@code t}, or throws {@link IllegalArgumentException}. */
    public static int normalizeDim(OpContext ctx, Tensor t, int dim) {
        if (t.dim() == 0) {
            throw ctx.invalidArgument("cannot concatenate or split a 0-d tensor; reshape it to 1-d");
        }
        if (dim < -t.dim() || dim >= t.dim()) {
            throw ctx.invalidArgument("dimension " + dim + " out of range for " + t);
        }
        return dim < 0 ? dim + t.dim() : dim;
    }

    private static void sameDtype(OpContext ctx, Tensor a, Tensor b) {
        if (a.dtype() != b.dtype()) {
            throw ctx.invalidArgument("dtype mismatch: input " + a.dtype() + ", output " + b.dtype());
        }
    }

    private static void checkScaled(OpContext ctx, long[] piece, long[] whole, int d, int worldSize,
                                    String wholeName, String pieceName) {
        boolean ok = piece.length == whole.length;
        for (int i = 0; ok && i < piece.length; i++) {
            long want = i == d ? piece[i] * worldSize : piece[i];
            ok = whole[i] == want;
        }
        if (!ok) {
            throw ctx.invalidArgument(wholeName + " shape " + Arrays.toString(whole) + " must equal " + pieceName
                    + " shape " + Arrays.toString(piece) + " with dimension " + d + " multiplied by the world size "
                    + worldSize);
        }
    }

    /**
     * Checks a batch of point-to-point operations: every tensor on {@code device}, every peer in
     * range, and sends to self matched one to one (in order) with receives from self of the same
     * byte size, as NCCL matches them.
     *
     * @return the matched self pairs, each {@code {send tensor, receive tensor}}, in order
     */
    public static List<Tensor[]> batch(OpContext ctx, List<P2POp> ops, int rank, int worldSize, Device device) {
        if (ops == null) {
            throw ctx.invalidArgument("ops is null");
        }
        Deque<Tensor> selfSends = new ArrayDeque<>();
        for (P2POp op : ops) {
            if (op == null) {
                throw ctx.invalidArgument("null op in batch");
            }
            requireOn(ctx, op.kind() == P2POp.Kind.SEND ? "send" : "recv", op.tensor(), device);
            requireRank(ctx, "peer", op.peer(), worldSize);
            if (op.peer() == rank && op.kind() == P2POp.Kind.SEND) {
                selfSends.add(op.tensor());
            }
        }
        List<Tensor[]> pairs = new ArrayList<>();
        for (P2POp op : ops) {
            if (op.peer() == rank && op.kind() == P2POp.Kind.RECV) {
                Tensor s = selfSends.poll();
                if (s == null) {
                    throw ctx.invalidArgument("receive from self without a matching send to self in the batch");
                }
                if (s.byteSize() != op.tensor().byteSize()) {
                    throw ctx.invalidArgument("send to self of " + s.byteSize() + " bytes matched with a receive of "
                            + op.tensor().byteSize() + " bytes");
                }
                pairs.add(new Tensor[] {s, op.tensor()});
            }
        }
        if (!selfSends.isEmpty()) {
            throw ctx.invalidArgument(selfSends.size() + " send(s) to self without a matching receive in the batch");
        }
        return pairs;
    }
}
