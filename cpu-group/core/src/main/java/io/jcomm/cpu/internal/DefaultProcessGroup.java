package io.jcomm.cpu.internal;

import io.jcomm.api.config.Settings;
import io.jcomm.api.BackendException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DType;
import io.jcomm.api.Deadline;
import io.jcomm.api.ObjectCodec;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.UnsupportedByBackendException;
import io.jcomm.api.device.P2POp;
import io.jcomm.runtime.FailureLatch;
import io.jcomm.runtime.jfr.OperationEvents;
import io.jcomm.runtime.recorder.FlightRecorder;
import io.jcomm.api.work.CompletableWork;
import io.jcomm.api.work.Work;
import io.jcomm.cpu.FaultPlan;
import io.jcomm.cpu.spi.CpuBackend;
import io.jcomm.cpu.spi.Reductions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.Semaphore;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;
import java.util.function.ToLongFunction;

/**
 * The {@link ProcessGroup} every CPU backend is wrapped in (c10d's ProcessGroup over a Backend).
 * It does what is the same for every backend:
 *
 * <ul>
 *   <li>argument validation: host tensors, dtypes, sizes, ranks and timeouts are checked before
 *       anything is sent, and fail with {@link IllegalArgumentException} (naming the group, rank and
 *       operation) without affecting the group; so does a value the codec cannot encode;</li>
 *   <li>world size 1: every collective completes locally, no backend exists;</li>
 *   <li>object collectives: encode with the codec, exchange byte payloads through the backend
 *       (bounded by {@code object.maxBytes}), decode and type-check;</li>
 *   <li>asynchronous calls run in call order on one worker thread; a synchronous call first waits
 *       for earlier asynchronous calls, and runs on the caller's thread (no thread hop when nothing
 *       asynchronous is pending);</li>
 *   <li>poisoning: the first failure of a backend call (peer death, timeout, mismatch, transport
 *       error) is remembered, the backend is closed at once (so that peers notice quickly), and every
 *       later call fails immediately with an exception of the same type caused by the original;</li>
 *   <li>every exception names the group, this rank and the operation;</li>
 *   <li>{@link #close()} from any thread fails a call in progress with {@link CommClosedException};</li>
 *   <li>fault injection ({@link FaultPlan}): every operation that reaches the backend passes one hook,
 *       before and after it runs, with its name and sequence number; a group that no fault targets has
 *       no injector, and the hook is a null check of a final field.</li>
 * </ul>
 */
public final class DefaultProcessGroup implements ProcessGroup {

    /** Something to run against the backend with a deadline. */
    @FunctionalInterface
    private interface Call {
        void run(CpuBackend backend, Deadline deadline);
    }

    private static final CompletableFuture<Void> DONE = CompletableFuture.completedFuture(null);

    private final String name;
    private final int rank;
    private final int size;
    private final List<Integer> globalRanks;
    private final String backendName;
    /** This group's record in the process's flight recorder, or null (off, or size 1). */
    private final FlightRecorder.Group recorder;
    private final Duration timeout;
    private final ObjectCodec codec;
    private final int maxObjectBytes;
    private final CpuBackend backend;
    /** The faults that target this group on this rank, or null (the common case: no fault injection). */
    private final FaultInjector faults;

    private final FailureLatch poison = new FailureLatch();
    private volatile boolean closed;
    private final Object asyncLock = new Object();
    private ThreadPoolExecutor asyncExecutor; // guarded by asyncLock, created on first async call
    /**
     * Asynchronous operations a group holds at most (queued or running): a caller beyond it waits for
     * one to finish, within its operation's deadline, so the queue of the asynchronous worker is bounded.
     */
    static final int MAX_ASYNC_IN_FLIGHT = 1024;
    private final Semaphore asyncSlots = new Semaphore(MAX_ASYNC_IN_FLIGHT);
    private volatile CompletableFuture<Void> asyncTail = DONE;
    private final Set<CompletableWork<?>> inFlight = ConcurrentHashMap.newKeySet();

    /** The group's generation ({@link #generation()}). */
    private final int generation;
    /** The store namespace the group was made in, and how to make its successor; null: it cannot shrink. */
    private final io.jcomm.api.store.Store namespace;
    private final GroupShrink.Connector successor;

    /**
     * A group of generation 0 that cannot {@link #shrink}.
     *
     * @param backend the connected backend, or {@code null} when {@code size == 1}
     */
    public DefaultProcessGroup(String name, int rank, int size, List<Integer> globalRanks, String backendName,
                               Duration timeout, ObjectCodec codec, long maxObjectBytes, CpuBackend backend) {
        this(name, rank, size, globalRanks, backendName, timeout, codec, maxObjectBytes, backend, FaultPlan.NONE, 0, null,
                null);
    }

    /**
     * @param backend    the connected backend, or {@code null} when {@code size == 1}
     * @param faults     faults to inject ({@link FaultPlan#NONE}: none); those targeting this group on this
     *                   rank (by its global rank) are armed, in a group of more than one rank
     * @param generation the group's generation
     * @param namespace  the store namespace it was made in (what the backend got), or null
     * @param successor  makes a member of its successor ({@link #shrink}), or null: it cannot shrink
     */
    public DefaultProcessGroup(String name, int rank, int size, List<Integer> globalRanks, String backendName,
                               Duration timeout, ObjectCodec codec, long maxObjectBytes, CpuBackend backend,
                               FaultPlan faults, int generation, io.jcomm.api.store.Store namespace,
                               GroupShrink.Connector successor) {
        this.generation = generation;
        this.namespace = namespace;
        this.successor = namespace != null ? successor : null;
        this.name = Objects.requireNonNull(name, "name");
        this.rank = rank;
        this.size = size;
        this.globalRanks = List.copyOf(globalRanks);
        this.backendName = Objects.requireNonNull(backendName, "backendName");
        this.timeout = Objects.requireNonNull(timeout, "timeout");
        this.codec = Objects.requireNonNull(codec, "codec");
        this.maxObjectBytes = (int) Math.min(Integer.MAX_VALUE - 64, maxObjectBytes);
        this.backend = backend;
        FlightRecorder fr = size > 1 ? FlightRecorder.process() : null;
        this.recorder = fr != null ? fr.group(name, rank, size) : null;
        if (size > 1 && backend == null) {
            throw new IllegalArgumentException("a group of size " + size + " needs a backend");
        }
        this.faults = size > 1 ? FaultInjector.forGroup(faults, name, rank, this.globalRanks.get(rank), this::cut) : null;
    }

    // ---------------------------------------------------------------- identity

    @Override
    public String name() {
        return name;
    }

    @Override
    public int rank() {
        return rank;
    }

    @Override
    public int size() {
        return size;
    }

    @Override
    public List<Integer> globalRanks() {
        return globalRanks;
    }

    @Override
    public String backendName() {
        return backendName;
    }

    @Override
    public Duration defaultTimeout() {
        return timeout;
    }

    @Override
    public ObjectCodec codec() {
        return codec;
    }

    @Override
    public int generation() {
        return generation;
    }

    @Override
    public boolean isPoisoned() {
        return closed || poison.isTripped() || (backend != null && backend.hasFailed());
    }

    /** The backend (null for a group of one); for tests and tools of this SDK. */
    public CpuBackend backend() {
        return backend;
    }

    /** The failure that poisoned the group, if any. */
    public CommException poisonCause() {
        return poison.first();
    }

    @Override
    public String toString() {
        return "ProcessGroup(" + name + ", rank " + rank + "/" + size + ", " + backendName
                + (generation > 0 ? ", generation " + generation : "") + ")";
    }

    private OpContext ctx(String op) {
        return OpContext.of(name, rank, op);
    }

    // ---------------------------------------------------------------- validation

    /** When the call that made {@code d} from {@code t} started (no clock read: the recorder's start stamp). */
    private static long startOf(Deadline d, Duration t) {
        long n;
        try {
            n = t.toNanos();
        } catch (ArithmeticException e) {
            n = Long.MAX_VALUE / 4;
        }
        return d.nanoTime() - Math.min(n, Long.MAX_VALUE / 4);
    }

    private Deadline deadline(Duration t, OpContext ctx) {
        if (t == null || t.isNegative()) {
            throw ctx.invalidArgument("timeout must be non-null and non-negative, got " + t);
        }
        return Deadline.after(t);
    }

    private void checkHost(Tensor t, String what, OpContext ctx) {
        if (t == null) {
            throw ctx.invalidArgument(what + " must not be null");
        }
        if (!t.isHost()) {
            throw ctx.invalidArgument(what + " must be a host (cpu) tensor, got " + t);
        }
    }

    private void checkRank(int r, String what, OpContext ctx) {
        if (r < 0 || r >= size) {
            throw ctx.invalidArgument(what + " " + r + " out of range [0, " + size + ")");
        }
    }

    private void checkPeer(int r, String what, OpContext ctx) {
        checkRank(r, what, ctx);
        if (r == rank) {
            throw ctx.invalidArgument(what + " " + r + " is this rank; point-to-point needs another rank");
        }
    }

    private static void checkTag(int tag, OpContext ctx) {
        if (tag < 0) {
            throw ctx.invalidArgument("tag must be >= 0 (negative tags are reserved), got " + tag);
        }
    }

    private static void checkSameType(Tensor a, Tensor b, OpContext ctx) {
        if (a.dtype() != b.dtype()) {
            throw ctx.invalidArgument("dtype mismatch: output is " + a.dtype() + ", input is " + b.dtype());
        }
    }

    private static void checkNumel(Tensor t, long expected, String what, OpContext ctx) {
        if (t.numel() != expected) {
            throw ctx.invalidArgument(what + " has " + t.numel() + " elements, expected " + expected);
        }
    }

    private static void checkReducible(DType t, ReduceOp op, OpContext ctx) {
        if (op == null) {
            throw ctx.invalidArgument("reduce op is null");
        }
        if (!Reductions.supports(t, op)) {
            throw ctx.invalidArgument(op + " is not defined for " + t);
        }
    }

    private long sizeTimes(long n, OpContext ctx) {
        try {
            return Math.multiplyExact(n, (long) size);
        } catch (ArithmeticException e) {
            throw ctx.invalidArgument("element count overflows: " + n + " x " + size);
        }
    }

    // ---------------------------------------------------------------- execution

    /** Throws when the group is closed or poisoned; waits for earlier asynchronous calls. */
    private void enter(OpContext ctx, Deadline d) {
        checkUsable(ctx);
        CompletableFuture<Void> tail = asyncTail;
        if (!tail.isDone()) {
            try {
                tail.get(d.remainingNanos(), TimeUnit.NANOSECONDS);
            } catch (TimeoutException e) {
                throw new CommTimeoutException(ctx, "earlier asynchronous operations did not complete before the deadline");
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CommException(ctx, "interrupted while waiting for earlier asynchronous operations", e);
            } catch (ExecutionException e) {
                // the tail never completes exceptionally; a failure of the async op is in the poison
            }
            checkUsable(ctx);
        }
    }

    private void checkUsable(OpContext ctx) {
        CommException p = poison.first();
        if (p != null) {
            throw Errors.poisoned(p, ctx);
        }
        if (closed) {
            throw new CommClosedException(ctx, "group closed");
        }
    }

    /** Records a backend failure, poisons the group and releases the backend. */
    private CommException fail(OpContext ctx, Throwable t) {
        CommException e = Errors.wrap(t, ctx);
        if (closed && !(e instanceof CommClosedException)) {
            e = new CommClosedException(ctx, "group closed while the call was running", e);
        }
        if (poison.tripFirst(e)) {
            try {
                backend.close();
            } catch (RuntimeException ignored) {
                // best effort: the group is unusable either way
            }
        }
        return e;
    }

    /**
     * A {@code cut} fault: poisons the group with a failure naming it and closes the backend's
     * connections without a goodbye (peers see a reset, as from a crash); returns the failure.
     */
    private CommException cut(FaultPlan.Fault fault, String op, long seq) {
        OpContext ctx = ctx(op);
        CommException e = new BackendException(ctx, "fault injection (" + Settings.FAULT.name() + " " + fault
                + ") cut this rank's connections of the group at operation " + seq);
        if (poison.tripFirst(e)) {
            try {
                backend.cutConnections();
            } catch (RuntimeException ignored) {
                // the group is unusable either way
            }
            return e;
        }
        return poison.first();
    }

    /** The bytes of the larger of a call's two buffers on this rank (either may be null): the recorder's count. */
    private static long bytes(Tensor a, Tensor b) {
        return Math.max(a == null ? 0 : a.byteSize(), b == null ? 0 : b.byteSize());
    }

    private static long batchBytes(List<P2POp> batch) {
        long n = 0;
        for (P2POp op : batch) {
            n += op.tensor().byteSize();
        }
        return n;
    }

    /** Runs {@code call} on the caller's thread; {@code bytes} is what the flight recorder counts for it. */
    private void sync(String op, long bytes, Duration t, Call call) {
        OpContext ctx = ctx(op);
        Deadline d = deadline(t, ctx);
        Object event = OperationEvents.begin();
        RuntimeException failure = null;
        FlightRecorder.Group rec = recorder;
        long seq = rec != null ? rec.begin(op, false, startOf(d, t), bytes) : 0;
        FaultInjector fi = faults;
        try {
            if (fi != null) {
                seq = fi.before(op, seq);
            }
            enter(ctx, d);
            try {
                call.run(backend, d);
                if (fi != null) {
                    fi.after(op, seq);
                }
            } catch (UnsupportedByBackendException e) {
                throw unsupported(ctx, e);
            } catch (RuntimeException e) {
                throw fail(ctx, e);
            }
        } catch (RuntimeException e) {
            failure = e;
            throw e;
        } finally {
            OperationEvents.end(event, name, rank, backendName, op, false, failure);
            if (rec != null) {
                rec.end(op, seq, failure == null);
            }
        }
    }

    /** The backend refused the operation before sending anything: every rank gets the same, no poison. */
    private static UnsupportedByBackendException unsupported(OpContext ctx, UnsupportedByBackendException e) {
        return new UnsupportedByBackendException(ctx, e.backend(), e.unsupportedOperation(), e);
    }

    private Work<Void> async(String op, long bytes, Duration t, Object keepAlive, Call call) {
        OpContext ctx = ctx(op);
        Deadline d = deadline(t, ctx);
        CompletableWork<Void> w = new CompletableWork<>(ctx, d, keepAlive);
        CommException p = poison.first();
        if (p != null || closed) {
            w.fail(p != null ? Errors.poisoned(p, ctx) : new CommClosedException(ctx, "group closed"));
            return w;
        }
        try {
            if (!asyncSlots.tryAcquire() && !asyncSlots.tryAcquire(Math.max(0, d.remainingNanos()), TimeUnit.NANOSECONDS)) {
                w.fail(new CommTimeoutException(ctx, MAX_ASYNC_IN_FLIGHT
                        + " asynchronous operations were still in flight at the deadline (none finished to make room)"));
                return w;
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            w.fail(new CommClosedException(ctx, "interrupted while waiting for room for an asynchronous operation"));
            return w;
        }
        CompletableFuture<Void> done = new CompletableFuture<>();
        inFlight.add(w);
        synchronized (asyncLock) {
            ThreadPoolExecutor ex = executor();
            asyncTail = done;
            try {
                ex.execute(() -> runAsync(w, ctx, d, bytes, call, done));
            } catch (RuntimeException e) { // rejected: closed concurrently
                inFlight.remove(w);
                asyncSlots.release();
                done.complete(null);
                w.fail(new CommClosedException(ctx, "group closed"));
            }
        }
        return w;
    }

    private void runAsync(CompletableWork<Void> w, OpContext ctx, Deadline d, long bytes, Call call,
                          CompletableFuture<Void> done) {
        try {
            CommException p = poison.first();
            if (p != null || closed) {
                w.fail(p != null ? Errors.poisoned(p, ctx) : new CommClosedException(ctx, "group closed"));
                return;
            }
            Object event = OperationEvents.begin();
            Throwable failure = null;
            FlightRecorder.Group rec = recorder;
            long seq = rec != null ? rec.begin(ctx.operation(), true, System.nanoTime(), bytes) : 0;
            FaultInjector fi = faults;
            try {
                if (fi != null) {
                    seq = fi.before(ctx.operation(), seq);
                }
                call.run(backend, d);
                if (fi != null) {
                    fi.after(ctx.operation(), seq);
                }
                w.complete(null);
            } catch (UnsupportedByBackendException e) {
                failure = unsupported(ctx, e);
                w.fail(failure);
            } catch (RuntimeException e) {
                failure = fail(ctx, e);
                w.fail(failure);
            } catch (Error e) {
                failure = e;
                w.fail(fail(ctx, e));
                throw e;
            } finally {
                OperationEvents.end(event, name, rank, backendName, ctx.operation(), true, failure);
                if (rec != null) {
                    rec.end(ctx.operation(), seq, failure == null);
                }
            }
        } finally {
            inFlight.remove(w);
            asyncSlots.release();
            done.complete(null);
        }
    }

    private ThreadPoolExecutor executor() {
        if (asyncExecutor == null) {
            ThreadPoolExecutor ex = new ThreadPoolExecutor(1, 1, 0L, TimeUnit.MILLISECONDS, new LinkedBlockingQueue<>(), r -> {
                Thread th = new Thread(r, "jcomm-cpu-async-" + name + "-r" + rank);
                th.setDaemon(true);
                return th;
            });
            asyncExecutor = ex;
        }
        return asyncExecutor;
    }

    /** Runs a local (size 1) operation as an already completed work. */
    private Work<Void> local(String op, Runnable r) {
        OpContext ctx = ctx(op);
        checkUsable(ctx);
        r.run();
        return CompletableWork.completed(ctx, null);
    }

    private static void copyIfDistinct(Tensor dst, Tensor src) {
        if (dst.byteSize() == 0) {
            return;
        }
        dst.copyFrom(src);
    }

    // ---------------------------------------------------------------- synchronisation

    @Override
    public void barrier(Duration timeout) {
        if (size == 1) {
            deadline(timeout, ctx("barrier"));
            checkUsable(ctx("barrier"));
            return;
        }
        sync("barrier", 0, timeout, (b, d) -> b.barrier(d));
    }

    @Override
    public void monitoredBarrier(Duration timeout) {
        if (size == 1) {
            deadline(timeout, ctx("monitoredBarrier"));
            checkUsable(ctx("monitoredBarrier"));
            return;
        }
        sync("monitoredBarrier", 0, timeout, (b, d) -> b.monitoredBarrier(d));
    }

    @Override
    public Work<Void> barrierAsync(Duration timeout) {
        if (size == 1) {
            deadline(timeout, ctx("barrier"));
            return local("barrier", () -> { });
        }
        return async("barrier", 0, timeout, null, (b, d) -> b.barrier(d));
    }

    // ---------------------------------------------------------------- tensor collectives

    private void validateBroadcast(Tensor tensor, int src, OpContext ctx) {
        checkHost(tensor, "tensor", ctx);
        checkRank(src, "src", ctx);
    }

    @Override
    public void broadcast(Tensor tensor, int src, Duration timeout) {
        validateBroadcast(tensor, src, ctx("broadcast"));
        if (size == 1) {
            deadline(timeout, ctx("broadcast"));
            checkUsable(ctx("broadcast"));
            return;
        }
        sync("broadcast", tensor.byteSize(), timeout, (b, d) -> b.broadcast(tensor, src, d));
    }

    @Override
    public Work<Void> broadcastAsync(Tensor tensor, int src, Duration timeout) {
        validateBroadcast(tensor, src, ctx("broadcast"));
        if (size == 1) {
            deadline(timeout, ctx("broadcast"));
            return local("broadcast", () -> { });
        }
        return async("broadcast", tensor.byteSize(), timeout, tensor, (b, d) -> b.broadcast(tensor, src, d));
    }

    private void validateAllReduce(Tensor tensor, ReduceOp op, OpContext ctx) {
        checkHost(tensor, "tensor", ctx);
        checkReducible(tensor.dtype(), op, ctx);
    }

    @Override
    public void allReduce(Tensor tensor, ReduceOp op, Duration timeout) {
        validateAllReduce(tensor, op, ctx("allReduce"));
        if (size == 1) {
            deadline(timeout, ctx("allReduce"));
            checkUsable(ctx("allReduce"));
            return; // x op nothing = x; AVG divides by 1
        }
        sync("allReduce", tensor.byteSize(), timeout, (b, d) -> b.allReduce(tensor, op, d));
    }

    @Override
    public Work<Void> allReduceAsync(Tensor tensor, ReduceOp op, Duration timeout) {
        validateAllReduce(tensor, op, ctx("allReduce"));
        if (size == 1) {
            deadline(timeout, ctx("allReduce"));
            return local("allReduce", () -> { });
        }
        return async("allReduce", tensor.byteSize(), timeout, tensor, (b, d) -> b.allReduce(tensor, op, d));
    }

    private void validateAllGather(Tensor output, Tensor input, OpContext ctx) {
        checkHost(output, "output", ctx);
        checkHost(input, "input", ctx);
        checkSameType(output, input, ctx);
        checkNumel(output, sizeTimes(input.numel(), ctx), "output", ctx);
    }

    @Override
    public void allGather(Tensor output, Tensor input, Duration timeout) {
        validateAllGather(output, input, ctx("allGather"));
        if (size == 1) {
            deadline(timeout, ctx("allGather"));
            checkUsable(ctx("allGather"));
            copyIfDistinct(output, input);
            return;
        }
        sync("allGather", bytes(output, input), timeout, (b, d) -> b.allGather(output, input, d));
    }

    @Override
    public Work<Void> allGatherAsync(Tensor output, Tensor input, Duration timeout) {
        validateAllGather(output, input, ctx("allGather"));
        if (size == 1) {
            deadline(timeout, ctx("allGather"));
            return local("allGather", () -> copyIfDistinct(output, input));
        }
        return async("allGather", bytes(output, input), timeout, new Tensor[] {output, input},
                (b, d) -> b.allGather(output, input, d));
    }

    @Override
    public void allGatherV(Tensor output, Tensor input, long[] counts, Duration timeout) {
        OpContext ctx = ctx("allGatherV");
        checkHost(output, "output", ctx);
        checkHost(input, "input", ctx);
        checkSameType(output, input, ctx);
        long[] c = checkCounts(counts, "counts", output, ctx);
        checkNumel(input, c[rank], "input", ctx);
        if (size == 1) {
            deadline(timeout, ctx);
            checkUsable(ctx);
            copyIfDistinct(output, input);
            return;
        }
        sync("allGatherV", bytes(output, input), timeout, (b, d) -> b.allGatherV(output, input, c, d));
    }

    private void validateAllToAll(Tensor output, Tensor input, OpContext ctx) {
        checkHost(output, "output", ctx);
        checkHost(input, "input", ctx);
        checkSameType(output, input, ctx);
        checkDistinct(output, input, ctx);
        if (input.numel() % size != 0) {
            throw ctx.invalidArgument("input has " + input.numel() + " elements, not a multiple of the group size "
                    + size);
        }
        checkNumel(output, input.numel(), "output", ctx);
    }

    private void checkDistinct(Tensor output, Tensor input, OpContext ctx) {
        if (output == input) {
            throw ctx.invalidArgument("output and input must be different tensors");
        }
    }

    @Override
    public void allToAll(Tensor output, Tensor input, Duration timeout) {
        OpContext ctx = ctx("allToAll");
        validateAllToAll(output, input, ctx);
        if (size == 1) {
            deadline(timeout, ctx);
            checkUsable(ctx);
            copyIfDistinct(output, input);
            return;
        }
        sync("allToAll", bytes(output, input), timeout, (b, d) -> b.allToAll(output, input, d));
    }

    @Override
    public Work<Void> allToAllAsync(Tensor output, Tensor input, Duration timeout) {
        OpContext ctx = ctx("allToAll");
        validateAllToAll(output, input, ctx);
        if (size == 1) {
            deadline(timeout, ctx);
            return local("allToAll", () -> copyIfDistinct(output, input));
        }
        return async("allToAll", bytes(output, input), timeout, new Tensor[] {output, input},
                (b, d) -> b.allToAll(output, input, d));
    }

    /**
     * Checks one count per rank, none negative, summing to {@code numel} of {@code t} (named "input" when
     * {@code what} starts so, else "output"); returns a copy.
     */
    private long[] checkCounts(long[] counts, String what, Tensor t, OpContext ctx) {
        if (counts == null || counts.length != size) {
            throw ctx.invalidArgument(what + " must have one entry per rank (" + size + "), got "
                    + (counts == null ? "null" : counts.length));
        }
        long[] c = counts.clone();
        long total = 0;
        for (int r = 0; r < size; r++) {
            if (c[r] < 0) {
                throw ctx.invalidArgument(what + "[" + r + "] is negative: " + c[r]);
            }
            total += c[r];
            if (total < 0) {
                throw ctx.invalidArgument(what + " overflow");
            }
        }
        checkNumel(t, total, what.startsWith("input") ? "input" : "output", ctx);
        return c;
    }

    @Override
    public void allToAllV(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts, Duration timeout) {
        OpContext ctx = ctx("allToAllV");
        long[][] c = validateAllToAllV(output, input, outputCounts, inputCounts, ctx);
        if (size == 1) {
            deadline(timeout, ctx);
            checkUsable(ctx);
            checkSelfCounts(c, ctx);
            copyIfDistinct(output, input);
            return;
        }
        sync("allToAllV", bytes(output, input), timeout, (b, d) -> b.allToAllV(output, input, c[0], c[1], d));
    }

    @Override
    public Work<Void> allToAllVAsync(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts,
                                     Duration timeout) {
        OpContext ctx = ctx("allToAllV");
        long[][] c = validateAllToAllV(output, input, outputCounts, inputCounts, ctx);
        if (size == 1) {
            deadline(timeout, ctx);
            checkSelfCounts(c, ctx);
            return local("allToAllV", () -> copyIfDistinct(output, input));
        }
        return async("allToAllV", bytes(output, input), timeout, new Tensor[] {output, input},
                (b, d) -> b.allToAllV(output, input, c[0], c[1], d));
    }

    private long[][] validateAllToAllV(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts,
                                       OpContext ctx) {
        checkHost(output, "output", ctx);
        checkHost(input, "input", ctx);
        checkSameType(output, input, ctx);
        checkDistinct(output, input, ctx);
        return new long[][] {checkCounts(outputCounts, "outputCounts", output, ctx),
            checkCounts(inputCounts, "inputCounts", input, ctx)};
    }

    /**
     * A group of one sends to itself: what it sends must be what it expects (the caller's own counts
     * disagree, there is no other rank: an argument error).
     */
    private static void checkSelfCounts(long[][] c, OpContext ctx) {
        if (c[0][0] != c[1][0]) {
            throw ctx.invalidArgument("rank 0 sends " + c[1][0] + " elements to itself but expects "
                    + c[0][0]);
        }
    }

    private void validateGather(Tensor output, Tensor input, int dst, OpContext ctx) {
        checkHost(input, "input", ctx);
        checkRank(dst, "dst", ctx);
        if (rank == dst) {
            checkHost(output, "output", ctx);
            checkSameType(output, input, ctx);
            checkNumel(output, sizeTimes(input.numel(), ctx), "output", ctx);
        }
    }

    @Override
    public void gather(Tensor output, Tensor input, int dst, Duration timeout) {
        OpContext ctx = ctx("gather");
        validateGather(output, input, dst, ctx);
        if (size == 1) {
            deadline(timeout, ctx);
            checkUsable(ctx);
            copyIfDistinct(output, input);
            return;
        }
        Tensor out = rank == dst ? output : null;
        sync("gather", bytes(out, input), timeout, (b, d) -> b.gather(out, input, dst, d));
    }

    @Override
    public void scatter(Tensor output, Tensor input, int src, Duration timeout) {
        OpContext ctx = ctx("scatter");
        checkHost(output, "output", ctx);
        checkRank(src, "src", ctx);
        if (rank == src) {
            checkHost(input, "input", ctx);
            checkSameType(output, input, ctx);
            checkNumel(input, sizeTimes(output.numel(), ctx), "input", ctx);
        }
        if (size == 1) {
            deadline(timeout, ctx);
            checkUsable(ctx);
            copyIfDistinct(output, input);
            return;
        }
        Tensor in = rank == src ? input : null;
        sync("scatter", bytes(output, in), timeout, (b, d) -> b.scatter(output, in, src, d));
    }

    private void validateReduceScatter(Tensor output, Tensor input, ReduceOp op, OpContext ctx) {
        checkHost(output, "output", ctx);
        checkHost(input, "input", ctx);
        checkSameType(output, input, ctx);
        checkReducible(output.dtype(), op, ctx);
        checkNumel(input, sizeTimes(output.numel(), ctx), "input", ctx);
    }

    @Override
    public void reduceScatter(Tensor output, Tensor input, ReduceOp op, Duration timeout) {
        validateReduceScatter(output, input, op, ctx("reduceScatter"));
        if (size == 1) {
            deadline(timeout, ctx("reduceScatter"));
            checkUsable(ctx("reduceScatter"));
            copyIfDistinct(output, input);
            return;
        }
        sync("reduceScatter", bytes(output, input), timeout, (b, d) -> b.reduceScatter(output, input, op, d));
    }

    @Override
    public Work<Void> reduceScatterAsync(Tensor output, Tensor input, ReduceOp op, Duration timeout) {
        validateReduceScatter(output, input, op, ctx("reduceScatter"));
        if (size == 1) {
            deadline(timeout, ctx("reduceScatter"));
            return local("reduceScatter", () -> copyIfDistinct(output, input));
        }
        return async("reduceScatter", bytes(output, input), timeout, new Tensor[] {output, input},
                (b, d) -> b.reduceScatter(output, input, op, d));
    }

    // ---------------------------------------------------------------- point to point

    private void validateP2p(Tensor tensor, int peer, int tag, String what, OpContext ctx) {
        checkHost(tensor, "tensor", ctx);
        checkPeer(peer, what, ctx);
        checkTag(tag, ctx);
    }

    @Override
    public void send(Tensor tensor, int dst, int tag, Duration timeout) {
        validateP2p(tensor, dst, tag, "dst", ctx("send"));
        sync("send", tensor.byteSize(), timeout, (b, d) -> b.send(tensor, dst, tag, d));
    }

    @Override
    public Work<Void> batchIsendIrecv(List<P2POp> ops, int tag, Duration timeout) {
        OpContext ctx = ctx("batchIsendIrecv");
        if (ops == null) {
            throw ctx.invalidArgument("ops is null");
        }
        List<P2POp> batch = List.copyOf(ops);
        for (P2POp op : batch) {
            validateP2p(op.tensor(), op.peer(), tag, op.kind() == P2POp.Kind.SEND ? "dst" : "src", ctx);
        }
        if (batch.isEmpty()) {
            deadline(timeout, ctx);
            return local("batchIsendIrecv", () -> { });
        }
        return async("batchIsendIrecv", batchBytes(batch), timeout, batch, (b, d) -> b.batchP2P(batch, tag, d));
    }

    @Override
    public Work<Void> sendAsync(Tensor tensor, int dst, int tag, Duration timeout) {
        validateP2p(tensor, dst, tag, "dst", ctx("send"));
        return async("send", tensor.byteSize(), timeout, tensor, (b, d) -> b.send(tensor, dst, tag, d));
    }

    @Override
    public void recv(Tensor tensor, int src, int tag, Duration timeout) {
        validateP2p(tensor, src, tag, "src", ctx("recv"));
        sync("recv", tensor.byteSize(), timeout, (b, d) -> b.recv(tensor, src, tag, d));
    }

    @Override
    public Work<Void> recvAsync(Tensor tensor, int src, int tag, Duration timeout) {
        validateP2p(tensor, src, tag, "src", ctx("recv"));
        return async("recv", tensor.byteSize(), timeout, tensor, (b, d) -> b.recv(tensor, src, tag, d));
    }

    // ---------------------------------------------------------------- objects

    private byte[] encode(Object value, OpContext ctx) {
        try {
            return codec.encode(value);
        } catch (IllegalArgumentException e) {
            throw ctx.invalidArgument(e.getMessage(), e);
        } catch (CommException e) { // a codec that reports an unencodable value as a CommException
            throw ctx.invalidArgument(e.detail(), e);
        } catch (RuntimeException e) {
            throw ctx.invalidArgument("cannot encode " + value.getClass().getName() + ": " + e, e);
        }
    }

    private <T> T decode(byte[] bytes, Class<T> type, int from, OpContext ctx) {
        try {
            return codec.decode(bytes, type);
        } catch (CommException e) {
            throw new ProtocolException(ctx, "object from rank " + from + ": " + e.detail(), e);
        } catch (RuntimeException e) {
            throw new ProtocolException(ctx, "object from rank " + from + " could not be decoded: " + e, e);
        }
    }

    private static <T> void checkType(Object value, Class<T> type, OpContext ctx) {
        Objects.requireNonNull(type, "type");
        if (value != null && !type.isInstance(value)) {
            throw ctx.invalidArgument("value of type " + value.getClass().getName() + " is not a " + type.getName());
        }
    }

    /**
     * An object operation's exchange of encoded bytes: recorded in the flight recorder and as a JFR event
     * like {@link #sync}, with the bytes {@code moved} says its result moved; a failure poisons the group.
     */
    private <R> R objectCall(OpContext ctx, Deadline d, Duration t, Supplier<R> call, ToLongFunction<R> moved) {
        String op = ctx.operation();
        Object event = OperationEvents.begin();
        RuntimeException failure = null;
        FlightRecorder.Group rec = recorder;
        long seq = rec != null ? rec.begin(op, false, startOf(d, t)) : 0;
        FaultInjector fi = faults;
        R result = null;
        try {
            if (fi != null) {
                seq = fi.before(op, seq);
            }
            enter(ctx, d);
            try {
                result = call.get();
                if (fi != null) {
                    fi.after(op, seq);
                }
            } catch (RuntimeException e) {
                throw fail(ctx, e);
            }
            return result;
        } catch (RuntimeException e) {
            failure = e;
            throw e;
        } finally {
            OperationEvents.end(event, name, rank, backendName, op, false, failure);
            if (rec != null) {
                rec.end(op, seq, failure == null, failure == null ? moved.applyAsLong(result) : 0);
            }
        }
    }

    private static long totalBytes(byte[][] parts) {
        long n = 0;
        for (byte[] b : parts) {
            n += b == null ? 0 : b.length;
        }
        return n;
    }

    @Override
    public <T> T broadcastObject(T value, int src, Class<T> type, Duration timeout) {
        OpContext ctx = ctx("broadcastObject");
        checkRank(src, "src", ctx);
        Objects.requireNonNull(type, "type");
        Deadline d = deadline(timeout, ctx);
        if (rank == src) {
            checkType(value, type, ctx);
        }
        if (size == 1) {
            checkUsable(ctx);
            return value;
        }
        byte[] enc = rank == src ? encode(value, ctx) : null;
        byte[] got = objectCall(ctx, d, timeout, () -> backend.broadcastBytes(enc, src, maxObjectBytes, d),
                b -> b == null ? 0 : b.length);
        return rank == src ? value : decode(got, type, src, ctx);
    }

    @Override
    public <T> List<T> allGatherObject(T value, Class<T> type, Duration timeout) {
        OpContext ctx = ctx("allGatherObject");
        Objects.requireNonNull(type, "type");
        Deadline d = deadline(timeout, ctx);
        checkType(value, type, ctx);
        if (size == 1) {
            checkUsable(ctx);
            return Collections.singletonList(value);
        }
        byte[] enc = encode(value, ctx);
        byte[][] all = objectCall(ctx, d, timeout, () -> backend.allGatherBytes(enc, rank, size, maxObjectBytes, d),
                DefaultProcessGroup::totalBytes);
        List<T> out = new ArrayList<>(size);
        for (int r = 0; r < size; r++) {
            out.add(r == rank ? value : decode(all[r], type, r, ctx));
        }
        return Collections.unmodifiableList(out);
    }

    @Override
    public <T> List<T> gatherObject(T value, int dst, Class<T> type, Duration timeout) {
        OpContext ctx = ctx("gatherObject");
        checkRank(dst, "dst", ctx);
        Objects.requireNonNull(type, "type");
        Deadline d = deadline(timeout, ctx);
        checkType(value, type, ctx);
        if (size == 1) {
            checkUsable(ctx);
            return Collections.singletonList(value);
        }
        byte[] enc = encode(value, ctx);
        byte[][] all = objectCall(ctx, d, timeout, () -> backend.gatherBytes(enc, dst, rank, size, maxObjectBytes, d),
                parts -> parts == null ? enc.length : totalBytes(parts));
        if (rank != dst) {
            return List.of();
        }
        List<T> out = new ArrayList<>(size);
        for (int r = 0; r < size; r++) {
            out.add(r == rank ? value : decode(all[r], type, r, ctx));
        }
        return Collections.unmodifiableList(out);
    }

    @Override
    public void sendObject(Object value, int dst, Duration timeout) {
        OpContext ctx = ctx("sendObject");
        checkPeer(dst, "dst", ctx);
        Deadline d = deadline(timeout, ctx);
        byte[] enc = encode(value, ctx);
        objectCall(ctx, d, timeout, () -> {
            backend.sendBytes(enc, dst, d);
            return enc;
        }, b -> b.length);
    }

    @Override
    public <T> T recvObject(int src, Class<T> type, Duration timeout) {
        OpContext ctx = ctx("recvObject");
        checkPeer(src, "src", ctx);
        Objects.requireNonNull(type, "type");
        Deadline d = deadline(timeout, ctx);
        byte[] got = objectCall(ctx, d, timeout, () -> backend.recvBytes(src, maxObjectBytes, d), b -> b.length);
        return decode(got, type, src, ctx);
    }

    // ---------------------------------------------------------------- lifecycle

    /**
     * {@inheritDoc}
     *
     * <p>The members that stay agree through the store the group was made with, then connect as a
     * group made by {@link io.jcomm.cpu.CpuGroups#create}, with the same options (see {@link GroupShrink}).
     */
    @Override
    public ProcessGroup shrink(List<Integer> excludedRanks, Duration timeout) {
        OpContext ctx = ctx("shrink");
        Deadline d = deadline(timeout, ctx);
        int[] excluded = GroupShrink.checkExcluded(excludedRanks, rank, size, ctx);
        if (successor == null) {
            throw new UnsupportedByBackendException(ctx, backendName, "shrink");
        }
        long incarnation = backend != null ? backend.incarnation() : 0;
        abort(ctx, "aborted: shrinking to generation " + (generation + 1) + " without rank(s) " + Arrays.toString(excluded));
        return GroupShrink.shrink(namespace, incarnation, generation, rank, globalRanks, excluded, successor, ctx, d);
    }

    @Override
    public void close() {
        abort(ctx("close"), "group closed");
    }

    /** Closes the group: later calls, and calls in progress, fail with {@link CommClosedException} saying {@code why}. */
    private void abort(OpContext ctx, String why) {
        if (closed) {
            return;
        }
        closed = true;
        poison.tripFirst(new CommClosedException(ctx, why));
        if (backend != null) {
            try {
                backend.close();
            } catch (RuntimeException ignored) {
                // close is best effort and idempotent
            }
        }
        synchronized (asyncLock) {
            if (asyncExecutor != null) {
                asyncExecutor.shutdownNow();
            }
        }
        for (CompletableWork<?> w : inFlight) {
            w.fail(new CommClosedException(w.context(), why + " before the operation completed"));
        }
    }
}
