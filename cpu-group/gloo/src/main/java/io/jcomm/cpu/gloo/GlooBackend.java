package io.jcomm.cpu.gloo;

import io.jcomm.api.Availability;
import io.jcomm.api.BackendException;
import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DType;
import io.jcomm.api.DebugLevel;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StoreException;
import io.jcomm.api.Tensor;
import io.jcomm.runtime.FailureLatch;
import io.jcomm.api.store.PrefixStore;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.gloo.internal.GlooLibrary;
import io.jcomm.cpu.gloo.internal.GlooNative;
import io.jcomm.cpu.gloo.internal.GlooNativeException;
import io.jcomm.cpu.gloo.internal.GlooStoreBridge;
import io.jcomm.cpu.gloo.internal.NativeHandle;
import io.jcomm.cpu.spi.CpuBackend;
import io.jcomm.cpu.spi.CpuBackendContext;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The {@code gloo} CPU backend: Debian's libgloo (tcp transport) through JNI, with the same
 * rendezvous, tags and algorithms as PyTorch 1.13's {@code ProcessGroupGloo}, so that a group may
 * mix Java ranks and PyTorch ranks (see {@link TorchGlooGroup}).
 *
 * <h2>Behaviour</h2>
 * <ul>
 *   <li>Rendezvous: for each device {@code d} in {@code [0, gloo.devices)}, a gloo full mesh through
 *       the group's store under the prefix {@code "<d>/"} (gloo's keys {@code rank_<r>} and
 *       {@code <r>}), bounded by {@link CpuBackendContext#timeout()}.</li>
 *   <li>Collective number {@code k} (counted from 0 per backend, barrier included) uses gloo tag
 *       {@code k} on context {@code k % devices}; send/recv use the caller's tag as the gloo slot
 *       and context {@code tag % devices} and do not advance the counter (torch 1.13's rules). Tags
 *       are unsigned 32-bit on the wire: negative tags (the group's internal ones, e.g.
 *       {@code CpuBackend.OBJECT_TAG}) map to slots a torch user cannot pick.</li>
 *   <li>Algorithms: gloo's ring all-reduce, binomial-tree broadcast, ring all-gather, allgatherv, alltoall(v),
 *       gather, scatter, barrier. Reduce-scatter is an all-reduce of a copy of the input of which
 *       each rank keeps its chunk (gloo 2022 has none). {@code F16}/{@code BF16} reductions run in
 *       float and round back to nearest even ({@code F16} in half precision, like PyTorch, with
 *       {@value #TORCH_HALF_OPTION}); {@code AVG} is a sum divided by the size (integers
 *       truncate toward zero); on {@code BOOL}, {@code SUM}/{@code MAX} are "or" and
 *       {@code PROD}/{@code MIN} are "and".</li>
 *   <li>Send is buffered: the payload is copied and posted, and a background thread waits for the
 *       receiver (gloo transmits only when the receiver has posted its receive), so sends never
 *       deadlock against receives posted in another order or after a collective. A delivery that
 *       fails or is not taken by the send's deadline poisons the backend; the next call reports it.
 *       Receive blocks until the message is in the tensor.</li>
 *   <li>Argument check ({@value #CHECK_ARGS_OPTION}, default {@code true}): before each collective
 *       every rank sends every other rank one fixed-size message on a slot of its own: a 32-byte
 *       description of its call (operation, dtype, count, root, reduce op) and up to 1 KiB of
 *       payload. A mismatch fails on every rank with {@link CollectiveMismatchException} before
 *       any gloo payload moves; send carries an 8-byte length header. Collectives whose payload
 *       fits inline are complete after this single exchange (each rank reduces the messages in
 *       rank order; a barrier is the exchange), larger ones then run gloo's algorithm. Without
 *       the check, ranks that disagree on sizes make libgloo abort the process (as in PyTorch).
 *       PyTorch ranks do not speak it: groups shared with PyTorch run without it. With the job's debug
 *       level at {@code detail} ({@code JCOMM_DEBUG=detail}, which reaches the backend as the group option
 *       {@value io.jcomm.cpu.CpuGroupOptions#DEBUG_OPTION}) the check is on even where
 *       {@value #CHECK_ARGS_OPTION} is {@code false}: debugging a job is not undone by a tuning option.</li>
 *   <li>Failures: a closed or reset connection is a {@link PeerFailureException} naming the peer
 *       when its address is known, or a {@link CommClosedException} when the peer closed the group
 *       cleanly (it says goodbye first, {@value #GOODBYE_OPTION}); a gloo timeout is a
 *       {@link CommTimeoutException}; after either,
 *       every connection of this rank is closed (so that peers waiting on it fail fast as well)
 *       and the backend is poisoned: later calls fail at once, with the first failure as cause.
 *       {@link #close()} from another thread makes a call in progress fail with
 *       {@link CommClosedException}; the native communicator is freed only after that call
 *       returned.</li>
 * </ul>
 *
 * <p>Not thread safe: one call at a time (like the {@link CpuBackend} contract says), except
 * {@link #close()}.
 */
public final class GlooBackend implements CpuBackend {

    /** The backend's name. */
    public static final String NAME = "gloo";

    /** Number of gloo contexts (tcp devices) per group, like torch's {@code GLOO_SOCKET_IFNAME=lo,lo}. */
    public static final String DEVICES_OPTION = "gloo.devices";
    public static final int DEVICES_DEFAULT = 1;
    /** Largest accepted {@value #DEVICES_OPTION}. */
    public static final int DEVICES_MAX = 16;
    /** Network interface the tcp devices bind to, e.g. {@code lo}; overrides the hostname. */
    public static final String IFNAME_OPTION = "gloo.ifname";
    /** Host name or address the tcp devices bind to; default {@link CpuBackendContext#hostname()}. */
    public static final String HOSTNAME_OPTION = "gloo.hostname";
    /**
     * {@code true}/{@code false} (default {@code true}): on {@link #close()} tell the peers it is a
     * clean close, so that they fail with {@link CommClosedException} rather than
     * {@link PeerFailureException}. Off in groups shared with PyTorch ranks.
     */
    public static final String GOODBYE_OPTION = "gloo.goodbye";
    public static final boolean GOODBYE_DEFAULT = true;

    /**
     * {@code true}/{@code false} (default {@code false}): reduce {@code F16} in half precision on
     * the wire, rounding at every step, exactly as PyTorch's gloo backend does, so that PyTorch
     * ranks can take part ({@link TorchGlooGroup} turns it on). By default {@code F16} is widened to
     * float, reduced, and rounded once (more accurate, not wire-compatible).
     */
    public static final String TORCH_HALF_OPTION = "gloo.torchHalf";

    /**
     * {@code true}/{@code false}: exchange a description of every call (and small payloads) before
     * running it; see the class documentation.
     */
    public static final String CHECK_ARGS_OPTION = "gloo.checkArgs";
    public static final boolean CHECK_ARGS_DEFAULT = true;

    /**
     * Nice value (0-19, default {@value #LOOP_NICE_DEFAULT}; 0 leaves it alone) given to gloo's
     * event-loop thread of each device. In this gloo version that thread spins while a message
     * waits for its receive to be posted; at the default priority it competes with the thread about
     * to post the receive, and on a machine with few cores every such race costs a scheduler slice
     * (2-4 ms stalls of collectives of 4 KiB-4 MiB, measured in docs/PERFORMANCE.md). At nice 19 the
     * posting thread preempts it; the loop still runs whenever the callers wait.
     */
    public static final String LOOP_NICE_OPTION = "gloo.loopNice";
    public static final int LOOP_NICE_DEFAULT = 19;

    /** Chunk size of {@link #broadcastBytes}. */
    private static final long OBJECT_CHUNK_BYTES = 4 << 20;

    /** How long {@link #close()} waits for buffered sends to be taken by their receivers. */
    private static final long FLUSH_WAIT_MILLIS = 2_000;

    /** How long {@link #close()} waits for a call in progress to return before leaving it to free the handle. */
    private static final long CLOSE_WAIT_MILLIS = 2_000;

    private final String group;
    private final int rank;
    private final int size;
    private final int devices;
    private final boolean checkArgs;
    private final boolean goodbye;
    private final NativeHandle handle;
    private final List<String> deviceNames;
    private int nextTag;
    private final FailureLatch failure = new FailureLatch();
    private volatile boolean closed;

    private GlooBackend(String group, int rank, int size, int devices, boolean checkArgs, boolean goodbye,
                        NativeHandle handle, List<String> deviceNames) {
        this.group = group;
        this.rank = rank;
        this.size = size;
        this.devices = devices;
        this.checkArgs = checkArgs;
        this.goodbye = goodbye;
        this.handle = handle;
        this.deviceNames = List.copyOf(deviceNames);
    }

    /** Whether libgloo and the JNI glue are loadable in this JVM (cached). */
    public static Availability availability() {
        return GlooLibrary.availability();
    }

    /**
     * Connects this rank's gloo contexts (collective over the group: every member calls it with the
     * same store prefix). Bounded by {@code context.timeout()}.
     *
     * @throws BackendException          if gloo is unavailable or an option is malformed
     * @throws IllegalArgumentException  if the group has fewer than 2 ranks
     * @throws CommTimeoutException      if the peers did not all show up in time
     * @throws PeerFailureException      if a connection failed
     */
    public static GlooBackend connect(CpuBackendContext context) {
        OpContext op = OpContext.of(context.groupName(), context.rank(), "connect");
        Availability a = GlooLibrary.availability();
        if (!a.available()) {
            throw new BackendException(op, "gloo backend unavailable: " + a.reason());
        }
        if (context.size() < 2) {
            throw op.invalidArgument("the gloo backend needs at least 2 ranks, got " + context.size());
        }
        GlooOptions options;
        try {
            options = GlooOptions.fromMap(context.options());
        } catch (IllegalArgumentException e) {
            throw new BackendException(op, e.getMessage(), e);
        }
        int devices = options.devices();
        boolean check = debugDetail(context) || options.checkArgs(); // parses the debug option in every case
        boolean goodbye = options.goodbye();
        boolean torchHalf = options.torchHalf();
        int loopNice = options.loopNice();
        String iface = options.ifname().orElse(null);
        String host = options.hostname().orElse(context.hostname());
        Deadline deadline = Deadline.after(context.timeout());
        long raw;
        try {
            raw = GlooNative.create(context.rank(), context.size(), devices, torchHalf);
        } catch (GlooNativeException e) {
            throw new BackendException(op, "gloo: " + e.getMessage(), e);
        }
        NativeHandle handle = new NativeHandle(raw);
        List<String> names = new ArrayList<>(devices);
        boolean ok = false;
        try (NativeHandle.Lease lease = handle.acquire()) {
            for (int d = 0; d < devices; d++) {
                GlooStoreBridge bridge = new GlooStoreBridge(
                        new PrefixStore(Integer.toString(d), context.store()), deadline, op);
                GlooNative.connect(lease.handle(), d, host, iface, bridge, Math.max(1, deadline.remainingMillis()),
                        goodbye, loopNice);
                names.add(GlooNative.describe(lease.handle(), d));
            }
            ok = true;
        } catch (GlooNativeException e) {
            throw translate(op, e, false);
        } catch (CommTimeoutException e) {
            throw new CommTimeoutException(op, "gloo rendezvous through the store timed out after "
                    + context.timeout().toMillis() + " ms: " + e.detail(), e);
        } catch (StoreException e) {
            throw new StoreException(op, "gloo rendezvous: store failed: " + e.detail(), e);
        } finally {
            if (!ok) {
                handle.close(false, CLOSE_WAIT_MILLIS, TimeUnit.MILLISECONDS);
            }
        }
        return new GlooBackend(context.groupName(), context.rank(), context.size(), devices, check, goodbye, handle,
                names);
    }

    @Override
    public String name() {
        return NAME;
    }

    public int rank() {
        return rank;
    }

    public int size() {
        return size;
    }

    /** Number of gloo contexts. */
    public int devices() {
        return devices;
    }

    /** Whether the group's {@value io.jcomm.cpu.CpuGroupOptions#DEBUG_OPTION} option asks for every check. */
    private static boolean debugDetail(CpuBackendContext context) {
        String v = context.options().get(CpuGroupOptions.DEBUG_OPTION);
        if (v == null || v.isBlank()) {
            return false;
        }
        try {
            return DebugLevel.parse(v) == DebugLevel.DETAIL;
        } catch (IllegalArgumentException e) {
            throw new BackendException(OpContext.of(context.groupName(), context.rank(), "connect"),
                    CpuGroupOptions.DEBUG_OPTION + " is " + e.getMessage(), e);
        }
    }

    /** Whether calls are checked across ranks before they run ({@value #CHECK_ARGS_OPTION}). */
    public boolean checksArguments() {
        return checkArgs;
    }

    /** gloo's description of each device and the address of each connected peer (diagnostics). */
    public List<String> deviceNames() {
        return deviceNames;
    }

    /** The tag the next collective will use (torch's collective counter). */
    public int nextTag() {
        return nextTag;
    }

    /** True once a call failed or the backend was closed. */
    public boolean isPoisoned() {
        return failure.isTripped() || closed;
    }

    // ---- operations ----

    @Override
    public void barrier(Deadline deadline) {
        final String op = "barrier";
        int tag = takeTag();
        try (NativeHandle.Lease l = begin(op)) {
            GlooNative.barrier(l.handle(), device(tag), tag, millis(deadline, op), checkArgs);
        } catch (GlooNativeException e) {
            throw fail(op, e);
        }
    }

    @Override
    public void broadcast(Tensor tensor, int src, Deadline deadline) {
        final String op = "broadcast";
        host(tensor, op);
        rankArg(src, "src", op);
        int tag = takeTag();
        try (NativeHandle.Lease l = begin(op)) {
            GlooNative.broadcast(l.handle(), device(tag), tag, millis(deadline, op), checkArgs,
                    tensor.buffer(), tensor.byteSize(), tensor.dtype().code(), src);
        } catch (GlooNativeException e) {
            throw fail(op, e);
        }
    }

    @Override
    public void allReduce(Tensor tensor, ReduceOp reduceOp, Deadline deadline) {
        final String op = "allReduce";
        host(tensor, op);
        reduction(tensor.dtype(), reduceOp, op);
        int tag = takeTag();
        try (NativeHandle.Lease l = begin(op)) {
            GlooNative.allReduce(l.handle(), device(tag), tag, millis(deadline, op), checkArgs,
                    tensor.buffer(), tensor.numel(), tensor.dtype().code(), reduceOp.code());
        } catch (GlooNativeException e) {
            throw fail(op, e);
        }
    }

    @Override
    public void allGather(Tensor output, Tensor input, Deadline deadline) {
        final String op = "allGather";
        host(output, op);
        host(input, op);
        sameDType(output, input, op);
        if (output.numel() != input.numel() * size) {
            throw ctx(op).invalidArgument("output has " + output.numel() + " elements, expected size "
                    + size + " x input " + input.numel());
        }
        int tag = takeTag();
        try (NativeHandle.Lease l = begin(op)) {
            GlooNative.allGather(l.handle(), device(tag), tag, millis(deadline, op), checkArgs,
                    input.buffer(), output.buffer(), input.byteSize(), input.dtype().code());
        } catch (GlooNativeException e) {
            throw fail(op, e);
        }
    }

    @Override
    public void allGatherV(Tensor output, Tensor input, long[] counts, Deadline deadline) {
        final String op = "allGatherV";
        host(output, op);
        host(input, op);
        sameDType(output, input, op);
        long[] bytes = byteCounts(counts, output, "output", op);
        if (input.numel() != counts[rank]) {
            throw ctx(op).invalidArgument("input has " + input.numel() + " elements, counts[" + rank + "] = "
                    + counts[rank]);
        }
        int tag = takeTag();
        try (NativeHandle.Lease l = begin(op)) {
            GlooNative.allGatherV(l.handle(), device(tag), tag, millis(deadline, op), checkArgs,
                    input.buffer(), output.buffer(), bytes, input.dtype().code());
        } catch (GlooNativeException e) {
            throw fail(op, e);
        }
    }

    @Override
    public void allToAll(Tensor output, Tensor input, Deadline deadline) {
        final String op = "allToAll";
        host(output, op);
        host(input, op);
        sameDType(output, input, op);
        if (input.numel() % size != 0 || output.numel() != input.numel()) {
            throw ctx(op).invalidArgument("input has " + input.numel() + " elements and output "
                    + output.numel() + ": need equal sizes, a multiple of " + size);
        }
        int tag = takeTag();
        try (NativeHandle.Lease l = begin(op)) {
            GlooNative.allToAll(l.handle(), device(tag), tag, millis(deadline, op), checkArgs,
                    input.buffer(), output.buffer(), input.byteSize(), input.dtype().code());
        } catch (GlooNativeException e) {
            throw fail(op, e);
        }
    }

    @Override
    public void allToAllV(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts, Deadline deadline) {
        final String op = "allToAllV";
        host(output, op);
        host(input, op);
        sameDType(output, input, op);
        long[] inBytes = byteCounts(inputCounts, input, "input", op);
        long[] outBytes = byteCounts(outputCounts, output, "output", op);
        int tag = takeTag();
        try (NativeHandle.Lease l = begin(op)) {
            GlooNative.allToAllV(l.handle(), device(tag), tag, millis(deadline, op), checkArgs,
                    input.buffer(), output.buffer(), inBytes, outBytes, input.dtype().code());
        } catch (GlooNativeException e) {
            throw fail(op, e);
        }
    }

    /** One non-negative count per rank summing to {@code t}'s elements, as bytes. */
    private long[] byteCounts(long[] counts, Tensor t, String what, String op) {
        if (counts == null || counts.length != size) {
            throw ctx(op).invalidArgument("need " + size + " " + what + " counts, got "
                    + (counts == null ? "none" : Integer.toString(counts.length)));
        }
        long[] bytes = new long[size];
        long total = 0;
        int es = t.dtype().byteSize();
        for (int r = 0; r < size; r++) {
            if (counts[r] < 0) {
                throw ctx(op).invalidArgument("negative " + what + " count " + counts[r] + " for rank " + r);
            }
            try {
                total = Math.addExact(total, counts[r]);
                bytes[r] = Math.multiplyExact(counts[r], (long) es);
            } catch (ArithmeticException e) {
                throw ctx(op).invalidArgument(what + " counts overflow");
            }
        }
        if (t.numel() != total) {
            throw ctx(op).invalidArgument(what + " has " + t.numel() + " elements, its counts sum to " + total);
        }
        return bytes;
    }

    @Override
    public void gather(Tensor output, Tensor input, int dst, Deadline deadline) {
        final String op = "gather";
        host(input, op);
        rankArg(dst, "dst", op);
        if (rank == dst) {
            if (output == null) {
                throw ctx(op).invalidArgument("the destination rank needs an output tensor");
            }
            host(output, op);
            sameDType(output, input, op);
            if (output.numel() != input.numel() * size) {
                throw ctx(op).invalidArgument("output has " + output.numel() + " elements, expected size "
                        + size + " x input " + input.numel());
            }
        }
        int tag = takeTag();
        try (NativeHandle.Lease l = begin(op)) {
            GlooNative.gather(l.handle(), device(tag), tag, millis(deadline, op), checkArgs, input.buffer(),
                    rank == dst ? output.buffer() : null, input.byteSize(), input.dtype().code(), dst);
        } catch (GlooNativeException e) {
            throw fail(op, e);
        }
    }

    @Override
    public void scatter(Tensor output, Tensor input, int src, Deadline deadline) {
        final String op = "scatter";
        host(output, op);
        rankArg(src, "src", op);
        if (rank == src) {
            if (input == null) {
                throw ctx(op).invalidArgument("the source rank needs an input tensor");
            }
            host(input, op);
            sameDType(output, input, op);
            if (input.numel() != output.numel() * size) {
                throw ctx(op).invalidArgument("input has " + input.numel() + " elements, expected size "
                        + size + " x output " + output.numel());
            }
        }
        int tag = takeTag();
        try (NativeHandle.Lease l = begin(op)) {
            GlooNative.scatter(l.handle(), device(tag), tag, millis(deadline, op), checkArgs,
                    rank == src ? input.buffer() : null, output.buffer(), output.byteSize(), output.dtype().code(), src);
        } catch (GlooNativeException e) {
            throw fail(op, e);
        }
    }

    @Override
    public void reduceScatter(Tensor output, Tensor input, ReduceOp reduceOp, Deadline deadline) {
        final String op = "reduceScatter";
        host(output, op);
        host(input, op);
        sameDType(output, input, op);
        reduction(input.dtype(), reduceOp, op);
        if (input.numel() != output.numel() * size) {
            throw ctx(op).invalidArgument("input has " + input.numel() + " elements, expected size "
                    + size + " x output " + output.numel());
        }
        int tag = takeTag();
        try (NativeHandle.Lease l = begin(op)) {
            GlooNative.reduceScatter(l.handle(), device(tag), tag, millis(deadline, op), checkArgs,
                    input.buffer(), output.buffer(), output.numel(), output.dtype().code(), reduceOp.code());
        } catch (GlooNativeException e) {
            throw fail(op, e);
        }
    }

    /**
     * Buffered send: copies the tensor, posts it and returns without waiting for the receiver (so
     * that sends never deadlock against receives in another order). The receiver must take it
     * within {@code deadline}; a delivery failure poisons the backend and is reported by the next
     * call. gloo transmits the payload only when the receiver has posted its receive.
     */
    @Override
    public void send(Tensor tensor, int dst, int tag, Deadline deadline) {
        final String op = "send";
        host(tensor, op);
        peerArg(dst, "dst", op);
        try (NativeHandle.Lease l = begin(op)) {
            GlooNative.send(l.handle(), device(tag), tag, millis(deadline, op), checkArgs,
                    tensor.buffer(), tensor.byteSize(), dst);
        } catch (GlooNativeException e) {
            throw fail(op, e);
        }
    }

    @Override
    public void recv(Tensor tensor, int src, int tag, Deadline deadline) {
        final String op = "recv";
        host(tensor, op);
        peerArg(src, "src", op);
        try (NativeHandle.Lease l = begin(op)) {
            GlooNative.recv(l.handle(), device(tag), tag, millis(deadline, op), checkArgs,
                    tensor.buffer(), tensor.byteSize(), src);
        } catch (GlooNativeException e) {
            throw fail(op, e);
        }
    }

    /**
     * Like the default (a length broadcast, then the payload), but the payload travels in chunks of
     * at most 4 MiB, so that a rank that rejects an oversized payload still takes part without
     * allocating it (gloo's broadcast only completes at the root when every receiver took the
     * data): it drains the chunks through one bounded buffer, then fails with
     * {@link ProtocolException}. Every rank computes the same chunk count from the broadcast length.
     */
    @Override
    public byte[] broadcastBytes(byte[] payload, int src, int maxBytes, Deadline deadline) {
        boolean root = payload != null;
        Tensor len = Tensor.allocate(DType.I64, 1);
        if (root) {
            len.setLong(0, payload.length);
        }
        broadcast(len, src, deadline);
        long n = len.getLong(0);
        if (n < 0 || n > Integer.MAX_VALUE) {
            // every rank saw the same length and rejects it here: nothing else is sent
            CpuBackend.checkedLength(n, Integer.MAX_VALUE, src);
        }
        boolean keep = root || n <= maxBytes;
        Tensor data = root ? Tensor.ofBytes(payload) : keep ? Tensor.allocate(DType.U8, n) : null;
        Tensor drain = keep ? null : Tensor.allocate(DType.U8, Math.min(n, OBJECT_CHUNK_BYTES));
        for (long off = 0; off < n; off += OBJECT_CHUNK_BYTES) {
            long c = Math.min(OBJECT_CHUNK_BYTES, n - off);
            broadcast(keep ? data.flatSlice(off, c) : drain.flatSlice(0, c), src, deadline);
        }
        if (!keep) {
            CpuBackend.checkedLength(n, maxBytes, src); // throws
        }
        return root ? payload : data.toByteArray();
    }

    /**
     * Closes every connection and frees the native communicator. Buffered sends not yet taken by
     * their receivers get up to 2 s to be delivered first. A call in progress on another thread
     * fails with {@link CommClosedException}; the communicator is freed when it has returned (this
     * method waits up to 2 s for that). Idempotent.
     */
    @Override
    public void close() {
        if (!closed && !failure.isTripped()) {
            // Buffered sends are delivered only once their receivers ask for them: give them a moment.
            NativeHandle.Lease l = handle.acquire();
            if (l != null) {
                try (l) {
                    GlooNative.flush(l.handle(), FLUSH_WAIT_MILLIS);
                } catch (GlooNativeException e) {
                    // closing anyway
                }
            }
        }
        boolean clean = !closed && !failure.isTripped();
        closed = true;
        handle.close(goodbye && clean, CLOSE_WAIT_MILLIS, TimeUnit.MILLISECONDS);
    }

    @Override
    public String toString() {
        return "GlooBackend(group=" + group + ", rank=" + rank + "/" + size + ", devices=" + deviceNames
                + ", checkArgs=" + checkArgs + (isPoisoned() ? ", poisoned" : "") + ")";
    }

    // ---- helpers ----

    private OpContext ctx(String op) {
        return OpContext.of(group, rank, op);
    }

    private int takeTag() {
        return nextTag++; // wraps like torch's uint32 counter
    }

    private int device(int tag) {
        return Integer.remainderUnsigned(tag, devices);
    }

    private NativeHandle.Lease begin(String op) {
        failure.rethrowAs(ctx(op), "group failed earlier");
        NativeHandle.Lease l = closed ? null : handle.acquire();
        if (l == null) {
            throw new CommClosedException(ctx(op), "gloo backend is closed");
        }
        return l;
    }

    private long millis(Deadline deadline, String op) {
        if (deadline.isExpired()) {
            // The other ranks will run this collective: the tag sequence is broken from here on.
            CommTimeoutException e = new CommTimeoutException(ctx(op), "deadline passed before the call started");
            throw failure.trip(e);
        }
        return Math.max(1, deadline.remainingMillis());
    }

    private CommException fail(String op, GlooNativeException e) {
        return failure.trip(translate(ctx(op), e, closed));
    }

    private static CommException translate(OpContext c, GlooNativeException e, boolean closed) {
        String m = e.getMessage();
        if (closed) {
            return new CommClosedException(c, "gloo backend closed during the call: " + m, e);
        }
        if (e.kind() == GlooNativeException.KIND_CLOSED) {
            return new CommClosedException(c, "peer rank " + (e.peerRank() < 0 ? "?" : Integer.toString(e.peerRank()))
                    + " closed the group: " + m, e);
        }
        switch (e.kind()) {
            case GlooNativeException.KIND_IO:
                return new PeerFailureException(c, e.peerRank(), "gloo connection failed: " + m, e);
            case GlooNativeException.KIND_TIMEOUT:
                return new CommTimeoutException(c, "gloo timed out: " + m, e);
            case GlooNativeException.KIND_MISMATCH:
                return new CollectiveMismatchException(c, m, e);
            case GlooNativeException.KIND_ARGUMENT:
                return new BackendException(c, "gloo rejected an argument: " + m, e);
            case GlooNativeException.KIND_ENFORCE:
                return new BackendException(c, "gloo enforce failed: " + m, e);
            default:
                return new BackendException(c, "gloo failed: " + m, e);
        }
    }

    private void host(Tensor t, String op) {
        if (t == null) {
            throw ctx(op).invalidArgument("tensor is null");
        }
        if (!t.isHost()) {
            throw ctx(op).invalidArgument("the gloo backend needs host tensors, got " + t);
        }
    }

    private void sameDType(Tensor a, Tensor b, String op) {
        if (a.dtype() != b.dtype()) {
            throw ctx(op).invalidArgument("dtype mismatch: " + a.dtype().shortName() + " vs "
                    + b.dtype().shortName());
        }
    }

    private void reduction(DType dtype, ReduceOp reduceOp, String op) {
        if (reduceOp == null) {
            throw ctx(op).invalidArgument("reduce op is null");
        }
        if (dtype == DType.BOOL && reduceOp == ReduceOp.AVG) {
            throw ctx(op).invalidArgument("AVG is not defined for bool tensors");
        }
    }

    private void rankArg(int r, String what, String op) {
        if (r < 0 || r >= size) {
            throw ctx(op).invalidArgument(what + " rank " + r + " is not in [0, " + size + ")");
        }
    }

    private void peerArg(int r, String what, String op) {
        rankArg(r, what, op);
        if (r == rank) {
            throw ctx(op).invalidArgument(what + " rank " + r + " is this rank");
        }
    }
}
