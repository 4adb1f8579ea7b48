package com.example.fakeaccel;

import io.jcomm.api.BackendException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.DType;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.api.device.P2POp;
import io.jcomm.device.AbstractDeviceCommunicator;
import io.jcomm.device.DeviceArgs;
import io.jcomm.device.DimLayout;
import io.jcomm.device.P2PSchedule;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/**
 * The {@code fakeaccel} data plane. Structured like a real vendor backend (HCCL): a bootstrap in
 * which group rank 0 creates a "root info" blob that the CPU group broadcasts, then collectives.
 * Here the collectives stage device memory through host buffers and run over the CPU group; a real
 * backend would call its collective library on the caller's stream instead.
 */
final class FakeAccelCommunicator extends AbstractDeviceCommunicator {

    /** Size of the root-info blob (HCCL's {@code HcclRootInfo} is 4108 bytes; NCCL's unique id 128). */
    static final int ROOT_INFO_BYTES = 64;
    private static final int P2P_TAG = 0x4641; // "FA"

    private final ProcessGroup group;
    private final Duration timeout;
    private final FakeAccel rt = FakeAccel.runtime();
    private final byte[] rootInfo;

    private FakeAccelCommunicator(String name, DeviceCommunicatorContext ctx, byte[] rootInfo) {
        super(name, ctx.cpuGroup().name(), ctx.cpuGroup().rank(), ctx.cpuGroup().size(), ctx.device());
        this.group = ctx.cpuGroup();
        this.timeout = ctx.timeout();
        this.rootInfo = rootInfo;
    }

    /** Bootstrap: rank 0's root info goes to every rank over the CPU group; all ranks check they agree. */
    static FakeAccelCommunicator create(String name, DeviceCommunicatorContext ctx) {
        return create(name, ctx, ctx.timeout());
    }

    /** {@link #create(String, DeviceCommunicatorContext)} with the bootstrap bounded by {@code bootstrap}. */
    private static FakeAccelCommunicator create(String name, DeviceCommunicatorContext ctx, Duration bootstrap) {
        ProcessGroup g = ctx.cpuGroup();
        OpContext c = OpContext.of(g.name(), g.rank(), "init");
        Tensor info = Tensor.allocate(DType.U8, ROOT_INFO_BYTES);
        if (g.rank() == 0) {
            byte[] b = new byte[ROOT_INFO_BYTES];
            new Random().nextBytes(b);
            info.buffer().put(b);
        }
        g.broadcast(info, 0, bootstrap);
        byte[] root = info.toByteArray();
        long h = Arrays.hashCode(root);
        Tensor lo = Tensor.ofLongs(h);
        Tensor hi = Tensor.ofLongs(h);
        g.allReduce(lo, ReduceOp.MIN, bootstrap);
        g.allReduce(hi, ReduceOp.MAX, bootstrap);
        if (lo.getLong(0) != hi.getLong(0)) {
            throw new BackendException(c, "ranks disagree on the root info");
        }
        return new FakeAccelCommunicator(name, ctx, root);
    }

    /** The root info this communicator was created with (diagnostics). */
    byte[] rootInfo() {
        return rootInfo.clone();
    }

    private Tensor toHost(Tensor t) {
        Tensor h = Tensor.allocate(t.dtype(), t.shape());
        rt.copyToHost(h.buffer(), t.address());
        return h;
    }

    private void toDevice(Tensor deviceTensor, Tensor host) {
        rt.copyToDevice(deviceTensor.address(), host.buffer());
    }

    @Override
    public void allReduce(Tensor output, Tensor input, ReduceOp op, StreamHandle stream) {
        OpContext c = ctx(Op.ALL_REDUCE);
        ensureOpen(c);
        DeviceArgs.allReduce(c, output, input, op, device());
        DeviceArgs.requireStream(c, stream, device());
        if (input.numel() == 0) {
            return;
        }
        Tensor h = toHost(input);
        if (worldSize() > 1) {
            run(() -> group.allReduce(h, op, timeout));
        }
        toDevice(output, h);
    }

    @Override
    public void allGather(Tensor output, Tensor input, int dim, StreamHandle stream) {
        OpContext c = ctx(Op.ALL_GATHER);
        ensureOpen(c);
        DimLayout layout = DeviceArgs.concat(c, output, input, dim, worldSize(), device());
        DeviceArgs.requireStream(c, stream, device());
        if (output.numel() == 0) {
            return;
        }
        Tensor in = toHost(input);
        Tensor rankMajor = Tensor.allocate(output.dtype(), output.numel());
        run(() -> group.allGather(rankMajor, in, timeout));
        storeConcat(layout, rankMajor, output);
    }

    private void storeConcat(DimLayout layout, Tensor rankMajor, Tensor output) {
        if (layout.isRankMajor()) {
            toDevice(output, rankMajor);
        } else {
            Tensor concat = Tensor.allocate(output.dtype(), output.numel());
            layout.rankMajorToConcat(rankMajor.buffer(), concat.buffer());
            toDevice(output, concat);
        }
    }

    @Override
    public void reduceScatter(Tensor output, Tensor input, ReduceOp op, int dim, StreamHandle stream) {
        OpContext c = ctx(Op.REDUCE_SCATTER);
        ensureOpen(c);
        DimLayout layout = DeviceArgs.split(c, output, input, op, dim, worldSize(), device());
        DeviceArgs.requireStream(c, stream, device());
        if (output.numel() == 0) {
            return;
        }
        Tensor in = toHost(input);
        Tensor rankMajor = in;
        if (!layout.isRankMajor()) {
            rankMajor = Tensor.allocate(input.dtype(), input.numel());
            layout.concatToRankMajor(in.buffer(), rankMajor.buffer());
        }
        Tensor src = rankMajor;
        Tensor out = Tensor.allocate(output.dtype(), output.shape());
        run(() -> group.reduceScatter(out, src, op, timeout));
        toDevice(output, out);
    }

    @Override
    public void gather(Tensor output, Tensor input, int dst, int dim, StreamHandle stream) {
        OpContext c = ctx(Op.GATHER);
        ensureOpen(c);
        DeviceArgs.requireRank(c, "dst", dst, worldSize());
        DeviceArgs.requireStream(c, stream, device());
        if (rank() != dst) {
            DeviceArgs.requireOn(c, "input", input, device());
            DeviceArgs.normalizeDim(c, input, dim);
            if (input.numel() > 0) {
                Tensor in = toHost(input);
                run(() -> group.gather(null, in, dst, timeout));
            }
            return;
        }
        DimLayout layout = DeviceArgs.concat(c, output, input, dim, worldSize(), device());
        if (output.numel() == 0) {
            return;
        }
        Tensor in = toHost(input);
        Tensor rankMajor = Tensor.allocate(output.dtype(), output.numel());
        run(() -> group.gather(rankMajor, in, dst, timeout));
        storeConcat(layout, rankMajor, output);
    }

    @Override
    public void broadcast(Tensor tensor, int src, StreamHandle stream) {
        OpContext c = ctx(Op.BROADCAST);
        ensureOpen(c);
        DeviceArgs.requireOn(c, "tensor", tensor, device());
        DeviceArgs.requireRank(c, "src", src, worldSize());
        DeviceArgs.requireStream(c, stream, device());
        if (worldSize() == 1 || tensor.numel() == 0) {
            return;
        }
        Tensor h = rank() == src ? toHost(tensor) : Tensor.allocate(tensor.dtype(), tensor.shape());
        run(() -> group.broadcast(h, src, timeout));
        if (rank() != src) {
            toDevice(tensor, h);
        }
    }

    @Override
    public void send(Tensor tensor, int dst, StreamHandle stream) {
        OpContext c = ctx(Op.SEND);
        ensureOpen(c);
        checkPeer(c, tensor, dst, stream);
        Tensor h = toHost(tensor);
        run(() -> group.send(h, dst, P2P_TAG, timeout));
    }

    @Override
    public void recv(Tensor tensor, int src, StreamHandle stream) {
        OpContext c = ctx(Op.RECV);
        ensureOpen(c);
        checkPeer(c, tensor, src, stream);
        Tensor h = Tensor.allocate(tensor.dtype(), tensor.shape());
        run(() -> group.recv(h, src, P2P_TAG, timeout));
        toDevice(tensor, h);
    }

    private void checkPeer(OpContext c, Tensor t, int peer, StreamHandle stream) {
        DeviceArgs.requireOn(c, "tensor", t, device());
        DeviceArgs.requireRank(c, "peer", peer, worldSize());
        DeviceArgs.requireStream(c, stream, device());
        if (peer == rank()) {
            throw c.invalidArgument("peer is this rank; use batchP2P for a send to self");
        }
    }

    @Override
    public void batchP2P(List<P2POp> ops, StreamHandle stream) {
        OpContext c = ctx(Op.BATCH_P2P);
        ensureOpen(c);
        List<Tensor[]> self = DeviceArgs.batch(c, ops, rank(), worldSize(), device());
        DeviceArgs.requireStream(c, stream, device());
        for (Tensor[] pair : self) {
            rt.copy2D(pair[1].address(), pair[1].byteSize(), pair[0].address(), pair[0].byteSize(), pair[0].byteSize(), 1);
        }
        run(() -> {
            for (P2POp op : P2PSchedule.order(ops, rank())) {
                Tensor h;
                if (op.kind() == P2POp.Kind.SEND) {
                    h = toHost(op.tensor());
                    group.send(h, op.peer(), P2P_TAG, timeout);
                } else {
                    h = Tensor.allocate(op.tensor().dtype(), op.tensor().shape());
                    group.recv(h, op.peer(), P2P_TAG, timeout);
                    toDevice(op.tensor(), h);
                }
            }
        });
    }

    @Override
    public void synchronize(StreamHandle stream) {
        OpContext c = ctx(Op.SYNCHRONIZE);
        ensureOpen(c);
        DeviceArgs.requireStream(c, stream, device());
        // the fakeaccel runtime is synchronous: nothing is ever pending
    }

    @Override
    public void abort() {
        poison(new CommClosedException(ctx(Op.ABORT), "aborted"));
    }

    /**
     * Shrink: this library cannot shrink a communicator, so (after the abort that the base class does)
     * a fresh one is bootstrapped over the survivors' CPU group, with new root info, as HCCL would.
     */
    @Override
    protected io.jcomm.api.device.DeviceCommunicator recreate(ProcessGroup survivors, io.jcomm.api.Deadline deadline) {
        return create(name(), new DeviceCommunicatorContext(survivors, device(), timeout, java.util.Map.of()),
                deadline.remaining());
    }

    @Override
    public void close() {
        poison(new CommClosedException(ctx(Op.CLOSE), "closed"));
    }

    /**
     * Runs a staged call over the CPU group: a failure of the group (a {@link CommException}) poisons
     * this communicator; an argument error ({@link IllegalArgumentException}) passes through.
     */
    private void run(Runnable r) {
        try {
            r.run();
        } catch (CommException e) {
            poison(e);
            throw e;
        }
    }
}
