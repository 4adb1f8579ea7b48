package io.jcomm.device.internal;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.Device;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.UnsupportedByBackendException;
import io.jcomm.api.device.P2POp;
import io.jcomm.device.AbstractDeviceCommunicator;
import io.jcomm.device.DeviceArgs;
import io.jcomm.device.DimLayout;
import io.jcomm.device.P2PSchedule;
import java.time.Duration;
import java.util.List;
import java.util.Objects;

/**
 * The device communicator for host ({@code cpu}) tensors: delegates to the group's CPU
 * {@link ProcessGroup} (TCP, Gloo, ...) and does in Java what the CPU collectives do not
 * (out-of-place copies, concatenation and splitting along any dimension, self send/receive inside a
 * batch). Every call completes before returning; streams are ignored.
 *
 * <p>It does not own the process group: {@link #close()} and {@link #abort()} only make this
 * communicator unusable. A failure of the CPU group (a {@link CommException}) poisons it; a local
 * argument error ({@link IllegalArgumentException}, thrown before anything is sent) does not.
 */
public final class CpuDeviceCommunicator extends AbstractDeviceCommunicator {

    /** Tag of this communicator's point-to-point messages on the CPU group (kept apart from user tags). */
    public static final int P2P_TAG = 0x4443;

    private final ProcessGroup group;
    private final Duration timeout;

    public CpuDeviceCommunicator(String providerName, ProcessGroup group, Duration timeout) {
        super(providerName, group.name(), group.rank(), group.size(), Device.CPU);
        this.group = group;
        this.timeout = Objects.requireNonNull(timeout, "timeout");
    }

    @Override
    public void allReduce(Tensor output, Tensor input, ReduceOp op, StreamHandle stream) {
        OpContext c = ctx(Op.ALL_REDUCE);
        ensureOpen(c);
        DeviceArgs.allReduce(c, output, input, op, Device.CPU);
        if (input != output) {
            output.copyFrom(input);
        }
        if (output.numel() == 0 || worldSize() == 1) {
            return;
        }
        run(() -> group.allReduce(output, op, timeout));
    }

    @Override
    public void allGather(Tensor output, Tensor input, int dim, StreamHandle stream) {
        OpContext c = ctx(Op.ALL_GATHER);
        ensureOpen(c);
        DimLayout layout = DeviceArgs.concat(c, output, input, dim, worldSize(), Device.CPU);
        if (worldSize() == 1) {
            output.copyFrom(input);
            return;
        }
        if (output.numel() == 0) {
            return;
        }
        if (layout.isRankMajor()) {
            run(() -> group.allGather(output, input, timeout));
            return;
        }
        Tensor tmp = Tensor.allocate(output.dtype(), output.numel());
        run(() -> group.allGather(tmp, input, timeout));
        layout.rankMajorToConcat(tmp.buffer(), output.buffer());
    }

    @Override
    public void reduceScatter(Tensor output, Tensor input, ReduceOp op, int dim, StreamHandle stream) {
        OpContext c = ctx(Op.REDUCE_SCATTER);
        ensureOpen(c);
        DimLayout layout = DeviceArgs.split(c, output, input, op, dim, worldSize(), Device.CPU);
        if (worldSize() == 1) {
            output.copyFrom(input);
            return;
        }
        if (output.numel() == 0) {
            return;
        }
        Tensor source = input;
        if (!layout.isRankMajor()) {
            source = Tensor.allocate(input.dtype(), input.numel());
            layout.concatToRankMajor(input.buffer(), source.buffer());
        }
        Tensor src = source;
        run(() -> group.reduceScatter(output, src, op, timeout));
    }

    @Override
    public void gather(Tensor output, Tensor input, int dst, int dim, StreamHandle stream) {
        OpContext c = ctx(Op.GATHER);
        ensureOpen(c);
        DeviceArgs.requireRank(c, "dst", dst, worldSize());
        if (rank() != dst) {
            DeviceArgs.requireOn(c, "input", input, Device.CPU);
            DeviceArgs.normalizeDim(c, input, dim);
            if (worldSize() > 1 && input.numel() > 0) {
                run(() -> group.gather(null, input, dst, timeout));
            }
            return;
        }
        DimLayout layout = DeviceArgs.concat(c, output, input, dim, worldSize(), Device.CPU);
        if (worldSize() == 1) {
            output.copyFrom(input);
            return;
        }
        if (output.numel() == 0) {
            return;
        }
        if (layout.isRankMajor()) {
            run(() -> group.gather(output, input, dst, timeout));
            return;
        }
        Tensor tmp = Tensor.allocate(output.dtype(), output.numel());
        run(() -> group.gather(tmp, input, dst, timeout));
        layout.rankMajorToConcat(tmp.buffer(), output.buffer());
    }

    @Override
    public void broadcast(Tensor tensor, int src, StreamHandle stream) {
        OpContext c = ctx(Op.BROADCAST);
        ensureOpen(c);
        DeviceArgs.requireOn(c, "tensor", tensor, Device.CPU);
        DeviceArgs.requireRank(c, "src", src, worldSize());
        if (worldSize() == 1 || tensor.numel() == 0) {
            return;
        }
        run(() -> group.broadcast(tensor, src, timeout));
    }

    @Override
    public void send(Tensor tensor, int dst, StreamHandle stream) {
        OpContext c = ctx(Op.SEND);
        ensureOpen(c);
        DeviceArgs.requireOn(c, "tensor", tensor, Device.CPU);
        checkPeer(c, "dst", dst);
        run(() -> group.send(tensor, dst, P2P_TAG, timeout));
    }

    @Override
    public void recv(Tensor tensor, int src, StreamHandle stream) {
        OpContext c = ctx(Op.RECV);
        ensureOpen(c);
        DeviceArgs.requireOn(c, "tensor", tensor, Device.CPU);
        checkPeer(c, "src", src);
        run(() -> group.recv(tensor, src, P2P_TAG, timeout));
    }

    private void checkPeer(OpContext c, String role, int peer) {
        DeviceArgs.requireRank(c, role, peer, worldSize());
        if (peer == rank()) {
            throw c.invalidArgument(role + " is this rank; a send to self needs a matching receive in one batchP2P call");
        }
    }

    @Override
    public void batchP2P(List<P2POp> ops, StreamHandle stream) {
        OpContext c = ctx(Op.BATCH_P2P);
        ensureOpen(c);
        List<Tensor[]> selfPairs = DeviceArgs.batch(c, ops, rank(), worldSize(), Device.CPU);
        for (Tensor[] pair : selfPairs) {
            pair[1].copyFrom(pair[0]);
        }
        run(() -> {
            for (P2POp op : P2PSchedule.order(ops, rank())) {
                if (op.kind() == P2POp.Kind.SEND) {
                    group.send(op.tensor(), op.peer(), P2P_TAG, timeout);
                } else {
                    group.recv(op.tensor(), op.peer(), P2P_TAG, timeout);
                }
            }
        });
    }

    /**
     * The CPU group's {@link ProcessGroup#allToAll}; a group whose backend lacks it (refused before
     * anything was sent) gets the {@code batchP2P} form instead.
     */
    @Override
    public void allToAll(Tensor output, Tensor input, StreamHandle stream) {
        OpContext c = ctx(Op.ALL_TO_ALL);
        ensureOpen(c);
        DeviceArgs.allToAll(c, output, input, worldSize(), Device.CPU);
        if (worldSize() == 1) {
            output.copyFrom(input);
            return;
        }
        if (input.numel() == 0) {
            return;
        }
        if (!delegate(() -> group.allToAll(output, input, timeout))) {
            super.allToAll(output, input, stream);
        }
    }

    /** The CPU group's {@link ProcessGroup#allToAllV} (the same order: output first); see {@link #allToAll}. */
    @Override
    public void allToAllV(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts, StreamHandle stream) {
        OpContext c = ctx(Op.ALL_TO_ALL_V);
        ensureOpen(c);
        long[][] counts = DeviceArgs.allToAllV(c, output, input, outputCounts, inputCounts, rank(), worldSize(), Device.CPU);
        if (worldSize() == 1) {
            output.copyFrom(input);
            return;
        }
        if (!delegate(() -> group.allToAllV(output, input, counts[0], counts[1], timeout))) {
            super.allToAllV(output, input, counts[0], counts[1], stream);
        }
    }

    /** Runs {@code call} like {@link #run}; false if the group's backend refused the operation. */
    private boolean delegate(Runnable call) {
        try {
            call.run();
            return true;
        } catch (UnsupportedByBackendException e) {
            return false;
        } catch (CommException e) {
            poison(e);
            throw e;
        }
    }

    @Override
    public void synchronize(StreamHandle stream) {
        ensureOpen(ctx(Op.SYNCHRONIZE));
        // host collectives complete before they return
    }

    @Override
    public void abort() {
        poison(new CommClosedException(ctx(Op.ABORT), "aborted"));
    }

    /** A communicator over the survivors' group (nothing to bootstrap: the group is connected). */
    @Override
    protected io.jcomm.api.device.DeviceCommunicator recreate(ProcessGroup survivors, io.jcomm.api.Deadline deadline) {
        return new CpuDeviceCommunicator(name(), survivors, timeout);
    }

    @Override
    public void close() {
        poison(new CommClosedException(ctx(Op.CLOSE), "closed"));
    }

    private void run(Runnable call) {
        try {
            call.run();
        } catch (CommException e) {
            poison(e);
            throw e;
        }
    }
}
