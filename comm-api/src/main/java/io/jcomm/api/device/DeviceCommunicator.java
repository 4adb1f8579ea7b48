package io.jcomm.api.device;

import io.jcomm.api.Device;
import io.jcomm.api.OpContext;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.UnsupportedByBackendException;
import java.util.List;

/**
 * The data plane of one group: tensor collectives on one device type (NCCL for CUDA, HCCL for
 * Ascend, host memory for CPU), created by a {@link DeviceCommunicatorProvider}.
 *
 * <h2>Contract</h2>
 * <ul>
 *   <li>Ranks ({@code src}, {@code dst}, peers) are group-local.</li>
 *   <li>Every operation is enqueued on the caller's {@code stream} (device communicators never
 *       create hidden streams, so calls can be graph-captured) and may return before the data has
 *       moved; {@link #synchronize(StreamHandle)} waits for the stream. Host communicators complete
 *       before returning and ignore the stream.</li>
 *   <li>Tensors must live on {@link #device()}'s type; wrong device, dtype or size fails with
 *       {@link io.jcomm.api.ProtocolException} before anything is enqueued.</li>
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

    /** {@code output = reduce(input)} across ranks; {@code input == output} is in place. */
    default void allReduce(Tensor input, Tensor output, ReduceOp op, StreamHandle stream) {
        throw unsupported("allReduce");
    }

    /**
     * Gathers {@code input} from every rank and concatenates along {@code dim} (negative counts from
     * the end): {@code output.size(dim) == worldSize() * input.size(dim)}, other dims equal.
     */
    default void allGather(Tensor input, Tensor output, int dim, StreamHandle stream) {
        throw unsupported("allGather");
    }

    /**
     * Reduces {@code input} across ranks and splits the result along {@code dim} into
     * {@code worldSize()} equal parts; rank r receives part r in {@code output}.
     */
    default void reduceScatter(Tensor input, Tensor output, ReduceOp op, int dim, StreamHandle stream) {
        throw unsupported("reduceScatter");
    }

    /**
     * Like {@link #allGather} but only {@code dst} receives the result ({@code output} may be
     * {@code null} elsewhere).
     */
    default void gather(Tensor input, Tensor output, int dst, int dim, StreamHandle stream) {
        throw unsupported("gather");
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

    /** Releases the communicator; never hangs. Idempotent. */
    @Override
    void close();
}
