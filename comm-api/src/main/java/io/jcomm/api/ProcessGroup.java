package io.jcomm.api;

import io.jcomm.api.device.P2POp;
import io.jcomm.api.work.Work;
import java.time.Duration;
import java.util.List;

/**
 * The control plane of one group of processes (c10d's {@code ProcessGroup} for CPU tensors):
 * barrier, collectives on host tensors, point-to-point, and object collectives through a
 * registered {@link ObjectCodec}.
 *
 * <h2>Contract</h2>
 * <ul>
 *   <li>{@code src}, {@code dst} and peer arguments are <em>group-local</em> ranks in
 *       {@code [0, size())}; {@link #globalRanks()} maps them to global ranks.</li>
 *   <li>Every operation with a destination and a source tensor takes the <b>output first</b>:
 *       {@code (output, input[, outputCounts, inputCounts])}, as torch.distributed does
 *       ({@code all_gather_into_tensor(output, input)}, {@code reduce_scatter_tensor(output, input)},
 *       {@code all_to_all_single(output, input, output_split_sizes, input_split_sizes)}) and vLLM's
 *       {@code PyNcclCommunicator} ({@code all_gather(output_tensor, input_tensor)}).
 *       {@link io.jcomm.api.device.DeviceCommunicator} and {@code GroupCoordinator} take the same
 *       order: both arguments are {@link Tensor}s, so a swapped pair would compile, and one order
 *       across jcomm keeps code moved from one layer to another right.</li>
 *   <li>Every member must call the same collectives in the same order with consistent arguments.
 *       Invalid arguments of a call (null tensors or timeouts, out-of-range ranks, buffers of the
 *       wrong size or dtype, the same tensor as input and output where they must differ, a value
 *       the codec cannot encode) fail locally with {@link IllegalArgumentException}, naming the
 *       group, rank and operation, before anything is sent; the group stays usable. They are
 *       programming errors, never a {@link CommException}. Inconsistencies across ranks that a
 *       backend detects fail with {@link CollectiveMismatchException}, and bytes from a peer that
 *       do not decode with {@link ProtocolException}: those are communication failures.</li>
 *   <li>Every blocking call is bounded: the overloads without a timeout use
 *       {@link #defaultTimeout()}. A peer that dies yields {@link PeerFailureException} (or
 *       {@link CommTimeoutException}) on every survivor within the timeout; after such a failure
 *       the group is <em>poisoned</em> and every later call fails at once with the original cause.</li>
 *   <li>With {@code size() == 1} every collective returns immediately (outputs receive a copy of the
 *       input where shapes require it).</li>
 *   <li>Tensors must be host tensors ({@link Tensor#isHost()}). Reductions of {@code F16}/{@code BF16}
 *       accumulate in {@code float}. {@link ReduceOp#AVG} divides the sum by {@code size()}.</li>
 *   <li>Asynchronous variants start the operation in call order and return a {@link Work}; the
 *       group keeps the buffers reachable until completion. Synchronous calls are ordered after
 *       every earlier asynchronous call of the same group.</li>
 *   <li>A group is used by one application thread at a time (like a torch process group);
 *       {@link #close()} may be called from any thread and makes blocked calls fail with
 *       {@link CommClosedException}.</li>
 * </ul>
 */
public interface ProcessGroup extends AutoCloseable {

    /** Unique group name, e.g. {@code world} or {@code tp:0}. */
    String name();

    /** This process's rank in the group. */
    int rank();

    /** Number of processes in the group. */
    int size();

    /** Global rank of each group rank, in group-rank order. */
    List<Integer> globalRanks();

    /** The backend's name, e.g. {@code tcp} or {@code gloo}. */
    String backendName();

    /** Timeout used by the overloads that take none. */
    Duration defaultTimeout();

    /** The codec used by the object collectives. */
    ObjectCodec codec();

    // ---- synchronisation ----

    void barrier(Duration timeout);

    default void barrier() {
        barrier(defaultTimeout());
    }

    /**
     * A barrier that says who is missing (c10d's {@code monitored_barrier}): every rank reports to
     * rank 0, which waits for all of them until {@code timeout} and then releases them. When ranks
     * do not arrive in time, rank 0 fails with {@link CommTimeoutException} naming every one of them
     * (not only the first); the others wait up to a second longer for rank 0's verdict and fail with
     * it (an abort that names the missing ranks), or at that extended deadline. For debugging a stuck
     * job: it costs 2(N-1) messages through rank 0, more than {@link #barrier}. Backends without it
     * throw {@link UnsupportedByBackendException}.
     */
    default void monitoredBarrier(Duration timeout) {
        throw new UnsupportedByBackendException(OpContext.of(name(), rank(), "monitoredBarrier"), backendName(),
                "monitoredBarrier");
    }

    // ---- tensor collectives (in place where noted) ----

    /** Broadcasts {@code tensor} from group rank {@code src} into {@code tensor} on every rank. */
    void broadcast(Tensor tensor, int src, Duration timeout);

    default void broadcast(Tensor tensor, int src) {
        broadcast(tensor, src, defaultTimeout());
    }

    /** In-place all-reduce. */
    void allReduce(Tensor tensor, ReduceOp op, Duration timeout);

    default void allReduce(Tensor tensor, ReduceOp op) {
        allReduce(tensor, op, defaultTimeout());
    }

    /**
     * Gathers {@code input} from every rank into {@code output}, concatenated in rank order:
     * {@code output.numel() == size() * input.numel()}, same dtype.
     */
    void allGather(Tensor output, Tensor input, Duration timeout);

    default void allGather(Tensor output, Tensor input) {
        allGather(output, input, defaultTimeout());
    }

    /**
     * Variable-size all-gather: rank r contributes {@code counts[r]} elements
     * ({@code input.numel() == counts[rank()]}); {@code output} holds their concatenation.
     */
    void allGatherV(Tensor output, Tensor input, long[] counts, Duration timeout);

    default void allGatherV(Tensor output, Tensor input, long[] counts) {
        allGatherV(output, input, counts, defaultTimeout());
    }

    /**
     * All-to-all with equal splits (torch's {@code all_to_all_single} without split sizes): {@code input}
     * holds {@code size()} chunks of {@code input.numel() / size()} elements, chunk {@code j} going to rank
     * {@code j}; {@code output} (same dtype and size, a different tensor) receives rank {@code i}'s chunk
     * for this rank as its chunk {@code i}. {@code input.numel()} must be divisible by {@code size()}, and
     * every rank passes the same count. Backends without it throw {@link UnsupportedByBackendException}.
     */
    default void allToAll(Tensor output, Tensor input, Duration timeout) {
        throw new UnsupportedByBackendException(OpContext.of(name(), rank(), "allToAll"), backendName(), "allToAll");
    }

    default void allToAll(Tensor output, Tensor input) {
        allToAll(output, input, defaultTimeout());
    }

    /**
     * All-to-all with per-rank counts (torch's {@code all_to_all_single} with split sizes, MoE token
     * dispatch): this rank sends {@code inputCounts[j]} elements to rank {@code j}, taken from
     * {@code input} in rank order, and receives {@code outputCounts[i]} elements from rank {@code i}
     * into {@code output} in rank order. {@code input.numel()} and {@code output.numel()} equal the sums
     * of the counts; counts may be zero. Rank {@code i}'s {@code inputCounts[j]} must equal rank
     * {@code j}'s {@code outputCounts[i]}; when they disagree, a backend that can tell (tcp, gloo)
     * fails the rank that would receive the wrong count with {@link CollectiveMismatchException}
     * naming the sender, and the group is poisoned on every rank: ranks that finished their part
     * first fail at their next call (gloo checks every pair up front, so all of its ranks fail at
     * once). Never a hang.
     */
    default void allToAllV(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts, Duration timeout) {
        throw new UnsupportedByBackendException(OpContext.of(name(), rank(), "allToAllV"), backendName(), "allToAllV");
    }

    default void allToAllV(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts) {
        allToAllV(output, input, outputCounts, inputCounts, defaultTimeout());
    }

    /**
     * Gathers {@code input} from every rank into {@code output} on rank {@code dst} only
     * ({@code output} may be {@code null} on other ranks).
     */
    void gather(Tensor output, Tensor input, int dst, Duration timeout);

    default void gather(Tensor output, Tensor input, int dst) {
        gather(output, input, dst, defaultTimeout());
    }

    /**
     * Splits {@code input} (on {@code src} only, {@code size() * output.numel()} elements; may be
     * {@code null} elsewhere) into equal parts and delivers part r to rank r's {@code output}.
     */
    void scatter(Tensor output, Tensor input, int src, Duration timeout);

    default void scatter(Tensor output, Tensor input, int src) {
        scatter(output, input, src, defaultTimeout());
    }

    /**
     * Reduces {@code input} ({@code size() * output.numel()} elements) across ranks and delivers
     * the r-th part of the result to rank r's {@code output}.
     */
    void reduceScatter(Tensor output, Tensor input, ReduceOp op, Duration timeout);

    default void reduceScatter(Tensor output, Tensor input, ReduceOp op) {
        reduceScatter(output, input, op, defaultTimeout());
    }

    // ---- point to point ----

    /** Sends {@code tensor} to group rank {@code dst}; {@code tag} matches a {@link #recv}. */
    void send(Tensor tensor, int dst, int tag, Duration timeout);

    default void send(Tensor tensor, int dst, int tag) {
        send(tensor, dst, tag, defaultTimeout());
    }

    /** Receives into {@code tensor} (exactly its byte size) from group rank {@code src}. */
    void recv(Tensor tensor, int src, int tag, Duration timeout);

    default void recv(Tensor tensor, int src, int tag) {
        recv(tensor, src, tag, defaultTimeout());
    }

    // ---- objects, through the registered codec ----

    /**
     * Broadcasts {@code value} (meaningful on {@code src} only) and returns the value from
     * {@code src} on every rank, checked to be of {@code type}.
     */
    <T> T broadcastObject(T value, int src, Class<T> type, Duration timeout);

    default <T> T broadcastObject(T value, int src, Class<T> type) {
        return broadcastObject(value, src, type, defaultTimeout());
    }

    /** Every rank's value, in rank order. */
    <T> List<T> allGatherObject(T value, Class<T> type, Duration timeout);

    default <T> List<T> allGatherObject(T value, Class<T> type) {
        return allGatherObject(value, type, defaultTimeout());
    }

    /** Every rank's value in rank order on {@code dst}; an empty list on other ranks. */
    <T> List<T> gatherObject(T value, int dst, Class<T> type, Duration timeout);

    default <T> List<T> gatherObject(T value, int dst, Class<T> type) {
        return gatherObject(value, dst, type, defaultTimeout());
    }

    void sendObject(Object value, int dst, Duration timeout);

    default void sendObject(Object value, int dst) {
        sendObject(value, dst, defaultTimeout());
    }

    <T> T recvObject(int src, Class<T> type, Duration timeout);

    default <T> T recvObject(int src, Class<T> type) {
        return recvObject(src, type, defaultTimeout());
    }

    // ---- asynchronous variants ----

    Work<Void> barrierAsync(Duration timeout);

    Work<Void> broadcastAsync(Tensor tensor, int src, Duration timeout);

    Work<Void> allReduceAsync(Tensor tensor, ReduceOp op, Duration timeout);

    Work<Void> allGatherAsync(Tensor output, Tensor input, Duration timeout);

    Work<Void> reduceScatterAsync(Tensor output, Tensor input, ReduceOp op, Duration timeout);

    /** {@link #allToAll} without waiting; the tensors must not be touched until the work completes. */
    default Work<Void> allToAllAsync(Tensor output, Tensor input, Duration timeout) {
        throw new UnsupportedByBackendException(OpContext.of(name(), rank(), "allToAll"), backendName(), "allToAll");
    }

    /** {@link #allToAllV} without waiting; the tensors must not be touched until the work completes. */
    default Work<Void> allToAllVAsync(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts,
                                      Duration timeout) {
        throw new UnsupportedByBackendException(OpContext.of(name(), rank(), "allToAllV"), backendName(), "allToAllV");
    }

    /**
     * Batched point-to-point (torch's {@code batch_isend_irecv}): every send and receive of {@code ops}
     * (host tensors, peers other than this rank) as one work that completes when all of them did, in
     * whatever order the peers get to them, so that a ring exchange cannot deadlock on its order.
     * Messages carry tag {@code tag}; between two ranks, sends and receives of one tag match in the
     * order they were issued. The tensors must not be touched until the work completes. Backends
     * without it throw {@link UnsupportedByBackendException}.
     */
    default Work<Void> batchIsendIrecv(List<P2POp> ops, int tag, Duration timeout) {
        throw new UnsupportedByBackendException(OpContext.of(name(), rank(), "batchIsendIrecv"), backendName(),
                "batchIsendIrecv");
    }

    default Work<Void> batchIsendIrecv(List<P2POp> ops) {
        return batchIsendIrecv(ops, 0, defaultTimeout());
    }

    Work<Void> sendAsync(Tensor tensor, int dst, int tag, Duration timeout);

    Work<Void> recvAsync(Tensor tensor, int src, int tag, Duration timeout);

    // ---- recovery ----

    /**
     * Which incarnation of the group this is: 0 for a group as created, one more than its
     * predecessor's for a group returned by {@link #shrink}. Every member of a group has the same
     * generation; keys and connections of one generation are never taken for another's.
     */
    default int generation() {
        return 0;
    }

    /**
     * Goes on without {@code excludedRanks} (NCCL's {@code ncclCommShrink} with
     * {@code NCCL_SHRINK_ABORT}, torchcomms' {@code shrink}): returns a new group of the other
     * members, in ascending order of their ranks here, renumbered {@code 0..size()-n-1} (their
     * {@link #globalRanks()} go with them), with this group's name, backend, codec and default
     * timeout, and generation {@link #generation()} + 1.
     *
     * <ul>
     *   <li>Called by every member that stays, with the same excluded ranks; the excluded ranks do
     *       not call it (they may be dead, hung or gone) and are never waited for.</li>
     *   <li>This group is aborted first, on this rank: an operation in progress on it (asynchronous,
     *       or a call on another thread) fails at once with {@link CommClosedException}, later calls
     *       too, and peers still blocked with this rank fail fast. It cannot be used again; closing
     *       it is not needed (but harmless).</li>
     *   <li>The members check that they agree on the excluded ranks before connecting: a member
     *       that excluded other ranks fails with {@link CollectiveMismatchException} (naming it),
     *       and a record left by another generation with {@link ProtocolException}. The new group
     *       lives in a namespace of its own (store keys, connections), so that nothing of an earlier
     *       generation is mixed in.</li>
     *   <li>Bounded by {@code timeout} as a whole: a member that stays but does not call fails the
     *       others with {@link CommTimeoutException}; a member that dies meanwhile, with
     *       {@link PeerFailureException} or {@link CommTimeoutException}.</li>
     * </ul>
     *
     * @param excludedRanks ranks of this group to leave out, in any order, without duplicates; not
     *                      this rank; may be empty (a new generation of the same members)
     * @throws IllegalArgumentException if an excluded rank is out of range, repeated or this rank
     *                                  (thrown before anything else: the group is left as it was)
     * @throws UnsupportedByBackendException if the group cannot shrink (the default)
     */
    default ProcessGroup shrink(List<Integer> excludedRanks, Duration timeout) {
        throw new UnsupportedByBackendException(OpContext.of(name(), rank(), "shrink"), backendName(), "shrink");
    }

    default ProcessGroup shrink(List<Integer> excludedRanks) {
        return shrink(excludedRanks, defaultTimeout());
    }

    /**
     * True once the group failed (peer death, timeout) or was closed; later calls fail fast. A backend
     * that watches its connections between calls (tcp) reports a peer's death here as soon as it
     * noticed it, before any call.
     */
    boolean isPoisoned();

    /** Releases connections and native resources; blocked calls fail. Idempotent. */
    @Override
    void close();
}
