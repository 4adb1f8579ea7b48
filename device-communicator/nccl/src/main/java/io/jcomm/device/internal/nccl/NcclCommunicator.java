package io.jcomm.device.internal.nccl;

import io.jcomm.api.BackendException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DType;
import io.jcomm.api.Deadline;
import io.jcomm.api.Device;
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
import io.jcomm.device.internal.nccl.NcclApi.NcclComm;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.ReentrantLock;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The NCCL device communicator: the Java logic on top of {@link NcclApi}.
 *
 * <ul>
 *   <li><b>Bootstrap</b> ({@link #create}): group rank 0 makes the 128-byte unique id, the CPU group
 *       broadcasts it (with a status byte, so that a failure on rank 0 fails every rank at once),
 *       every rank sets its device and calls {@code ncclCommInitRank} (on a helper thread, bounded
 *       by the init timeout), then a warm-up all-reduce and a bounded stream sync.</li>
 *   <li><b>Operations</b> are enqueued on the caller's stream only. Concatenation or splitting
 *       along a dimension other than the leading one goes through a stream-ordered temporary
 *       ({@code cudaMallocAsync}/{@code cudaFreeAsync}) and one {@code cudaMemcpy2DAsync} per rank,
 *       so every call stays capturable. Point-to-point batches and gathers are bracketed by
 *       {@code ncclGroupStart}/{@code ncclGroupEnd}, and the end is called even when an operation
 *       inside fails. {@code allToAll}/{@code allToAllV} are one such group, a send and a receive
 *       per peer (self included).</li>
 *   <li><b>Errors</b>: every non-success result becomes a {@link BackendException} carrying
 *       {@code ncclGetErrorString} (and {@code ncclGetLastError}); results other than invalid
 *       argument/usage poison the communicator and abort it.</li>
 *   <li><b>Watchdog</b>: a daemon thread polls {@code ncclCommGetAsyncError} and the completion
 *       events of operations in flight ({@link OpTracker}); on an asynchronous error or an operation
 *       past its deadline it poisons the communicator and aborts it. Later calls fail fast.</li>
 *   <li><b>Shrink</b> ({@link #shrink}) is {@code ncclCommShrink} with {@code NCCL_SHRINK_ABORT} on a
 *       library that has it (2.27 or later, read with {@code ncclGetVersion}), else an abort and a fresh
 *       communicator over the survivors' CPU group (a new unique id); both on helper threads bounded by
 *       the shrink's timeout.</li>
 *   <li><b>Teardown</b> is {@code ncclCommAbort} on a helper thread with a bounded wait, so that
 *       {@link #close()} never hangs, even with dead peers.</li>
 * </ul>
 */
public final class NcclCommunicator extends AbstractDeviceCommunicator {

    private static final Logger LOG = LoggerFactory.getLogger(NcclCommunicator.class);

    private final NcclApi api;
    private final NcclComm comm;
    private final NcclSettings settings;
    private final OpTracker tracker;
    private final long[] alloc = new long[1];
    private final ThreadLocal<int[]> deviceScratch = ThreadLocal.withInitial(() -> new int[1]);
    private final AtomicBoolean aborted = new AtomicBoolean();
    private final AtomicBoolean closing = new AtomicBoolean();
    /** Held while an operation calls into the communicator; abort takes it (bounded) so that it never frees the communicator under a call. */
    private final ReentrantLock opLock = new ReentrantLock();
    private volatile Thread watchdog;
    private volatile boolean abortReturned;
    /** The loaded library's version code ({@code ncclGetVersion}; 0 when unknown): whether it has {@code ncclCommShrink}. */
    private final int libraryVersion;

    private NcclCommunicator(String name, NcclApi api, NcclComm comm, ProcessGroup group, Device device,
                             NcclSettings settings, OpTracker tracker) {
        super(name, group.name(), group.rank(), group.size(), device);
        this.api = api;
        this.comm = comm;
        this.settings = settings;
        this.tracker = tracker;
        int[] v = new int[1];
        this.libraryVersion = api.getVersion(v) == NcclConstants.SUCCESS ? v[0] : 0;
    }

    /**
     * Bootstraps a communicator for the members of {@code context.cpuGroup()} on
     * {@code context.device()}. Collective over the CPU group.
     *
     * @throws BackendException    when a CUDA or NCCL call fails (with the library's error string)
     * @throws CommTimeoutException when the bootstrap does not finish within the context's timeout
     */
    public static NcclCommunicator create(String providerName, NcclApi api, DeviceCommunicatorContext context) {
        NcclSettings settings = NcclSettings.from(context);
        return create(providerName, api, context.cpuGroup(), context.device(), settings,
                Deadline.after(settings.initTimeout()));
    }

    /** Bootstraps a communicator for the members of {@code group} within {@code deadline}. */
    private static NcclCommunicator create(String providerName, NcclApi api, ProcessGroup group, Device device,
                                           NcclSettings settings, Deadline deadline) {
        OpContext c = OpContext.of(group.name(), group.rank(), "init");
        if (!"cuda".equals(device.type())) {
            throw new BackendException(c, "NCCL moves cuda tensors, not " + device + " tensors");
        }
        int[] cur = new int[1];
        int previous = api.cudaGetDevice(cur) == NcclConstants.CUDA_SUCCESS ? cur[0] : -1;
        cuda(api, c, api.cudaSetDevice(device.index()), "cudaSetDevice(" + device.index() + ")");
        try {
            return bootstrap(providerName, api, group, device, settings, c, deadline);
        } finally {
            if (previous >= 0 && previous != device.index()) {
                api.cudaSetDevice(previous);
            }
        }
    }

    private static NcclCommunicator bootstrap(String providerName, NcclApi api, ProcessGroup group, Device device,
                                              NcclSettings settings, OpContext c, Deadline deadline) {
        byte[] id = exchangeUniqueId(api, group, c, deadline);
        NcclComm comm = initRank(api, group.size(), id, group.rank(), device.index(), c, deadline);
        return start(providerName, api, comm, group, device, settings, c, deadline);
    }

    /** Wraps a new NCCL communicator of the members of {@code group}: warm-up within {@code deadline}, watchdog. */
    private static NcclCommunicator start(String providerName, NcclApi api, NcclComm comm, ProcessGroup group,
                                          Device device, NcclSettings settings, OpContext c, Deadline deadline) {
        OpTracker tracker;
        try {
            tracker = settings.trackOps() ? new OpTracker(api, settings.maxTrackedOps()) : null;
        } catch (IllegalStateException e) {
            boundedAbort(comm, api, settings.abortTimeout(), group.name(), group.rank(), null);
            throw new BackendException(c, e.getMessage(), e);
        }
        NcclCommunicator nc = new NcclCommunicator(providerName, api, comm, group, device, settings, tracker);
        try {
            nc.warmUp(c, deadline);
        } catch (RuntimeException e) {
            nc.close();
            throw e;
        }
        nc.startWatchdog();
        return nc;
    }

    // ---- bootstrap ----

    /** Rank 0 creates the id; the CPU group broadcasts {@code [status, id...]} from rank 0. */
    static byte[] exchangeUniqueId(NcclApi api, ProcessGroup group, OpContext c, Deadline deadline) {
        Tensor msg = Tensor.allocate(DType.U8, 1 + NcclConstants.UNIQUE_ID_BYTES);
        BackendException local = null;
        if (group.rank() == 0) {
            byte[] id = new byte[NcclConstants.UNIQUE_ID_BYTES];
            int r = api.getUniqueId(id);
            if (r == NcclConstants.SUCCESS) {
                msg.buffer().put(0, (byte) 0).put(1, id);
            } else {
                msg.buffer().put(0, (byte) 1);
                local = new BackendException(c, "ncclGetUniqueId failed: " + api.getErrorString(r) + " (ncclResult " + r + ")");
            }
        }
        if (group.size() > 1) {
            group.broadcast(msg, 0, deadline.remaining());
        }
        if (local != null) {
            throw local;
        }
        if (msg.buffer().get(0) != 0) {
            throw new BackendException(c, "group rank 0 could not create the NCCL unique id (see rank 0's error)");
        }
        byte[] id = new byte[NcclConstants.UNIQUE_ID_BYTES];
        msg.buffer().get(1, id);
        return id;
    }

    /** {@code ncclCommInitRank} on a helper thread (it blocks until every rank joined), bounded by {@code deadline}. */
    static NcclComm initRank(NcclApi api, int nranks, byte[] id, int rank, int deviceIndex, OpContext c, Deadline deadline) {
        return makeComm(api, deviceIndex, c, deadline, out -> api.commInitRank(out, nranks, id, rank),
                "ncclCommInitRank(nranks=" + nranks + ", rank=" + rank + ", device=" + deviceIndex + ")",
                "ncclCommInitRank did not complete within the init timeout (are all " + nranks
                        + " ranks initialising, each on its own GPU?)");
    }

    /**
     * A call that makes a communicator and blocks until every rank took part ({@code ncclCommInitRank},
     * {@code ncclCommShrink}), on a helper thread whose current device is {@code deviceIndex}, bounded by
     * {@code deadline}; a communicator that comes after the caller gave up is aborted.
     */
    private static NcclComm makeComm(NcclApi api, int deviceIndex, OpContext c, Deadline deadline,
                                     java.util.function.ToIntFunction<NcclComm[]> call, String what, String timedOut) {
        AtomicBoolean abandoned = new AtomicBoolean();
        CompletableFuture<NcclComm> done = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                int r = api.cudaSetDevice(deviceIndex);
                if (r != NcclConstants.CUDA_SUCCESS) {
                    done.completeExceptionally(new BackendException(c, "cudaSetDevice(" + deviceIndex + ") failed: "
                            + api.cudaGetErrorString(r) + " (cudaError " + r + ")"));
                    return;
                }
                NcclComm[] out = new NcclComm[1];
                r = call.applyAsInt(out);
                if (r != NcclConstants.SUCCESS) {
                    done.completeExceptionally(new BackendException(c, what + " failed: " + api.getErrorString(r)
                            + " (ncclResult " + r + ")"));
                    return;
                }
                if (abandoned.get() || !done.complete(out[0])) {
                    out[0].abort(); // the caller gave up: release the late communicator
                }
            } catch (RuntimeException | Error e) {
                done.completeExceptionally(e);
            }
        }, "jcomm-nccl-" + c.operation() + "-" + c.group() + "-" + c.rank());
        t.setDaemon(true);
        t.start();
        try {
            return done.get(deadline.remainingNanos(), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            abandoned.set(true);
            done.cancel(false);
            throw new CommTimeoutException(c, timedOut);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof RuntimeException) {
                throw (RuntimeException) cause;
            }
            throw new BackendException(c, what + " failed: " + cause, cause);
        } catch (InterruptedException e) {
            abandoned.set(true);
            done.cancel(false);
            Thread.currentThread().interrupt();
            throw new CommClosedException(c, "interrupted during " + what, e);
        }
    }

    private void warmUp(OpContext c, Deadline deadline) {
        long stream = 0L;
        long buf = malloc(c, 4, stream);
        try {
            nccl(c, comm.allReduce(buf, buf, 1, NcclConstants.FLOAT32, NcclConstants.OP_SUM, stream), "ncclAllReduce (warm-up)");
        } finally {
            free(c, buf, stream);
        }
        waitStream(c, stream, deadline);
    }

    private void startWatchdog() {
        Thread t = new Thread(this::watch, "jcomm-nccl-watchdog-" + groupName() + "-" + rank());
        t.setDaemon(true);
        watchdog = t;
        t.start();
    }

    // ---- operations ----

    @Override
    public void allReduce(Tensor output, Tensor input, ReduceOp op, StreamHandle stream) {
        opLock.lock();
        int prev = enterDevice();
        try {
            allReduce0(output, input, op, stream);
        } finally {
            exitDevice(prev);
            opLock.unlock();
        }
    }

    private void allReduce0(Tensor output, Tensor input, ReduceOp op, StreamHandle stream) {
        OpContext c = ctx(Op.ALL_REDUCE);
        ensureOpen(c);
        DeviceArgs.allReduce(c, output, input, op, device());
        DeviceArgs.requireStream(c, stream, device());
        long n = input.numel();
        if (n == 0) {
            return;
        }
        long s = stream.handle();
        if (localOnly()) {
            copy(c, output.address(), input.address(), input.byteSize(), s);
            return;
        }
        DType t = input.dtype();
        nccl(c, comm.allReduce(input.address(), output.address(), n, NcclConstants.dataType(t), NcclConstants.redOp(op, t), s),
                "ncclAllReduce");
        track(c, s);
    }

    @Override
    public void allGather(Tensor output, Tensor input, int dim, StreamHandle stream) {
        opLock.lock();
        int prev = enterDevice();
        try {
            allGather0(output, input, dim, stream);
        } finally {
            exitDevice(prev);
            opLock.unlock();
        }
    }

    private void allGather0(Tensor output, Tensor input, int dim, StreamHandle stream) {
        OpContext c = ctx(Op.ALL_GATHER);
        ensureOpen(c);
        DimLayout layout = DeviceArgs.concat(c, output, input, dim, worldSize(), device());
        DeviceArgs.requireStream(c, stream, device());
        if (output.numel() == 0) {
            return;
        }
        long s = stream.handle();
        if (localOnly()) {
            copy(c, output.address(), input.address(), input.byteSize(), s);
            return;
        }
        int t = NcclConstants.dataType(input.dtype());
        if (layout.isRankMajor()) {
            nccl(c, comm.allGather(input.address(), output.address(), input.numel(), t, s), "ncclAllGather");
        } else {
            long tmp = malloc(c, layout.totalBytes(), s);
            try {
                nccl(c, comm.allGather(input.address(), tmp, input.numel(), t, s), "ncclAllGather");
                rankMajorToConcat(c, layout, tmp, output.address(), s);
            } finally {
                free(c, tmp, s);
            }
        }
        track(c, s);
    }

    @Override
    public void reduceScatter(Tensor output, Tensor input, ReduceOp op, int dim, StreamHandle stream) {
        opLock.lock();
        int prev = enterDevice();
        try {
            reduceScatter0(output, input, op, dim, stream);
        } finally {
            exitDevice(prev);
            opLock.unlock();
        }
    }

    private void reduceScatter0(Tensor output, Tensor input, ReduceOp op, int dim, StreamHandle stream) {
        OpContext c = ctx(Op.REDUCE_SCATTER);
        ensureOpen(c);
        DimLayout layout = DeviceArgs.split(c, output, input, op, dim, worldSize(), device());
        DeviceArgs.requireStream(c, stream, device());
        if (output.numel() == 0) {
            return;
        }
        long s = stream.handle();
        if (localOnly()) {
            copy(c, output.address(), input.address(), input.byteSize(), s);
            return;
        }
        DType dt = input.dtype();
        int t = NcclConstants.dataType(dt);
        int o = NcclConstants.redOp(op, dt);
        if (layout.isRankMajor()) {
            nccl(c, comm.reduceScatter(input.address(), output.address(), output.numel(), t, o, s), "ncclReduceScatter");
        } else {
            long tmp = malloc(c, layout.totalBytes(), s);
            try {
                for (int r = 0; r < worldSize(); r++) {
                    cuda(c, api.cudaMemcpy2DAsync(tmp + layout.rankMajorOffset(r), layout.rowBytes(),
                            input.address() + layout.concatOffset(r), layout.concatPitch(),
                            layout.rowBytes(), layout.height(), s), "cudaMemcpy2DAsync");
                }
                nccl(c, comm.reduceScatter(tmp, output.address(), output.numel(), t, o, s), "ncclReduceScatter");
            } finally {
                free(c, tmp, s);
            }
        }
        track(c, s);
    }

    @Override
    public void gather(Tensor output, Tensor input, int dst, int dim, StreamHandle stream) {
        opLock.lock();
        int prev = enterDevice();
        try {
            gather0(output, input, dst, dim, stream);
        } finally {
            exitDevice(prev);
            opLock.unlock();
        }
    }

    private void gather0(Tensor output, Tensor input, int dst, int dim, StreamHandle stream) {
        OpContext c = ctx(Op.GATHER);
        ensureOpen(c);
        DeviceArgs.requireRank(c, "dst", dst, worldSize());
        DeviceArgs.requireStream(c, stream, device());
        long s = stream.handle();
        if (rank() != dst) {
            DeviceArgs.requireOn(c, "input", input, device());
            DeviceArgs.normalizeDim(c, input, dim);
            if (input.numel() > 0) {
                nccl(c, comm.send(input.address(), input.numel(), NcclConstants.dataType(input.dtype()), dst, s), "ncclSend");
                track(c, s);
            }
            return;
        }
        DimLayout layout = DeviceArgs.concat(c, output, input, dim, worldSize(), device());
        if (output.numel() == 0) {
            return;
        }
        if (localOnly()) {
            copy(c, output.address(), input.address(), input.byteSize(), s);
            return;
        }
        int t = NcclConstants.dataType(input.dtype());
        long target = layout.isRankMajor() ? output.address() : malloc(c, layout.totalBytes(), s);
        try {
            copy(c, target + layout.rankMajorOffset(rank()), input.address(), input.byteSize(), s);
            group(c, () -> {
                for (int r = 0; r < worldSize(); r++) {
                    if (r != rank()) {
                        nccl(c, comm.recv(target + layout.rankMajorOffset(r), input.numel(), t, r, s), "ncclRecv");
                    }
                }
            });
            if (!layout.isRankMajor()) {
                rankMajorToConcat(c, layout, target, output.address(), s);
            }
        } finally {
            if (!layout.isRankMajor()) {
                free(c, target, s);
            }
        }
        track(c, s);
    }

    @Override
    public void broadcast(Tensor tensor, int src, StreamHandle stream) {
        opLock.lock();
        int prev = enterDevice();
        try {
            broadcast0(tensor, src, stream);
        } finally {
            exitDevice(prev);
            opLock.unlock();
        }
    }

    private void broadcast0(Tensor tensor, int src, StreamHandle stream) {
        OpContext c = ctx(Op.BROADCAST);
        ensureOpen(c);
        DeviceArgs.requireOn(c, "tensor", tensor, device());
        DeviceArgs.requireRank(c, "src", src, worldSize());
        DeviceArgs.requireStream(c, stream, device());
        if (localOnly() || tensor.numel() == 0) {
            return;
        }
        long s = stream.handle();
        nccl(c, comm.broadcast(tensor.address(), tensor.address(), tensor.numel(),
                NcclConstants.dataType(tensor.dtype()), src, s), "ncclBroadcast");
        track(c, s);
    }

    @Override
    public void send(Tensor tensor, int dst, StreamHandle stream) {
        opLock.lock();
        int prev = enterDevice();
        try {
            send0(tensor, dst, stream);
        } finally {
            exitDevice(prev);
            opLock.unlock();
        }
    }

    private void send0(Tensor tensor, int dst, StreamHandle stream) {
        OpContext c = ctx(Op.SEND);
        ensureOpen(c);
        checkP2P(c, tensor, dst, "dst", stream);
        if (tensor.numel() == 0) {
            return;
        }
        long s = stream.handle();
        nccl(c, comm.send(tensor.address(), tensor.numel(), NcclConstants.dataType(tensor.dtype()), dst, s), "ncclSend");
        track(c, s);
    }

    @Override
    public void recv(Tensor tensor, int src, StreamHandle stream) {
        opLock.lock();
        int prev = enterDevice();
        try {
            recv0(tensor, src, stream);
        } finally {
            exitDevice(prev);
            opLock.unlock();
        }
    }

    private void recv0(Tensor tensor, int src, StreamHandle stream) {
        OpContext c = ctx(Op.RECV);
        ensureOpen(c);
        checkP2P(c, tensor, src, "src", stream);
        if (tensor.numel() == 0) {
            return;
        }
        long s = stream.handle();
        nccl(c, comm.recv(tensor.address(), tensor.numel(), NcclConstants.dataType(tensor.dtype()), src, s), "ncclRecv");
        track(c, s);
    }

    private void checkP2P(OpContext c, Tensor tensor, int peer, String role, StreamHandle stream) {
        DeviceArgs.requireOn(c, "tensor", tensor, device());
        DeviceArgs.requireRank(c, role, peer, worldSize());
        DeviceArgs.requireStream(c, stream, device());
        if (peer == rank()) {
            throw c.invalidArgument(role + " is this rank; a send to self needs a matching receive in one batchP2P call");
        }
    }

    @Override
    public void batchP2P(List<P2POp> ops, StreamHandle stream) {
        opLock.lock();
        int prev = enterDevice();
        try {
            batchP2P0(ops, stream);
        } finally {
            exitDevice(prev);
            opLock.unlock();
        }
    }

    private void batchP2P0(List<P2POp> ops, StreamHandle stream) {
        OpContext c = ctx(Op.BATCH_P2P);
        ensureOpen(c);
        DeviceArgs.batch(c, ops, rank(), worldSize(), device());
        DeviceArgs.requireStream(c, stream, device());
        long s = stream.handle();
        boolean any = false;
        for (P2POp op : ops) {
            any |= op.tensor().numel() > 0;
        }
        if (!any) {
            return;
        }
        group(c, () -> {
            for (P2POp op : ops) {
                Tensor t = op.tensor();
                if (t.numel() == 0) {
                    continue;
                }
                int dt = NcclConstants.dataType(t.dtype());
                if (op.kind() == P2POp.Kind.SEND) {
                    nccl(c, comm.send(t.address(), t.numel(), dt, op.peer(), s), "ncclSend");
                } else {
                    nccl(c, comm.recv(t.address(), t.numel(), dt, op.peer(), s), "ncclRecv");
                }
            }
        });
        track(c, s);
    }

    /** One group of {@code ncclSend}/{@code ncclRecv}, a pair per peer (self included, as NCCL allows). */
    @Override
    public void allToAll(Tensor output, Tensor input, StreamHandle stream) {
        opLock.lock();
        int prev = enterDevice();
        try {
            OpContext c = ctx(Op.ALL_TO_ALL);
            ensureOpen(c);
            long[] counts = DeviceArgs.allToAll(c, output, input, worldSize(), device());
            DeviceArgs.requireStream(c, stream, device());
            allToAll0(c, output, input, counts, counts, stream);
        } finally {
            exitDevice(prev);
            opLock.unlock();
        }
    }

    /** Like {@link #allToAll} with per-rank counts. */
    @Override
    public void allToAllV(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts, StreamHandle stream) {
        opLock.lock();
        int prev = enterDevice();
        try {
            OpContext c = ctx(Op.ALL_TO_ALL_V);
            ensureOpen(c);
            long[][] counts = DeviceArgs.allToAllV(c, output, input, outputCounts, inputCounts, rank(), worldSize(), device());
            DeviceArgs.requireStream(c, stream, device());
            allToAll0(c, output, input, counts[0], counts[1], stream);
        } finally {
            exitDevice(prev);
            opLock.unlock();
        }
    }

    private void allToAll0(OpContext c, Tensor output, Tensor input, long[] outputCounts, long[] inputCounts,
                           StreamHandle stream) {
        List<P2POp> ops = allToAllOps(output, input, outputCounts, inputCounts);
        if (ops.isEmpty()) {
            return;
        }
        long s = stream.handle();
        if (localOnly()) {
            copy(c, output.address(), input.address(), input.byteSize(), s);
            return;
        }
        int dt = NcclConstants.dataType(input.dtype());
        group(c, () -> {
            for (P2POp op : ops) {
                Tensor t = op.tensor();
                if (op.kind() == P2POp.Kind.SEND) {
                    nccl(c, comm.send(t.address(), t.numel(), dt, op.peer(), s), "ncclSend");
                } else {
                    nccl(c, comm.recv(t.address(), t.numel(), dt, op.peer(), s), "ncclRecv");
                }
            }
        });
        track(c, s);
    }

    @Override
    public void synchronize(StreamHandle stream) {
        OpContext c = ctx(Op.SYNCHRONIZE);
        ensureOpen(c);
        DeviceArgs.requireStream(c, stream, device());
        int prev = enterDevice();
        try {
            waitStream(c, stream.handle(), Deadline.after(settings.opTimeout()));
        } finally {
            exitDevice(prev);
        }
    }

    /**
     * Makes the communicator's device current on the calling thread (stream handle 0 and
     * stream-ordered allocations resolve against it), like torch's device guard.
     *
     * @return the device to restore, or -1 when it was already current
     */
    private int enterDevice() {
        int[] cur = deviceScratch.get();
        if (api.cudaGetDevice(cur) == NcclConstants.CUDA_SUCCESS && cur[0] == device().index()) {
            return -1;
        }
        int prev = cur[0];
        int r = api.cudaSetDevice(device().index());
        if (r != NcclConstants.CUDA_SUCCESS) {
            throw new BackendException(ctx(Op.INIT).withOperation("setDevice"), "cudaSetDevice(" + device().index()
                    + ") failed: " + api.cudaGetErrorString(r) + " (cudaError " + r + ")");
        }
        return prev;
    }

    private void exitDevice(int prev) {
        if (prev >= 0) {
            api.cudaSetDevice(prev);
        }
    }

    /**
     * Polls {@code cudaStreamQuery} until the stream is idle. Fails fast when the watchdog poisons
     * the communicator meanwhile; on the deadline it poisons and aborts.
     */
    private void waitStream(OpContext c, long stream, Deadline deadline) {
        int idle = 0;
        while (true) {
            ensureOpen(c);
            int r = api.cudaStreamQuery(stream);
            if (r == NcclConstants.CUDA_SUCCESS) {
                return;
            }
            if (r != NcclConstants.CUDA_ERROR_NOT_READY) {
                throw fail(new BackendException(c, "cudaStreamQuery failed: " + api.cudaGetErrorString(r) + " (cudaError " + r + ")"));
            }
            if (deadline.isExpired()) {
                throw fail(new CommTimeoutException(c, "stream did not complete within " + settings.opTimeout().toMillis()
                        + " ms; the NCCL communicator was aborted"));
            }
            idle = idle(idle);
        }
    }

    /** Spin briefly, then yield, then park up to 100 µs. */
    private static int idle(int n) {
        if (n < 100) {
            Thread.onSpinWait();
        } else if (n < 200) {
            Thread.yield();
        } else {
            LockSupport.parkNanos(Math.min(100_000L, 1_000L << Math.min(7, (n - 200) / 8)));
        }
        return n + 1;
    }

    // ---- failure, abort, close ----

    @Override
    public void abort() {
        poison(new CommClosedException(ctx(Op.ABORT), "aborted"));
        stopWatchdog();
        abortComm();
    }

    /** {@link #abort()} waiting at most {@code timeout} (or the abort timeout, if shorter) for {@code ncclCommAbort}. */
    @Override
    public void abort(java.time.Duration timeout) {
        poison(new CommClosedException(ctx(Op.ABORT), "aborted"));
        stopWatchdog();
        abortComm(timeout);
    }

    /** Whether the loaded library has {@code ncclCommShrink} (NCCL 2.27 or later). */
    public boolean shrinksNatively() {
        return libraryVersion >= NcclConstants.SHRINK_MIN_VERSION_CODE;
    }

    /**
     * {@code ncclCommShrink} with {@code NCCL_SHRINK_ABORT} where the library has it (operations in flight
     * are aborted; no unique id is exchanged), on a helper thread within {@code deadline}; then this
     * communicator is aborted ({@code ncclCommAbort}, bounded). Null on an older library.
     */
    @Override
    protected io.jcomm.api.device.DeviceCommunicator shrinkNatively(int[] excluded, ProcessGroup survivors,
                                                                   Deadline deadline) {
        if (!shrinksNatively()) {
            return null;
        }
        OpContext c = ctx(Op.SHRINK);
        poison(new CommClosedException(c, "shrunk without rank(s) " + java.util.Arrays.toString(excluded)));
        stopWatchdog();
        NcclComm shrunk;
        // an operation in progress leaves at once: NCCL_SHRINK_ABORT aborts what is in flight
        boolean locked = false;
        try {
            locked = opLock.tryLock(Math.max(1, Math.min(2000, deadline.remainingMillis() / 4)), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            int[] list = excluded.clone();
            shrunk = makeComm(api, device().index(), c, deadline,
                    out -> comm.shrink(list, out, NcclConstants.SHRINK_ABORT),
                    "ncclCommShrink(excluded=" + java.util.Arrays.toString(excluded) + ", NCCL_SHRINK_ABORT)",
                    "ncclCommShrink did not complete within the shrink timeout (are all " + survivors.size()
                            + " remaining ranks shrinking with the same excluded ranks?)");
        } finally {
            if (locked) {
                opLock.unlock();
            }
            abortComm(deadline.remaining());
        }
        OpContext init = OpContext.of(survivors.name(), survivors.rank(), "init");
        return start(name(), api, shrunk, survivors, device(), settings, init, deadline);
    }

    /** A fresh communicator over {@code survivors}: a new unique id through that group, {@code ncclCommInitRank}. */
    @Override
    protected io.jcomm.api.device.DeviceCommunicator recreate(ProcessGroup survivors, Deadline deadline) {
        return create(name(), api, survivors, device(), settings, deadline);
    }

    /** Aborts the communicator ({@code ncclCommAbort}, bounded). Never hangs. Idempotent. */
    @Override
    public void close() {
        if (!closing.compareAndSet(false, true)) {
            return;
        }
        poison(new CommClosedException(ctx(Op.CLOSE), "closed"));
        stopWatchdog();
        abortComm();
    }

    /** Poisons with {@code e} (first cause wins), aborts, and returns {@code e} for throwing. */
    private CommException fail(CommException e) {
        if (poison(e)) {
            LOG.error("NCCL communicator of group {} rank {} failed, aborting: {}", groupName(), rank(), e.getMessage());
        }
        abortComm();
        return e;
    }

    private void abortComm() {
        abortComm(settings.abortTimeout());
    }

    /** Aborts the communicator, waiting at most {@code limit} (and the abort timeout) for {@code ncclCommAbort}. */
    private void abortComm(java.time.Duration limit) {
        if (!aborted.compareAndSet(false, true)) {
            return;
        }
        java.time.Duration wait = limit.compareTo(settings.abortTimeout()) < 0 ? limit : settings.abortTimeout();
        // The communicator is already poisoned, so no new operation enters it. Wait (bounded) for an
        // operation in progress to leave before freeing the communicator; if one is stuck inside
        // NCCL, abort anyway: ncclCommAbort is what unblocks it.
        boolean locked = false;
        try {
            locked = opLock.tryLock(Math.min(2000, Math.max(1, wait.toMillis() / 4)), TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            abortReturned = boundedAbort(comm, api, wait, groupName(), rank(), tracker);
        } finally {
            if (locked) {
                opLock.unlock();
            }
        }
    }

    /**
     * {@code ncclCommAbort} on a helper thread, waiting at most the abort timeout.
     *
     * @return true if it returned in time
     */
    static boolean boundedAbort(NcclComm comm, NcclApi api, java.time.Duration limit, String group, int rank,
                                OpTracker tracker) {
        AtomicBoolean returned = new AtomicBoolean();
        Thread t = new Thread(() -> {
            int r = comm.abort();
            if (r != NcclConstants.SUCCESS) {
                LOG.warn("ncclCommAbort of group {} rank {} returned {} ({})", group, rank, api.getErrorString(r), r);
            }
            returned.set(true);
            if (tracker != null) {
                tracker.close();
            }
        }, "jcomm-nccl-abort-" + group + "-" + rank);
        t.setDaemon(true);
        t.start();
        try {
            t.join(Math.max(1, limit.toMillis()));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (t.isAlive()) {
            LOG.warn("ncclCommAbort of group {} rank {} did not return within {} ms; abandoning it",
                    group, rank, limit.toMillis());
        }
        return returned.get();
    }

    /** True once {@code ncclCommAbort} returned (tests, diagnostics). */
    public boolean isAbortComplete() {
        return abortReturned;
    }

    private void stopWatchdog() {
        Thread t = watchdog;
        if (t == null || t == Thread.currentThread()) {
            return;
        }
        LockSupport.unpark(t);
        try {
            t.join(Math.max(1, settings.watchdogInterval().toMillis() * 5 + 1000));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private void watch() {
        int[] err = new int[1];
        OpContext c = OpContext.of(groupName(), rank(), "watchdog");
        long interval = settings.watchdogInterval().toNanos();
        while (!isClosed()) {
            int r = comm.getAsyncError(err);
            CommException failure = null;
            if (r != NcclConstants.SUCCESS) {
                failure = new BackendException(c, "ncclCommGetAsyncError failed: " + api.getErrorString(r) + " (ncclResult " + r + ")");
            } else if (err[0] != NcclConstants.SUCCESS && err[0] != NcclConstants.IN_PROGRESS) {
                failure = new BackendException(c, "asynchronous NCCL error: " + api.getErrorString(err[0]) + " (ncclResult "
                        + err[0] + ")" + lastError());
            } else if (tracker != null) {
                OpTracker.Verdict v = tracker.poll(System.nanoTime());
                if (v.timedOut()) {
                    failure = new CommTimeoutException(c, v.detail() + " within " + settings.opTimeout().toMillis()
                            + " ms; the NCCL communicator was aborted");
                } else if (v.failed()) {
                    failure = new BackendException(c, v.detail());
                }
            }
            if (failure != null) {
                if (!isClosed()) {
                    fail(failure);
                }
                return;
            }
            LockSupport.parkNanos(interval);
        }
    }

    // ---- helpers ----

    /** Throws a {@link BackendException} for a non-success NCCL result; non-argument errors poison and abort. */
    private void nccl(OpContext c, int result, String call) {
        if (result == NcclConstants.SUCCESS) {
            return;
        }
        BackendException e = new BackendException(c, call + " failed: " + api.getErrorString(result) + " (ncclResult "
                + result + ")" + lastError());
        if (NcclConstants.isArgumentError(result)) {
            throw e;
        }
        throw fail(e);
    }

    private String lastError() {
        String last = comm.getLastError();
        return last == null || last.isEmpty() ? "" : "; last NCCL error: " + last;
    }

    private static void cuda(NcclApi api, OpContext c, int result, String call) {
        if (result != NcclConstants.CUDA_SUCCESS) {
            throw new BackendException(c, call + " failed: " + api.cudaGetErrorString(result) + " (cudaError " + result + ")");
        }
    }

    private void cuda(OpContext c, int result, String call) {
        if (result != NcclConstants.CUDA_SUCCESS) {
            throw fail(new BackendException(c, call + " failed: " + api.cudaGetErrorString(result) + " (cudaError " + result + ")"));
        }
    }

    private void copy(OpContext c, long dst, long src, long bytes, long stream) {
        if (dst != src && bytes > 0) {
            cuda(c, api.cudaMemcpyAsync(dst, src, bytes, stream), "cudaMemcpyAsync");
        }
    }

    private void rankMajorToConcat(OpContext c, DimLayout layout, long rankMajor, long concat, long stream) {
        for (int r = 0; r < layout.worldSize(); r++) {
            cuda(c, api.cudaMemcpy2DAsync(concat + layout.concatOffset(r), layout.concatPitch(),
                    rankMajor + layout.rankMajorOffset(r), layout.rowBytes(),
                    layout.rowBytes(), layout.height(), stream), "cudaMemcpy2DAsync");
        }
    }

    private long malloc(OpContext c, long bytes, long stream) {
        int r = api.cudaMallocAsync(alloc, bytes, stream);
        if (r != NcclConstants.CUDA_SUCCESS) {
            // out of memory is the caller's problem, not the communicator's: do not poison
            throw new BackendException(c, "cudaMallocAsync(" + bytes + ") failed: " + api.cudaGetErrorString(r)
                    + " (cudaError " + r + ")");
        }
        return alloc[0];
    }

    private void free(OpContext c, long ptr, long stream) {
        int r = api.cudaFreeAsync(ptr, stream);
        if (r != NcclConstants.CUDA_SUCCESS) {
            LOG.warn("[{}] cudaFreeAsync failed: {} ({})", c, api.cudaGetErrorString(r), r);
        }
    }

    private void track(OpContext c, long stream) {
        if (tracker == null) {
            return;
        }
        long now = System.nanoTime();
        int r = tracker.track(c.operation(), stream, now, now + settings.opTimeout().toNanos());
        if (r != NcclConstants.CUDA_SUCCESS) {
            throw fail(new BackendException(c, "cudaEventRecord failed: " + api.cudaGetErrorString(r) + " (cudaError " + r + ")"));
        }
    }

    /** The body of a group call. */
    @FunctionalInterface
    private interface GroupBody {
        void run();
    }

    /** {@code ncclGroupStart}; body; {@code ncclGroupEnd} — the end is called even when the body fails. */
    private void group(OpContext c, GroupBody body) {
        nccl(c, api.groupStart(), "ncclGroupStart");
        RuntimeException failure = null;
        try {
            body.run();
        } catch (RuntimeException e) {
            failure = e;
        }
        int r = api.groupEnd();
        if (failure != null) {
            if (r != NcclConstants.SUCCESS) {
                failure.addSuppressed(new BackendException(c, "ncclGroupEnd failed: " + api.getErrorString(r)));
            }
            throw failure;
        }
        nccl(c, r, "ncclGroupEnd");
    }

    /** World size 1 with the local shortcut on: collectives are copies on the stream, NCCL is not called. */
    private boolean localOnly() {
        return worldSize() == 1 && settings.localWorldOfOne();
    }

    /** Operations tracked as in flight (tests, diagnostics). */
    public int trackedInFlight() {
        return tracker == null ? 0 : tracker.inFlight();
    }
}
