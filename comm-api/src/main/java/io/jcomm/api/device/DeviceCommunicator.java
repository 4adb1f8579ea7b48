package io.jcomm.api.device;

import io.jcomm.api.Device;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.UnsupportedByBackendException;
import java.time.Duration;
import java.util.List;

/**
 * The data plane of one group: tensor collectives on one device type (NCCL for CUDA, HCCL for
 * Ascend, host memory for CPU), created by a {@link DeviceCommunicatorProvider}.
 *
 * <h2>Contract</h2>
 * <ul>
 *   <li>Ranks ({@code src}, {@code dst}, peers) are group-local.</li>
 *   <li>Every operation with a destination and a source tensor takes the <b>output first</b>:
 *       {@code (output, input[, outputCounts, inputCounts])}, the order of
 *       {@link ProcessGroup} and of {@code GroupCoordinator}, of torch.distributed
 *       ({@code all_gather_into_tensor(output, input)}, {@code all_to_all_single(output, input,
 *       output_split_sizes, input_split_sizes)}) and of vLLM's {@code PyNcclCommunicator}
 *       ({@code all_gather(output_tensor, input_tensor)}). Both arguments are {@link Tensor}s, so a
 *       swapped pair would compile: one order across jcomm is what keeps it from happening.</li>
 *   <li>Every operation is enqueued on the caller's {@code stream} (device communicators never
 *       create hidden streams, so calls can be graph-captured) and may return before the data has
 *       moved; {@link #synchronize(StreamHandle)} waits for the stream. Host communicators complete
 *       before returning and ignore the stream.</li>
 *   <li>Tensors must live on {@link #device()}'s type; wrong device, dtype, shape or size, a null
 *       argument or an out-of-range rank fails with {@link IllegalArgumentException} (naming the
 *       group, rank and operation) before anything is enqueued, and leaves the communicator usable:
 *       a programming error, never a {@link io.jcomm.api.CommException}.</li>
 *   <li>Backend errors raise {@link io.jcomm.api.BackendException} with the library's own error
 *       string; after an asynchronous error or a deadline the communicator is aborted and every
 *       later call fails fast. {@link #close()} never blocks beyond a bounded wait.</li>
 *   <li>With world size 1 every collective is a local copy (or nothing, in place).</li>
 * </ul>
 */
public interface DeviceCommunicator extends AutoCloseable {

    /** The provider's name, e.g. {@code cuda:nccl} or {@code cpu}. */
    String name();

    /** The group this communicator serves. */
    String groupName();

    int rank();

    int worldSize();

    /** The device this rank's tensors live on. */
    Device device();

    /**
     * What every data operation a communicator does not implement throws: they all default to it, so
     * that an operation added to this interface is additive for existing providers (they keep
     * compiling and refuse it with a typed error naming provider, group, rank and operation).
     */
    default UnsupportedByBackendException unsupported(String operation) {
        return new UnsupportedByBackendException(OpContext.of(groupName(), rank(), operation), name(), operation);
    }

    /** {@code output = reduce(input)} across ranks; {@code output == input} is in place. */
    default void allReduce(Tensor output, Tensor input, ReduceOp op, StreamHandle stream) {
        throw unsupported("allReduce");
    }

    /**
     * Gathers {@code input} from every rank and concatenates along {@code dim} (negative counts from
     * the end): {@code output.size(dim) == worldSize() * input.size(dim)}, other dims equal.
     */
    default void allGather(Tensor output, Tensor input, int dim, StreamHandle stream) {
        throw unsupported("allGather");
    }

    /**
     * Reduces {@code input} across ranks and splits the result along {@code dim} into
     * {@code worldSize()} equal parts; rank r receives part r in {@code output}.
     */
    default void reduceScatter(Tensor output, Tensor input, ReduceOp op, int dim, StreamHandle stream) {
        throw unsupported("reduceScatter");
    }

    /**
     * Like {@link #allGather} but only {@code dst} receives the result ({@code output} may be
     * {@code null} elsewhere).
     */
    default void gather(Tensor output, Tensor input, int dst, int dim, StreamHandle stream) {
        throw unsupported("gather");
    }

    /**
     * All-to-all with equal splits (torch's {@code all_to_all_single} without split sizes):
     * {@code input} holds {@code worldSize()} chunks of {@code input.numel() / worldSize()} elements
     * (flat, row-major order), chunk {@code j} going to rank {@code j}; {@code output} receives rank
     * {@code i}'s chunk for this rank as its chunk {@code i}. {@code input} and {@code output} have the
     * same dtype, live on {@link #device()} and have the same element count, which must be divisible
     * by {@code worldSize()}; they are distinct tensors (not in place). Every rank must pass the same
     * element count; a backend generally cannot detect a disagreement (what then happens, wrong data,
     * an error or the communicator's timeout and abort, is backend-defined, as in NCCL). The chunk a
     * rank sends to itself is copied locally. With world size 1 it is a copy.
     *
     * <p>jcomm's {@code AbstractDeviceCommunicator} implements it (and {@link #allToAllV}) as one
     * {@link #batchP2P} call, so a provider with batched point-to-point gets it without overriding.
     */
    default void allToAll(Tensor output, Tensor input, StreamHandle stream) {
        throw unsupported("allToAll");
    }

    /**
     * All-to-all with per-rank counts (torch's {@code all_to_all_single} with split sizes, MoE token
     * dispatch): this rank sends {@code inputCounts[j]} elements to rank {@code j}, taken from
     * {@code input} in rank order (flat), and receives {@code outputCounts[i]} elements from rank
     * {@code i} into {@code output} in rank order. Each array has one non-negative count per rank
     * ({@code worldSize()} entries); {@code input.numel()} and {@code output.numel()} equal their
     * sums; counts may be zero; same dtype and device, distinct tensors. Bad arguments fail with
     * {@link IllegalArgumentException} before anything is enqueued.
     *
     * <p>Rank {@code i}'s {@code inputCounts[j]} must equal rank {@code j}'s {@code outputCounts[i]}.
     * Unlike the CPU group, a device backend generally cannot detect a disagreement: the result is
     * backend-defined, as in NCCL (wrong or partial data, a backend error, or the operation never
     * completes and the communicator's timeout aborts it).
     */
    default void allToAllV(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts, StreamHandle stream) {
        throw unsupported("allToAllV");
    }

    /** In-place broadcast from {@code src}. */
    default void broadcast(Tensor tensor, int src, StreamHandle stream) {
        throw unsupported("broadcast");
    }

    default void send(Tensor tensor, int dst, StreamHandle stream) {
        throw unsupported("send");
    }

    default void recv(Tensor tensor, int src, StreamHandle stream) {
        throw unsupported("recv");
    }

    /** Runs the sends and receives as one group call (they may complete in any order). */
    default void batchP2P(List<P2POp> ops, StreamHandle stream) {
        throw unsupported("batchP2P");
    }

    /** Waits until the work enqueued on {@code stream} has finished (bounded by the timeout). */
    void synchronize(StreamHandle stream);

    /** True after {@link #abort()} or {@link #close()}, or once an error poisoned it. */
    boolean isClosed();

    /** Aborts in-flight operations (bounded) and poisons the communicator. Idempotent. */
    void abort();

    /**
     * {@link #abort()}, waiting at most {@code timeout} for the library to release the communicator
     * (an abort that does not return by then is abandoned on a helper thread, never waited for). The
     * default calls {@link #abort()}, which is bounded by the provider's own abort timeout.
     */
    default void abort(Duration timeout) {
        abort();
    }

    /**
     * Goes on without {@code excludedRanks} ({@code ncclCommShrink} with {@code NCCL_SHRINK_ABORT}):
     * returns a communicator of the other ranks over {@code survivors}, the control plane of the
     * same members made by {@link ProcessGroup#shrink} with the same excluded ranks (ranks
     * renumbered in ascending order, same device). Called by every rank that stays; the excluded
     * ranks do not call it (they may be dead).
     *
     * <p>This communicator is aborted in any case (operations in flight on it fail, later calls fail
     * fast) and is of no further use. A provider whose library shrinks natively does so; the others
     * abort and bootstrap a fresh communicator over {@code survivors} (a new unique id). The whole
     * call, abort included, is bounded by {@code timeout}.
     *
     * @param excludedRanks ranks of this communicator to leave out, without duplicates, not this rank
     * @param survivors     the CPU group of the remaining ranks ({@code survivors.size()} is
     *                      {@code worldSize()} less the excluded ranks, and its rank is this rank's
     *                      new rank)
     * @throws IllegalArgumentException      if the ranks or {@code survivors} do not fit (before anything is done)
     * @throws UnsupportedByBackendException  if the provider cannot shrink (the default)
     * @throws io.jcomm.api.CommTimeoutException when the survivors do not all take part in time
     */
    default DeviceCommunicator shrink(List<Integer> excludedRanks, ProcessGroup survivors, Duration timeout) {
        throw unsupported("shrink");
    }

    /** Releases the communicator; never hangs. Idempotent. */
    @Override
    void close();
}
