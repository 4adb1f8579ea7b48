package io.jcomm.cpu.spi;

import io.jcomm.api.Deadline;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;

/**
 * One transport's implementation of the CPU collectives (c10d's {@code Backend}): Gloo through JNI,
 * or pure Java over TCP. The user-facing {@link io.jcomm.api.ProcessGroup} wraps a backend and does
 * everything that is the same for all backends: argument validation, world-size-1 shortcuts,
 * object collectives on top of byte collectives, asynchronous ordering, and poisoning after a
 * failure. A backend therefore receives only validated arguments:
 *
 * <ul>
 *   <li>host tensors of matching dtypes and sizes (as documented on {@link io.jcomm.api.ProcessGroup}),</li>
 *   <li>ranks in range, {@code size() > 1},</li>
 *   <li>calls from one thread at a time, in the same order on every rank.</li>
 * </ul>
 *
 * <p>A backend must honour the deadline of every call, and turn every failure into a typed
 * {@link io.jcomm.api.CommException} naming the group, rank and operation:
 * {@link io.jcomm.api.PeerFailureException} when a peer died or a connection broke,
 * {@link io.jcomm.api.CommTimeoutException} when the deadline passed,
 * {@link io.jcomm.api.CollectiveMismatchException} when it detects inconsistent arguments across
 * ranks, {@link io.jcomm.api.BackendException} otherwise. After a failure the caller poisons the
 * group and calls {@link #close()}; {@link #close()} must also unblock a call in progress (from
 * another thread).
 */
public interface CpuBackend extends AutoCloseable {

    /** The backend's name, e.g. {@code tcp} or {@code gloo}. */
    String name();

    void barrier(Deadline deadline);

    /** In place, from {@code src}. */
    void broadcast(Tensor tensor, int src, Deadline deadline);

    /** In place. {@code F16}/{@code BF16} reduce in float; {@code AVG} = sum / size. */
    void allReduce(Tensor tensor, ReduceOp op, Deadline deadline);

    /** {@code output.numel() == size * input.numel()}. */
    void allGather(Tensor output, Tensor input, Deadline deadline);

    /** {@code input.numel() == counts[rank]}, {@code output.numel() == sum(counts)}. */
    void allGatherV(Tensor output, Tensor input, long[] counts, Deadline deadline);

    /** {@code output} is non-null only on {@code dst}. */
    void gather(Tensor output, Tensor input, int dst, Deadline deadline);

    /** {@code input} is non-null only on {@code src}. */
    void scatter(Tensor output, Tensor input, int src, Deadline deadline);

    /** {@code input.numel() == size * output.numel()}. */
    void reduceScatter(Tensor output, Tensor input, ReduceOp op, Deadline deadline);

    void send(Tensor tensor, int dst, int tag, Deadline deadline);

    void recv(Tensor tensor, int src, int tag, Deadline deadline);

    /** Releases resources and fails any call in progress. Idempotent; never blocks for long. */
    @Override
    void close();
}
