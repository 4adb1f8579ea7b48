package io.jcomm.device;

import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProtocolException;
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
 * returns or throws {@link ProtocolException} naming the group, rank and operation, before anything
 * is enqueued. Vendors implementing the SPI are encouraged to use them so that every provider
 * rejects the same inputs with the same messages (the conformance kit checks the exception type).
 */
public final class DeviceArgs {

    private DeviceArgs() {
    }

    /** {@code t} is non-null and lives on {@code device}. */
    public static void requireOn(OpContext ctx, String role, Tensor t, Device device) {
        if (t == null) {
            throw new ProtocolException(ctx, role + " tensor is null");
        }
        if (!t.device().equals(device)) {
            throw new ProtocolException(ctx, role + " tensor " + t + " is on " + t.device()
                    + " but this communicator serves " + device);
        }
    }

    /** A device communicator needs a stream of its own device ({@code handle 0} is the default stream). */
    public static void requireStream(OpContext ctx, StreamHandle stream, Device device) {
        if (stream == null) {
            throw new ProtocolException(ctx, "stream is null (pass the caller's stream; StreamHandle.defaultStream(device) for the default)");
        }
        if (!stream.device().equals(device)) {
            throw new ProtocolException(ctx, "stream belongs to " + stream.device() + " but this communicator serves " + device);
        }
    }

    public static void requireOp(OpContext ctx, ReduceOp op) {
        if (op == null) {
            throw new ProtocolException(ctx, "reduce op is null");
        }
    }

    /** {@code r} is a group-local rank in {@code [0, worldSize)}. */
    public static void requireRank(OpContext ctx, String role, int r, int worldSize) {
        if (r < 0 || r >= worldSize) {
            throw new ProtocolException(ctx, role + " rank " + r + " out of range [0, " + worldSize + ")");
        }
    }

    /** Input and output of an all-reduce: same device, dtype and element count. */
    public static void allReduce(OpContext ctx, Tensor input, Tensor output, ReduceOp op, Device device) {
        requireOn(ctx, "input", input, device);
        requireOn(ctx, "output", output, device);
        requireOp(ctx, op);
        sameDtype(ctx, input, output);
        if (input.numel() != output.numel()) {
            throw new ProtocolException(ctx, "output has " + output.numel() + " elements, input " + input.numel());
        }
        if (op == ReduceOp.AVG && input.dtype() == DType.BOOL) {
            throw new ProtocolException(ctx, "AVG is not defined for bool tensors");
        }
    }

    /**
     * Input and output of an all-gather (or of a gather on its destination) along {@code dim}:
     * {@code output.size(dim) == worldSize * input.size(dim)}, every other size equal.
     *
     * @return the layout, with {@code dim} normalised
     */
    public static DimLayout concat(OpContext ctx, Tensor input, Tensor output, int dim, int worldSize, Device device) {
        requireOn(ctx, "input", input, device);
        requireOn(ctx, "output", output, device);
        sameDtype(ctx, input, output);
        int d = normalizeDim(ctx, input, dim);
        checkScaled(ctx, input.shape(), output.shape(), d, worldSize, "output", "input");
        return DimLayout.of(input.shape(), d, worldSize, input.dtype());
    }

    /**
     * Input and output of a reduce-scatter along {@code dim}:
     * {@code input.size(dim) == worldSize * output.size(dim)}, every other size equal.
     *
     * @return the layout of the output pieces, with {@code dim} normalised
     */
    public static DimLayout split(OpContext ctx, Tensor input, Tensor output, ReduceOp op, int dim, int worldSize,
                                  Device device) {
        requireOn(ctx, "input", input, device);
        requireOn(ctx, "output", output, device);
        requireOp(ctx, op);
        sameDtype(ctx, input, output);
        if (op == ReduceOp.AVG && input.dtype() == DType.BOOL) {
            throw new ProtocolException(ctx, "AVG is not defined for bool tensors");
        }
        int d = normalizeDim(ctx, output, dim);
        checkScaled(ctx, output.shape(), input.shape(), d, worldSize, "input", "output");
        return DimLayout.of(output.shape(), d, worldSize, output.dtype());
    }

    /** Normalises {@code dim} for {@code t}, or throws {@link ProtocolException}. */
    public static int normalizeDim(OpContext ctx, Tensor t, int dim) {
        if (t.dim() == 0) {
            throw new ProtocolException(ctx, "cannot concatenate or split a 0-d tensor; reshape it to 1-d");
        }
        if (dim < -t.dim() || dim >= t.dim()) {
            throw new ProtocolException(ctx, "dimension " + dim + " out of range for " + t);
        }
        return dim < 0 ? dim + t.dim() : dim;
    }

    private static void sameDtype(OpContext ctx, Tensor a, Tensor b) {
        if (a.dtype() != b.dtype()) {
            throw new ProtocolException(ctx, "dtype mismatch: input " + a.dtype() + ", output " + b.dtype());
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
            throw new ProtocolException(ctx, wholeName + " shape " + Arrays.toString(whole) + " must equal " + pieceName
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
            throw new ProtocolException(ctx, "ops is null");
        }
        Deque<Tensor> selfSends = new ArrayDeque<>();
        for (P2POp op : ops) {
            if (op == null) {
                throw new ProtocolException(ctx, "null op in batch");
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
                    throw new ProtocolException(ctx, "receive from self without a matching send to self in the batch");
                }
                if (s.byteSize() != op.tensor().byteSize()) {
                    throw new ProtocolException(ctx, "send to self of " + s.byteSize() + " bytes matched with a receive of "
                            + op.tensor().byteSize() + " bytes");
                }
                pairs.add(new Tensor[] {s, op.tensor()});
            }
        }
        if (!selfSends.isEmpty()) {
            throw new ProtocolException(ctx, selfSends.size() + " send(s) to self without a matching receive in the batch");
        }
        return pairs;
    }
}
