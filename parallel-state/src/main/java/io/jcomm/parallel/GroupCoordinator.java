package io.jcomm.parallel;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.DType;
import io.jcomm.api.Deadline;
import io.jcomm.api.Device;
import io.jcomm.api.ObjectCodec;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.runtime.jfr.OperationEvents;
import io.jcomm.runtime.mem.ReceivePool;
import io.jcomm.runtime.recorder.FlightRecorder;
import io.jcomm.api.ray.TensorAllocator;
import io.jcomm.api.work.CompletableWork;
import io.jcomm.api.work.Work;
import io.jcomm.mq.AeronMedia;
import io.jcomm.mq.MessageQueue;
import io.jcomm.parallel.internal.AllWork;
import io.jcomm.parallel.internal.CollectiveFingerprint;
import io.jcomm.parallel.internal.TensorDictCodec;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import org.agrona.CloseHelper;

/**
 * One parallel dimension of a job (vLLM's {@code GroupCoordinator}): a CPU group (control plane), a
 * device communicator (data plane) and, for TP groups, a shared-memory broadcaster, behind one
 * object that routes every call to the right one.
 *
 * <h2>Ranks</h2>
 * {@link #ranks()} are the members' global ranks in group order. {@code src}, {@code dst} and peer
 * arguments of every method are <em>group-local</em> ({@code [0, worldSize())}). The rank helpers
 * {@link #firstRank()}, {@link #lastRank()}, {@link #nextRank()} and {@link #prevRank()} return
 * <em>global</em> ranks, as vLLM's do; next and previous wrap around.
 *
 * <h2>Argument order</h2>
 * A method that fills a given tensor takes the <b>output first</b>:
 * {@link #allReduce(Tensor, Tensor, ReduceOp) allReduce(output, input, op)},
 * {@link #allGather(Tensor, Tensor, int) allGather(output, input, dim)},
 * {@link #reduceScatter(Tensor, Tensor, ReduceOp, int) reduceScatter(output, input, op, dim)}: the
 * order of {@link ProcessGroup}, {@link DeviceCommunicator}, torch.distributed
 * ({@code all_gather_into_tensor(output, input)}) and vLLM's {@code PyNcclCommunicator}
 * ({@code all_gather(output_tensor, input_tensor)}). Both arguments are tensors, so a swapped pair
 * would compile; one order across jcomm keeps a call moved between layers right. The forms that
 * return a new tensor take only the input ({@link #allGather(Tensor, int)},
 * {@link #reduceScatter(Tensor, int)}, {@link #gather}, {@link #recv(long[], DType)}).
 *
 * <h2>Routing</h2>
 * <ul>
 *   <li>Tensor collectives and point-to-point go by the tensor's device: host tensors through a
 *       host communicator over the CPU group, tensors on the group's device through the device
 *       communicator (NCCL for CUDA). For a CPU job both are the same object.</li>
 *   <li>{@link #barrier()} always runs on the CPU side (never on the device): through shared memory
 *       when every member is on one host, else over the CPU group.</li>
 *   <li>{@link #broadcastObject} goes through the broadcaster when the group has one and the source
 *       is its writer (group rank 0); else through shared memory when every member is on one host
 *       and the encoded object fits; else over the CPU group. A broadcaster made in the background
 *       after the group ({@link ParallelStateOptions#broadcasterInBackground()}) takes over at a
 *       point the writer chooses: until then the writer's broadcasts carry one extra byte, and the
 *       first one sent once the writer's queue is ready tells every member to use its queue from the
 *       next broadcast on ({@link #broadcastsThroughQueue()}). No broadcast is lost or reordered.</li>
 *   <li>Objects and tensor-dict metadata are encoded with the job's registered {@link ObjectCodec};
 *       nothing uses Java serialization.</li>
 * </ul>
 *
 * <h2>Mixture of experts</h2>
 * {@link #dispatch} and {@link #combine} move MoE tokens to the ranks of their experts and the
 * results back through the group's {@link All2AllManager} (one per {@link ParallelState}, chosen by
 * {@link ParallelStateOptions#all2allBackend()}). They are meant for the EP group
 * ({@link ParallelState#ep()}), whose ranks hold the experts in contiguous blocks, and move host
 * tensors over the CPU group.
 *
 * <h2>Mismatch detection</h2>
 * With {@link ParallelStateOptions#debugChecks()} ({@code JCOMM_DEBUG=detail}), every collective on
 * a device tensor (all-reduce, all-gather, reduce-scatter, gather, broadcast) first all-gathers a
 * fingerprint of the call over the CPU group ({@link CollectiveFingerprint}: operation, dtype, shape,
 * reduce op, dimension, root, and the group's count of device collectives); when members disagree,
 * every member throws {@link io.jcomm.api.CollectiveMismatchException} naming its call and another
 * member's, and the device communicator is not called. {@link #broadcastTensorDict} compares its
 * call (source) before the metadata moves and the metadata each member received before any tensor
 * moves. A device send (also of a tensor-dict tensor) first sends its fingerprint (dtype, shape, tag and
 * the count of device sends to that peer) to the receiver as a small buffered CPU message, and the
 * receiver compares it with its call before the device receive: a mismatch fails the receiver, naming
 * both calls and ranks (the sender's call has returned). Host tensors are checked by the CPU backend
 * itself (tcp's headers, gloo's argument check). Off by default: then the cost is one null check per
 * device call.
 *
 * <h2>World size 1</h2>
 * Collectives return their input at once (no copy), barrier and object broadcast return at once;
 * point-to-point calls fail with {@link IllegalArgumentException} (there is no peer).
 *
 * <h2>Threads and failures</h2>
 * A coordinator is driven by one application thread at a time, like a torch group. Every blocking
 * call is bounded by the job's timeout; failures are {@link CommException}s naming the group, this
 * rank and the operation. A call with invalid arguments (a rank out of range, a tensor on a device
 * the group does not serve, shapes, dtypes or sizes that do not fit, a value the codec cannot encode)
 * throws {@link IllegalArgumentException} on the calling rank before anything is sent, and leaves the
 * group usable; a device tensor to allocate without a configured device allocator is an
 * {@link IllegalStateException}. Both name the group, rank and operation too, and neither is a
 * {@code CommException}: a recovery that catches those does not start for a programming error.
 * {@link #destroy()} may be called from any thread and is idempotent.
 */
public final class GroupCoordinator implements AutoCloseable {

    /** Tag of tensor-dict tensors moved over the CPU group (apart from user tags). */
    static final int TENSOR_DICT_TAG = 0x54440001;
    /** First byte of a writer's broadcast before its late broadcaster took over: keep going this way. */
    private static final byte STAY = 0;
    /** ... or: the writer's queue is ready, the next broadcasts go through it. */
    private static final byte SWITCH = 1;

    private final String name;
    private final List<Integer> ranks;
    private final int rank;
    private final int rankInGroup;
    private final ProcessGroup cpu;
    private final DeviceCommunicator hostComm;
    private final DeviceCommunicator deviceComm;
    private final Device device;
    private final StreamHandle stream;
    private final MessageQueue mq;
    private final AeronMedia ownedMedia;
    private final boolean singleHost;
    private final TensorAllocator deviceAllocator;
    private final Duration timeout;
    private final ObjectCodec codec;
    private final String transportName;
    private final All2AllManager all2all;
    /** Cross-rank check of device collectives; null when off (the default). */
    private final CollectiveFingerprint fingerprint;
    /** The broadcaster when made after the group (null when made with it, or when there is none). */
    private volatile LateBroadcaster late;
    /** {@link #late}'s queue once the writer switched to it (the application thread's view). */
    private MessageQueue switched;
    private volatile boolean destroyed;
    private boolean released; // guarded by this
    /** {@link #gatherScratch}'s buffer (the application thread's). */
    private Tensor scratch;

    GroupCoordinator(String name, List<Integer> ranks, int rank, ProcessGroup cpu, DeviceCommunicator hostComm,
                     DeviceCommunicator deviceComm, Device device, MessageQueue mq, AeronMedia ownedMedia,
                     boolean singleHost, TensorAllocator deviceAllocator, Duration timeout, String transportName,
                     All2AllManager all2all, boolean debugChecks) {
        this.name = Objects.requireNonNull(name, "name");
        this.ranks = List.copyOf(ranks);
        this.rank = rank;
        this.rankInGroup = this.ranks.indexOf(rank);
        if (rankInGroup < 0) {
            throw new IllegalArgumentException("rank " + rank + " is not a member of " + name + " " + ranks);
        }
        this.cpu = Objects.requireNonNull(cpu, "cpu");
        this.hostComm = hostComm;
        this.deviceComm = deviceComm;
        this.device = Objects.requireNonNull(device, "device");
        this.stream = StreamHandle.defaultStream(device);
        this.mq = mq;
        this.ownedMedia = ownedMedia;
        this.singleHost = singleHost;
        this.deviceAllocator = deviceAllocator;
        this.timeout = Objects.requireNonNull(timeout, "timeout");
        this.codec = cpu.codec();
        this.transportName = Objects.requireNonNull(transportName, "transportName");
        this.all2all = Objects.requireNonNull(all2all, "all2all");
        this.fingerprint = debugChecks && this.ranks.size() > 1
                ? new CollectiveFingerprint(cpu, name, this.ranks, timeout) : null;
        if (this.ranks.size() > 1 && (hostComm == null || deviceComm == null)) {
            throw new IllegalArgumentException("a group of " + this.ranks.size() + " ranks needs communicators");
        }
    }

    // ------------------------------------------------------------------ identity and rank helpers

    /** The unique name, e.g. {@code tp:0}. */
    public String name() {
        return name;
    }

    /** Global ranks of the members, in group order. */
    public List<Integer> ranks() {
        return ranks;
    }

    /** This process's global rank. */
    public int rank() {
        return rank;
    }

    /** This process's rank in the group. */
    public int rankInGroup() {
        return rankInGroup;
    }

    /** Number of members. */
    public int worldSize() {
        return ranks.size();
    }

    /** Global rank of the first member. */
    public int firstRank() {
        return ranks.get(0);
    }

    /** Global rank of the last member. */
    public int lastRank() {
        return ranks.get(ranks.size() - 1);
    }

    public boolean isFirstRank() {
        return rank == firstRank();
    }

    public boolean isLastRank() {
        return rank == lastRank();
    }

    /** Global rank of the member after this one (wrapping around). */
    public int nextRank() {
        return ranks.get(nextInGroup());
    }

    /** Global rank of the member before this one (wrapping around). */
    public int prevRank() {
        return ranks.get(prevInGroup());
    }

    /** Group rank of the member after this one: the default destination of sends. */
    public int nextInGroup() {
        return (rankInGroup + 1) % ranks.size();
    }

    /** Group rank of the member before this one: the default source of receives. */
    public int prevInGroup() {
        return (rankInGroup - 1 + ranks.size()) % ranks.size();
    }

    /** The CPU group (control plane). */
    public ProcessGroup cpuGroup() {
        return cpu;
    }

    /** The device communicator (data plane); empty when the group has one member. */
    public Optional<DeviceCommunicator> deviceCommunicator() {
        return Optional.ofNullable(deviceComm);
    }

    /**
     * The data plane's provider name ({@code cpu}, {@code cuda:nccl}, ...), also for a group of one
     * member, which needs no communicator.
     */
    public String transportName() {
        return transportName;
    }

    /**
     * The broadcaster, once this rank has it; present only in groups created with one (TP groups by
     * default). A broadcaster made after the group ({@link ParallelStateOptions#broadcasterInBackground()})
     * is empty here until it is ready; see {@link #awaitMessageQueue}.
     */
    public Optional<MessageQueue> messageQueue() {
        LateBroadcaster l = late;
        return Optional.ofNullable(mq != null ? mq : l != null ? l.now() : null);
    }

    /**
     * The broadcaster, waiting up to {@code timeout} for one that is being made in the background;
     * empty if the group has none, or if making it failed (broadcasts then stay on the CPU group).
     */
    public Optional<MessageQueue> awaitMessageQueue(Duration timeout) {
        LateBroadcaster l = late;
        return Optional.ofNullable(mq != null ? mq : l != null ? l.await(timeout) : null);
    }

    /** True when the group has a broadcaster, ready or still being made. */
    public boolean hasBroadcaster() {
        return mq != null || late != null;
    }

    /**
     * True when the writer's broadcasts go through the broadcaster on this rank: one made with the
     * group, or one made in the background once the writer's first broadcast after it was ready
     * told every rank to switch.
     */
    public boolean broadcastsThroughQueue() {
        return mq != null || switched != null;
    }

    /** Hands this group a broadcaster being made in the background (before the group is published). */
    void attachLater(LateBroadcaster b) {
        if (mq != null || late != null) {
            throw new IllegalStateException("group " + name + " already has a broadcaster");
        }
        late = b;
        if (destroyed) {
            b.close();
        }
    }

    /**
     * True when every member is on this host (their host ids are equal): the CPU group then carries barrier,
     * small broadcasts and collectives through shared memory where its backend has a same-host path (tcp does).
     */
    public boolean isNodeLocal() {
        return singleHost;
    }

    /** This rank's device. */
    public Device device() {
        return device;
    }

    /** The stream device operations are enqueued on (the device's default stream). */
    public StreamHandle stream() {
        return stream;
    }

    public Duration timeout() {
        return timeout;
    }

    public ObjectCodec codec() {
        return codec;
    }

    public boolean isDestroyed() {
        return destroyed;
    }

    private OpContext ctx(String op) {
        return OpContext.of(name, rankInGroup, op);
    }

    private void checkOpen(String op) {
        if (destroyed) {
            throw new CommClosedException(ctx(op), "group destroyed");
        }
    }

    private DeviceCommunicator commFor(Tensor t, String op) {
        Objects.requireNonNull(t, "tensor");
        if (t.device().isCpu()) {
            return hostComm;
        }
        if (deviceComm != null && t.device().type().equals(deviceComm.device().type())) {
            return deviceComm;
        }
        throw ctx(op).invalidArgument("tensor on " + t.device() + ", but group " + name
                + " moves cpu and " + device + " tensors");
    }

    /**
     * {@link #commFor}, after comparing the call across members when it goes to the device
     * communicator and the check is on.
     */
    private DeviceCommunicator checked(Tensor t, String op, CollectiveFingerprint.Op fp, ReduceOp reduce, int dim,
                                       int root) {
        DeviceCommunicator c = commFor(t, op);
        if (fingerprint != null && c != hostComm) {
            fingerprint.check(fp, t, reduce, dim, root);
        }
        return c;
    }

    /** Whether device collectives are compared across members first ({@link ParallelStateOptions#debugChecks()}). */
    public boolean checksCollectives() {
        return fingerprint != null;
    }

    private StreamHandle streamFor(Tensor t) {
        return t.device().isCpu() ? StreamHandle.HOST : stream;
    }

    private void requireRank(String op, String role, int r) {
        if (r < 0 || r >= ranks.size()) {
            throw ctx(op).invalidArgument(role + " " + r + " not in [0, " + ranks.size() + ")");
        }
    }

    private void requirePeer(String op, String role, int r) {
        if (ranks.size() == 1) {
            throw ctx(op).invalidArgument("group " + name + " has one member: there is no peer to " + op + " with");
        }
        requireRank(op, role, r);
        if (r == rankInGroup) {
            throw ctx(op).invalidArgument(role + " is this rank");
        }
    }

    /** Allocates a tensor like vLLM's {@code torch.empty(shape, dtype, device)}. */
    /**
     * A tensor the operation fills completely and hands to the caller (a receive's destination, a gathered
     * output). Host tensors come from the receive pool: recycled once the caller no longer reaches them, and
     * bounded ({@link ReceivePool}), so that a loop of plain receives keeps its memory flat.
     */
    private Tensor allocate(String op, String deviceType, DType dtype, long[] shape) {
        if (deviceType.equals("cpu")) {
            return ReceivePool.shared().allocate(dtype, shape);
        }
        if (!deviceType.equals(device.type())) {
            // only a peer's tensor-dict metadata names another device type (a receive names this rank's)
            throw new ProtocolException(ctx(op), "cannot place a " + deviceType + " tensor: this rank's device is " + device);
        }
        if (deviceAllocator == null) {
            throw ctx(op).invalidState("no device allocator configured for " + device
                    + " tensors (ParallelStateOptions.deviceAllocator)");
        }
        Tensor t = deviceAllocator.allocate(shape, dtype);
        if (!Arrays.equals(t.shape(), shape) || t.dtype() != dtype || !t.device().type().equals(deviceType)) {
            throw ctx(op).invalidState("the device allocator returned " + t + " for " + dtype + Arrays.toString(shape));
        }
        return t;
    }

    private Tensor allocateLike(String op, Tensor like, long[] shape) {
        return allocate(op, like.device().type(), like.dtype(), shape);
    }

    // ------------------------------------------------------------------ tensor collectives

    /** In-place sum all-reduce; returns {@code tensor}. */
    public Tensor allReduce(Tensor tensor) {
        return allReduce(tensor, ReduceOp.SUM);
    }

    /** In-place all-reduce; returns {@code tensor}. */
    public Tensor allReduce(Tensor tensor, ReduceOp op) {
        checkOpen("allReduce");
        if (ranks.size() == 1) {
            return tensor;
        }
        checked(tensor, "allReduce", CollectiveFingerprint.Op.ALL_REDUCE, op, -1, -1)
                .allReduce(tensor, tensor, op, streamFor(tensor));
        return tensor;
    }

    /** {@code output = reduce(input)}; {@code output} must match {@code input} (output first, as everywhere). */
    public void allReduce(Tensor output, Tensor input, ReduceOp op) {
        checkOpen("allReduce");
        if (ranks.size() == 1) {
            if (input != output) {
                commFor(input, "allReduce"); // device check only
                if (input.isHost()) {
                    output.copyFrom(input);
                    return;
                }
                throw ctx("allReduce").invalidArgument("out-of-place device copy in a group of one; use the in-place form");
            }
            return;
        }
        checked(input, "allReduce", CollectiveFingerprint.Op.ALL_REDUCE, op, -1, -1)
                .allReduce(output, input, op, streamFor(input));
    }

    /**
     * Gathers {@code input} from every member, concatenated along {@code dim} (negative counts from
     * the end), into a new tensor on the input's device. World size 1 returns {@code input}.
     */
    public Tensor allGather(Tensor input, int dim) {
        checkOpen("allGather");
        if (ranks.size() == 1) {
            return input;
        }
        int d = normalizeDim("allGather", input, dim);
        long[] shape = input.shape();
        shape[d] = Math.multiplyExact(shape[d], ranks.size());
        Tensor out = allocateLike("allGather", input, shape);
        allGather(out, input, d);
        return out;
    }

    /** Gathers {@code input} into {@code output} ({@code output.size(dim) == worldSize() * input.size(dim)}). */
    public void allGather(Tensor output, Tensor input, int dim) {
        checkOpen("allGather");
        if (ranks.size() == 1) {
            if (input != output && input.isHost()) {
                output.copyFrom(input);
            }
            return;
        }
        checked(input, "allGather", CollectiveFingerprint.Op.ALL_GATHER, null, dim < 0 ? dim + input.dim() : dim, -1)
                .allGather(output, input, dim, streamFor(input));
    }

    /**
     * Reduces {@code input} across members and returns this rank's part of the result split along
     * {@code dim} into {@link #worldSize()} equal parts (sum). World size 1 returns {@code input}.
     */
    public Tensor reduceScatter(Tensor input, int dim) {
        return reduceScatter(input, ReduceOp.SUM, dim);
    }

    public Tensor reduceScatter(Tensor input, ReduceOp op, int dim) {
        checkOpen("reduceScatter");
        if (ranks.size() == 1) {
            return input;
        }
        int d = normalizeDim("reduceScatter", input, dim);
        long[] shape = input.shape();
        if (shape[d] % ranks.size() != 0) {
            throw ctx("reduceScatter").invalidArgument("dimension " + d + " of " + Arrays.toString(shape)
                    + " is not divisible by the group size " + ranks.size());
        }
        shape[d] /= ranks.size();
        Tensor out = allocateLike("reduceScatter", input, shape);
        reduceScatter(out, input, op, d);
        return out;
    }

    /**
     * Reduces {@code input} across members and puts this rank's part of the result, split along
     * {@code dim}, into {@code output} ({@code input.size(dim) == worldSize() * output.size(dim)}).
     */
    public void reduceScatter(Tensor output, Tensor input, ReduceOp op, int dim) {
        checkOpen("reduceScatter");
        if (ranks.size() == 1) {
            if (input != output && input.isHost()) {
                output.copyFrom(input);
            }
            return;
        }
        checked(input, "reduceScatter", CollectiveFingerprint.Op.REDUCE_SCATTER, op,
                        dim < 0 ? dim + input.dim() : dim, -1)
                .reduceScatter(output, input, op, dim, streamFor(input));
    }

    // ------------------------------------------------------------------ mixture of experts

    /** The manager behind {@link #dispatch} and {@link #combine}. */
    public All2AllManager all2allManager() {
        return all2all;
    }

    /**
     * MoE dispatch (vLLM's {@code GroupCoordinator.dispatch}), collective over the group, meant for
     * the EP group: sends each of this rank's token copies ({@code hidden}, a host tensor
     * {@code [tokens x hidden]}, routed by {@code routing}) to the rank holding its expert and
     * returns the copies this rank's experts must process. Run the experts on
     * {@link DispatchResult#tokens()} and pass their output to {@link #combine}. The full contract
     * (equal hidden size, dtype, expert count and top-k on every member; token counts may differ) is
     * {@link All2AllManager}'s.
     */
    public DispatchResult dispatch(Tensor hidden, ExpertRouting routing) {
        checkOpen("dispatch");
        return all2all.dispatch(this, hidden, routing);
    }

    /**
     * MoE combine, collective over the group: sends the experts' outputs for {@code dispatched}'s
     * rows back and returns this rank's tokens' results, {@code [tokens x hidden]} in the order
     * given to {@link #dispatch}: for each token the sum of its experts' outputs times their weights.
     */
    public Tensor combine(DispatchResult dispatched, Tensor expertOutput) {
        checkOpen("combine");
        return all2all.combine(this, dispatched, expertOutput);
    }

    /**
     * Gathers {@code input} from every member along {@code dim} onto group rank {@code dst}: returns
     * the result there and {@code null} elsewhere. World size 1 returns {@code input}.
     */
    public Tensor gather(Tensor input, int dst, int dim) {
        checkOpen("gather");
        requireRank("gather", "dst", dst);
        if (ranks.size() == 1) {
            return input;
        }
        int d = normalizeDim("gather", input, dim);
        Tensor out = null;
        if (rankInGroup == dst) {
            long[] shape = input.shape();
            shape[d] = Math.multiplyExact(shape[d], ranks.size());
            out = allocateLike("gather", input, shape);
        }
        checked(input, "gather", CollectiveFingerprint.Op.GATHER, null, d, dst)
                .gather(out, input, dst, d, streamFor(input));
        return out;
    }

    /** In-place broadcast from group rank {@code src}; returns {@code tensor}. */
    public Tensor broadcast(Tensor tensor, int src) {
        checkOpen("broadcast");
        requireRank("broadcast", "src", src);
        if (ranks.size() == 1) {
            return tensor;
        }
        checked(tensor, "broadcast", CollectiveFingerprint.Op.BROADCAST, null, -1, src)
                .broadcast(tensor, src, streamFor(tensor));
        return tensor;
    }

    /** Sends {@code tensor} to the next member. */
    public void send(Tensor tensor) {
        send(tensor, nextInGroup());
    }

    /** Sends {@code tensor} to group rank {@code dst}. */
    public void send(Tensor tensor, int dst) {
        checkOpen("send");
        requirePeer("send", "dst", dst);
        deviceSend(tensor, dst, 0, "send");
    }

    /**
     * A send through the communicator for the tensor's device, after sending the call's fingerprint to
     * {@code dst} when it goes to the device communicator and the check is on ({@code tag}: what the
     * payload is, 0 for a plain send).
     */
    private void deviceSend(Tensor t, int dst, int tag, String op) {
        DeviceCommunicator c = commFor(t, op);
        if (fingerprint != null && c != hostComm) {
            fingerprint.sent(t, dst, tag);
        }
        c.send(t, dst, streamFor(t));
    }

    /** The receiving side of {@link #deviceSend}: compares the sender's fingerprint with this call first. */
    private void deviceRecv(Tensor t, int src, int tag, String op) {
        DeviceCommunicator c = commFor(t, op);
        if (fingerprint != null && c != hostComm) {
            fingerprint.received(t, src, tag);
        }
        c.recv(t, src, streamFor(t));
    }

    /** Receives a tensor of {@code shape} and {@code dtype} on this rank's device from the previous member. */
    public Tensor recv(long[] shape, DType dtype) {
        return recv(shape, dtype, prevInGroup());
    }

    /** Receives a tensor of {@code shape} and {@code dtype} on this rank's device from group rank {@code src}. */
    public Tensor recv(long[] shape, DType dtype, int src) {
        checkOpen("recv");
        requirePeer("recv", "src", src);
        Tensor t = allocate("recv", device.type(), dtype, shape);
        recv(t, src);
        return t;
    }

    /** Receives into {@code tensor} (exactly its size) from group rank {@code src}. */
    public void recv(Tensor tensor, int src) {
        checkOpen("recv");
        requirePeer("recv", "src", src);
        deviceRecv(tensor, src, 0, "recv");
    }

    private int normalizeDim(String op, Tensor t, int dim) {
        try {
            return t.normalizeDim(dim);
        } catch (IllegalArgumentException e) {
            throw ctx(op).invalidArgument(e.getMessage(), e);
        }
    }

    // ------------------------------------------------------------------ control plane

    /** Waits until every member arrives: the CPU group's barrier (through shared memory on one host, over tcp). */
    public void barrier() {
        checkOpen("barrier");
        if (ranks.size() == 1) {
            return;
        }
        cpu.barrier(timeout);
    }

    /**
     * A barrier over the CPU group that names every member that did not arrive within
     * {@code timeout} (c10d's {@code monitored_barrier}; see {@link ProcessGroup#monitoredBarrier}):
     * for finding the stuck rank, not for the hot path.
     */
    public void monitoredBarrier(Duration timeout) {
        checkOpen("monitoredBarrier");
        if (ranks.size() == 1) {
            return;
        }
        cpu.monitoredBarrier(timeout);
    }

    /**
     * Broadcasts {@code value} (meaningful on {@code src} only) and returns {@code src}'s value on
     * every member, checked to be a {@code type}.
     */
    public <T> T broadcastObject(T value, int src, Class<T> type) {
        checkOpen("broadcastObject");
        requireRank("broadcastObject", "src", src);
        if (rankInGroup == src) {
            checkType(value, type); // on every route, before anything is sent
        }
        if (ranks.size() == 1) {
            return value;
        }
        MessageQueue q = queueFor(src);
        switch (route(q, src)) {
            case QUEUE:
                if (rankInGroup == src) {
                    return traced(MESSAGE_QUEUE, "broadcastObject", () -> {
                        q.enqueueObject(value, timeout);
                        return value;
                    });
                }
                return traced(MESSAGE_QUEUE, "broadcastObject", () -> q.dequeueObject(type, timeout));
            case SWITCHING: {
                // the broadcaster is still being made: over the CPU side, with the writer's word on switching
                byte[] got = beforeSwitch(rankInGroup == src ? encode(value, "broadcastObject") : null, "broadcastObject");
                return rankInGroup == src ? value : codec.decode(got, 1, got.length - 1, type);
            }
            default:
                return cpu.broadcastObject(value, src, type, timeout);
        }
    }

    private volatile FlightRecorder.Group routeRecord;
    private static final String MESSAGE_QUEUE = "message-queue";

    /**
     * Runs {@code body}, an operation on a route that bypasses the CPU group (which records its own),
     * as an {@code io.jcomm.Operation} JFR event (free while no recording enables the event) and in the flight
     * recorder, which counts the bytes of a {@code byte[]} result.
     */
    private <T> T traced(String route, String op, java.util.function.Supplier<T> body) {
        Object event = OperationEvents.begin();
        RuntimeException failure = null;
        FlightRecorder.Group rec = routeRecord();
        long seq = rec != null ? rec.begin(op, false) : 0;
        T result = null;
        try {
            result = body.get();
            return result;
        } catch (RuntimeException e) {
            failure = e;
            throw e;
        } finally {
            OperationEvents.end(event, name, rankInGroup, route, op, false, failure);
            if (rec != null) {
                rec.end(op, seq, failure == null, result instanceof byte[] b ? b.length : 0);
            }
        }
    }

    /**
     * This group's record of the routes that bypass its CPU group ({@code "<name> (shm)"} in the flight
     * recorder: the message queue), made on first use; null when off.
     */
    private FlightRecorder.Group routeRecord() {
        FlightRecorder.Group r = routeRecord;
        if (r == null) {
            FlightRecorder fr = FlightRecorder.process();
            if (fr == null) {
                return null;
            }
            synchronized (this) {
                if (routeRecord == null) {
                    routeRecord = fr.group(name + " (shm)", rankInGroup, ranks.size());
                }
                r = routeRecord;
            }
        }
        return r;
    }

    /** The three ways a broadcast goes, decided in one place ({@link #route}) for objects and bytes alike. */
    private enum Route { QUEUE, SWITCHING, CPU_SIDE }

    /**
     * How a broadcast from {@code src} goes: through its message queue ({@code q}, from {@link #queueFor}),
     * over the CPU side with the writer's word on switching while the late broadcaster is being made,
     * or over the CPU group.
     */
    private Route route(MessageQueue q, int src) {
        if (q != null) {
            return Route.QUEUE;
        }
        return late != null && src == 0 ? Route.SWITCHING : Route.CPU_SIDE;
    }

    private void checkType(Object value, Class<?> type) {
        if (value != null && !type.isInstance(value)) {
            throw ctx("broadcastObject").invalidArgument("value is a " + value.getClass().getName()
                    + ", not a " + type.getName());
        }
    }

    /** {@code value} encoded with the job's codec; a value it cannot encode is the caller's argument error. */
    private byte[] encode(Object value, String op) {
        try {
            return codec.encode(value);
        } catch (IllegalArgumentException e) {
            throw ctx(op).invalidArgument(e.getMessage(), e);
        }
    }

    /** The metadata of {@code dict}; a dict that cannot be described is the caller's argument error. */
    private byte[] encodeDict(Map<String, ?> dict, String op) {
        try {
            return TensorDictCodec.encode(dict, codec);
        } catch (IllegalArgumentException e) {
            throw ctx(op).invalidArgument(e.getMessage(), e);
        }
    }

    /** The queue a broadcast from {@code src} goes through, or null for the CPU side. */
    private MessageQueue queueFor(int src) {
        if (mq != null) {
            return src == mq.writerRank() ? mq : null;
        }
        return switched != null && src == switched.writerRank() ? switched : null;
    }

    /**
     * A writer's broadcast while its late broadcaster may not be ready everywhere: the payload goes
     * the CPU way behind one byte that says whether the writer's queue is ready; if it is, every rank
     * takes its own (ready, or finishing: the writer's creation returned, so every rank's last step
     * did) and uses it from the next broadcast on. Returns the framed payload (byte 0 is the flag).
     */
    private byte[] beforeSwitch(byte[] payload, String op) {
        byte[] framed = null;
        if (rankInGroup == 0) {
            framed = new byte[payload.length + 1];
            framed[0] = late.ready() ? SWITCH : STAY;
            System.arraycopy(payload, 0, framed, 1, payload.length);
        }
        byte[] got = broadcastCpuSide(framed, 0);
        if (got == null || got.length == 0 || (got[0] != STAY && got[0] != SWITCH)) {
            throw new ProtocolException(ctx(op), "malformed broadcast from the writer (no switch flag)");
        }
        if (got[0] == SWITCH) {
            switched = late.take(ctx(op), timeout);
        }
        return got;
    }

    /** Broadcasts raw bytes by the same route as {@link #broadcastObject}. */
    private byte[] broadcastBytes(byte[] bytes, int src) {
        MessageQueue q = queueFor(src);
        switch (route(q, src)) {
            case QUEUE:
                if (rankInGroup == src) {
                    return traced(MESSAGE_QUEUE, "broadcastBytes", () -> {
                        q.enqueue(bytes, timeout);
                        return bytes;
                    });
                }
                return traced(MESSAGE_QUEUE, "broadcastBytes", () -> q.dequeueBytes(timeout));
            case SWITCHING: {
                byte[] got = beforeSwitch(rankInGroup == src ? bytes : null, "broadcastBytes");
                return rankInGroup == src ? bytes : java.util.Arrays.copyOfRange(got, 1, got.length);
            }
            default:
                return broadcastCpuSide(bytes, src);
        }
    }

    /** Bytes over the CPU group. */
    private byte[] broadcastCpuSide(byte[] bytes, int src) {
        return cpu.broadcastObject(bytes, src, byte[].class, timeout);
    }

    /** Every member's value, in group order (over the CPU group). */
    public <T> List<T> allGatherObject(T value, Class<T> type) {
        checkOpen("allGatherObject");
        return cpu.allGatherObject(value, type, timeout);
    }

    /** Sends {@code value} to group rank {@code dst} over the CPU group. */
    public void sendObject(Object value, int dst) {
        checkOpen("sendObject");
        requirePeer("sendObject", "dst", dst);
        cpu.sendObject(value, dst, timeout);
    }

    /** Receives an object of {@code type} from group rank {@code src} over the CPU group. */
    public <T> T recvObject(int src, Class<T> type) {
        checkOpen("recvObject");
        requirePeer("recvObject", "src", src);
        return cpu.recvObject(src, type, timeout);
    }

    // ------------------------------------------------------------------ tensor dicts

    /**
     * Broadcasts a dict of tensors and plain values from group rank {@code src}: the metadata first
     * (by the {@link #broadcastObject} route), then every non-empty tensor in the dict's iteration
     * order (host tensors over the CPU side, device tensors over the device communicator). Returns
     * {@code dict} on {@code src} and a new dict in the same order elsewhere (tensors allocated on
     * the sender's device type: host, or this rank's device).
     */
    public Map<String, Object> broadcastTensorDict(Map<String, ?> dict, int src) {
        checkOpen("broadcastTensorDict");
        requireRank("broadcastTensorDict", "src", src);
        if (ranks.size() == 1) {
            return copyOf(dict);
        }
        if (fingerprint != null) {
            fingerprint.checkTensorDict(src);
        }
        if (rankInGroup == src) {
            Objects.requireNonNull(dict, "dict");
            byte[] meta = encodeDict(dict, "broadcastTensorDict");
            broadcastBytes(meta, src);
            if (fingerprint != null) {
                fingerprint.checkTensorDictMetadata(src, meta, dict.size(),
                        (int) dict.values().stream().filter(v -> v instanceof Tensor).count());
            }
            for (Object v : dict.values()) {
                if (v instanceof Tensor && ((Tensor) v).numel() > 0) {
                    Tensor t = (Tensor) v;
                    commFor(t, "broadcastTensorDict").broadcast(t, src, streamFor(t));
                }
            }
            return copyOf(dict);
        }
        byte[] meta = broadcastBytes(null, src);
        List<TensorDictCodec.Entry> entries = decode(meta, "broadcastTensorDict");
        if (fingerprint != null) {
            fingerprint.checkTensorDictMetadata(src, meta, entries.size(),
                    (int) entries.stream().filter(e -> e instanceof TensorDictCodec.TensorEntry).count());
        }
        Map<String, Object> out = new LinkedHashMap<>();
        for (TensorDictCodec.Entry e : entries) {
            if (e instanceof TensorDictCodec.TensorEntry) {
                TensorDictCodec.TensorEntry te = (TensorDictCodec.TensorEntry) e;
                Tensor t = allocate("broadcastTensorDict", te.deviceType(), te.dtype(), te.shape());
                if (t.numel() > 0) {
                    commFor(t, "broadcastTensorDict").broadcast(t, src, streamFor(t));
                }
                out.put(e.key(), t);
            } else {
                out.put(e.key(), ((TensorDictCodec.ValueEntry) e).value());
            }
        }
        return out;
    }

    private List<TensorDictCodec.Entry> decode(byte[] meta, String op) {
        try {
            return TensorDictCodec.decode(meta, codec);
        } catch (ProtocolException e) {
            throw new ProtocolException(ctx(op), "bad tensor dict metadata: " + e.detail(), e);
        }
    }

    private static Map<String, Object> copyOf(Map<String, ?> dict) {
        return dict == null ? null : new LinkedHashMap<>(dict);
    }

    /** Sends {@code dict} to the next member (see {@link #sendTensorDict(Map, int, GroupCoordinator)}). */
    public void sendTensorDict(Map<String, ?> dict) {
        sendTensorDict(dict, nextInGroup(), null);
    }

    /**
     * Pipeline hand-off: sends the metadata of {@code dict} (object send over the CPU group), then
     * every non-empty tensor in order (host tensors over the CPU group, device tensors over the
     * device communicator) to group rank {@code dst}.
     *
     * <p>With {@code allGatherGroup} (typically the TP group): a tensor replicated across that group
     * whose element count is a multiple of its size is sent as this rank's 1/size slice only; the
     * receiver, which passes its own TP group, gathers the slices inside it. A group of one member
     * is a no-op.
     */
    public void sendTensorDict(Map<String, ?> dict, int dst, GroupCoordinator allGatherGroup) {
        if (ranks.size() == 1) {
            checkOpen("sendTensorDict");
            return;
        }
        sendTensorDict(dict, dst, allGatherGroup, false).await();
    }

    /**
     * Like {@link #sendTensorDict(Map, int, GroupCoordinator)} but the host tensors are sent
     * asynchronously: the returned work keeps every buffer reachable until it completes, and waiting
     * on it is idempotent. Do not modify the tensors before it completes.
     */
    public Work<Void> sendTensorDictAsync(Map<String, ?> dict, int dst, GroupCoordinator allGatherGroup) {
        if (ranks.size() == 1) {
            checkOpen("sendTensorDict");
            return CompletableWork.completed(ctx("sendTensorDict"), null);
        }
        return sendTensorDict(dict, dst, allGatherGroup, true);
    }

    private Work<Void> sendTensorDict(Map<String, ?> dict, int dst, GroupCoordinator allGatherGroup, boolean async) {
        String op = "sendTensorDict";
        checkOpen(op);
        requirePeer(op, "dst", dst);
        Objects.requireNonNull(dict, "dict");
        int agSize = allGatherGroup == null ? 1 : allGatherGroup.worldSize();
        int agRank = allGatherGroup == null ? 0 : allGatherGroup.rankInGroup();
        cpu.sendObject(encodeDict(dict, op), dst, timeout);
        List<Work<?>> parts = new ArrayList<>();
        List<Tensor> sent = new ArrayList<>();
        for (Object v : dict.values()) {
            if (!(v instanceof Tensor) || ((Tensor) v).numel() == 0) {
                continue;
            }
            Tensor t = (Tensor) v;
            if (agSize > 1 && t.numel() % agSize == 0) {
                long part = t.numel() / agSize;
                t = t.flatSlice(agRank * part, part);
            }
            sent.add(t);
            if (t.isHost()) {
                if (async) {
                    parts.add(cpu.sendAsync(t, dst, TENSOR_DICT_TAG, timeout));
                } else {
                    cpu.send(t, dst, TENSOR_DICT_TAG, timeout);
                }
            } else {
                deviceSend(t, dst, TENSOR_DICT_TAG, op);
            }
        }
        if (async && sent.stream().anyMatch(t -> !t.isHost())) {
            DeviceCommunicator dc = deviceComm;
            StreamHandle s = stream;
            parts.add(SyncWork.of(ctx(op), () -> dc.synchronize(s)));
        }
        return new AllWork(ctx(op), parts, List.copyOf(sent));
    }

    /** vLLM's {@code isend_tensor_dict}: the same as {@link #sendTensorDictAsync}. */
    public Work<Void> isendTensorDict(Map<String, ?> dict, int dst, GroupCoordinator allGatherGroup) {
        return sendTensorDictAsync(dict, dst, allGatherGroup);
    }

    /**
     * vLLM's {@code irecv_tensor_dict}: receives the metadata now (one small object message from
     * {@code src}), allocates the tensors and posts their receives (host tensors asynchronously on the
     * CPU group, device tensors on the group's stream), and returns at once. The work's result is the
     * dict, in the sender's order, once every tensor arrived (and, with {@code allGatherGroup}, was
     * gathered there, which {@link Work#await()} does); it keeps every buffer reachable until then. Do not
     * read the tensors before it completes.
     */
    public Work<Map<String, Object>> irecvTensorDict(int src, GroupCoordinator allGatherGroup) {
        return recvTensorDict(src, allGatherGroup, null, true);
    }

    /** Receives a dict from the previous member (see {@link #recvTensorDict(int, GroupCoordinator)}). */
    public Map<String, Object> recvTensorDict() {
        return recvTensorDict(prevInGroup(), null);
    }

    /**
     * Receives what {@link #sendTensorDict} sent from group rank {@code src}: a new dict in the
     * sender's order. With {@code allGatherGroup}, tensors the sender sliced are received as this
     * rank's slice and gathered inside {@code allGatherGroup} (every member of it must call this
     * with the same metadata, as in a pipeline where each TP rank receives from its peer stage).
     */
    public Map<String, Object> recvTensorDict(int src, GroupCoordinator allGatherGroup) {
        return recvTensorDict(src, allGatherGroup, null, false).await();
    }

    /**
     * Like {@link #recvTensorDict(int, GroupCoordinator)}, but receives into the tensors of {@code reuse}
     * where they fit: a tensor of {@code reuse} under the same key with the same device type, dtype and
     * shape is the destination (and is what the returned dict holds), any other tensor is allocated.
     * Pass the dict a previous receive returned once its tensors are no longer needed: a stream of
     * same-shaped hand-offs then allocates no tensor memory at all (no direct-memory growth until a GC,
     * no zeroing). {@code reuse} itself is not modified; {@code null} allocates everything.
     */
    public Map<String, Object> recvTensorDict(int src, GroupCoordinator allGatherGroup, Map<String, ?> reuse) {
        return recvTensorDict(src, allGatherGroup, reuse, false).await();
    }

    /**
     * Both receives: synchronously each tensor is received and, when sliced, gathered at once; with
     * {@code async} the host receives are posted and the returned work finishes the dict (waits for them,
     * synchronizes the device stream, gathers) on its first await.
     */
    private Work<Map<String, Object>> recvTensorDict(int src, GroupCoordinator allGatherGroup, Map<String, ?> reuse,
                                                     boolean async) {
        String op = "recvTensorDict";
        checkOpen(op);
        requirePeer(op, "src", src);
        int agSize = allGatherGroup == null ? 1 : allGatherGroup.worldSize();
        List<TensorDictCodec.Entry> entries = decode(cpu.recvObject(src, byte[].class, timeout), op);
        Map<String, Object> out = new LinkedHashMap<>();
        List<Work<Void>> parts = new ArrayList<>();
        List<Runnable> gathers = new ArrayList<>();
        boolean device = false;
        for (TensorDictCodec.Entry e : entries) {
            if (!(e instanceof TensorDictCodec.TensorEntry)) {
                out.put(e.key(), ((TensorDictCodec.ValueEntry) e).value());
                continue;
            }
            TensorDictCodec.TensorEntry te = (TensorDictCodec.TensorEntry) e;
            Object old = reuse == null ? null : reuse.get(e.key());
            Tensor full = old instanceof Tensor && fits((Tensor) old, te) ? (Tensor) old
                    : allocate(op, te.deviceType(), te.dtype(), te.shape());
            out.put(e.key(), full);
            if (full.numel() == 0) {
                continue;
            }
            boolean gathered = agSize > 1 && full.numel() % agSize == 0;
            long part = full.numel() / agSize;
            // a synchronous receive gathers at once: its slice lands in this coordinator's scratch
            Tensor target = !gathered ? full : !async && full.isHost() ? gatherScratch(te.dtype(), part)
                    : allocate(op, te.deviceType(), te.dtype(), new long[] {1, part});
            if (target.isHost()) {
                if (async) {
                    parts.add(cpu.recvAsync(target, src, TENSOR_DICT_TAG, timeout));
                } else {
                    cpu.recv(target, src, TENSOR_DICT_TAG, timeout);
                }
            } else {
                deviceRecv(target, src, TENSOR_DICT_TAG, op);
                device = true;
            }
            if (gathered) {
                Runnable gather = () -> allGatherGroup.allGather(full.reshape(agSize, part), target, 0);
                if (async) {
                    gathers.add(gather);
                } else {
                    gather.run();
                }
            }
        }
        if (!async) {
            return CompletableWork.completed(ctx(op), out);
        }
        boolean onDevice = device;
        DeviceCommunicator dc = deviceComm;
        StreamHandle s = stream;
        return new SyncWork<>(ctx(op), () -> {
            for (Work<Void> w : parts) {
                w.await();
            }
            if (onDevice) {
                dc.synchronize(s);
            }
            gathers.forEach(Runnable::run);
            return out;
        });
    }

    /**
     * A host tensor of {@code elements} for a synchronous tensor-dict receive to put its slice in before
     * it gathers it: one buffer per coordinator, grown when too small (a coordinator is driven by one
     * thread at a time), so that a stream of hand-offs allocates nothing for it.
     */
    private Tensor gatherScratch(DType dtype, long elements) {
        long bytes = Math.multiplyExact(elements, (long) dtype.byteSize());
        if (scratch == null || scratch.byteSize() < bytes) {
            scratch = Tensor.allocate(DType.U8, Math.max(bytes, scratch == null ? 0 : 2 * scratch.byteSize()));
        }
        return Tensor.wrap(scratch.buffer(), dtype, 1, elements);
    }

    /** Whether {@code t} can take the tensor {@code te} describes. */
    private static boolean fits(Tensor t, TensorDictCodec.TensorEntry te) {
        return t.dtype() == te.dtype() && Arrays.equals(t.shape(), te.shape())
                && t.device().type().equals(te.deviceType());
    }

    // ------------------------------------------------------------------ lifecycle

    /**
     * Releases everything: first what peers notice at once (the CPU group's goodbye), so that a peer waiting on this rank fails fast instead of at its
     * deadline; then the communicators, the broadcaster and its media driver (whose close may wait,
     * bounded, for the other clients of the driver to leave). Idempotent; never hangs.
     */
    public void destroy() {
        closeTransports();
        synchronized (this) {
            if (released) {
                return;
            }
            released = true;
        }
        if (deviceComm != null && deviceComm != hostComm) {
            quietly(deviceComm::close);
        }
        if (hostComm != null) {
            quietly(hostComm::close);
        }
        CloseHelper.quietCloseAll(late, mq, ownedMedia);
    }

    /**
     * The fast first half of {@link #destroy()}: marks the group destroyed, closes the CPU group and this rank's end of the broadcaster. {@link ParallelState} calls it on every group before the slow half,
     * so that a slow broadcaster teardown never delays what the peers are waiting for.
     */
    void closeTransports() {
        synchronized (this) {
            if (destroyed) {
                return;
            }
            destroyed = true;
        }
        quietly(cpu::close);
        // this rank's end of the broadcaster too: a reader waiting for this writer's next message fails at once
        // (the writer's close message) instead of at its deadline; the media driver goes with destroy()
        MessageQueue q = mq != null ? mq : late != null ? late.now() : null;
        if (q != null) {
            CloseHelper.quietClose(q);
        }
    }

    private static void quietly(Runnable r) {
        try {
            r.run();
        } catch (RuntimeException e) {
            // best effort: the parts are independent
        }
    }

    @Override
    public void close() {
        destroy();
    }

    @Override
    public String toString() {
        return "GroupCoordinator{" + name + " " + ranks + ", rank " + rankInGroup + ", cpu=" + cpu.backendName()
                + (deviceComm != null ? ", device=" + deviceComm.name() : "") + (mq != null ? ", mq" : "")
                + (singleHost ? ", one host" : "") + (destroyed ? ", destroyed" : "") + "}";
    }

    /** A work that runs a blocking completion once, on the first await; later awaits return its outcome. */
    private static final class SyncWork<T> implements Work<T> {
        private final OpContext context;
        private final java.util.function.Supplier<T> completion;
        private volatile boolean done;
        private volatile T result;
        private volatile RuntimeException failure;

        SyncWork(OpContext context, java.util.function.Supplier<T> completion) {
            this.context = context;
            this.completion = completion;
        }

        static SyncWork<Void> of(OpContext context, Runnable wait) {
            return new SyncWork<>(context, () -> {
                wait.run();
                return null;
            });
        }

        @Override
        public synchronized T await() {
            if (!done) {
                try {
                    result = completion.get();
                } catch (RuntimeException e) {
                    failure = e;
                } finally {
                    done = true;
                }
            }
            if (failure != null) {
                throw failure;
            }
            return result;
        }

        @Override
        public T await(Duration timeout) {
            return await();
        }

        @Override
        public boolean isDone() {
            return done;
        }

        @Override
        public boolean isSuccess() {
            return done && failure == null;
        }

        @Override
        public Optional<Throwable> failure() {
            return Optional.ofNullable(failure);
        }

        @Override
        public String toString() {
            return "SyncWork{" + context + "}";
        }
    }
}
