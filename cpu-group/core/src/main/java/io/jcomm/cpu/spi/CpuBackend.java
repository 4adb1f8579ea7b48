package io.jcomm.cpu.spi;

import io.jcomm.api.DType;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.UnsupportedByBackendException;

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
 * A backend that checks its arguments anyway (when driven directly) rejects bad ones with
 * {@link IllegalArgumentException} before anything is sent, never with a {@code CommException}: a
 * bad argument is a programming error, not a communication failure.
 *
 * <p>A backend must honour the deadline of every call, and turn every failure into a typed
 * {@link io.jcomm.api.CommException} naming the group, rank and operation:
 * {@link io.jcomm.api.PeerFailureException} when a peer died or a connection broke,
 * {@link io.jcomm.api.CommTimeoutException} when the deadline passed,
 * {@link io.jcomm.api.CollectiveMismatchException} when it detects inconsistent arguments across
 * ranks, {@link io.jcomm.api.BackendException} otherwise. After a failure the caller poisons the
 * group and calls {@link #close()}; {@link #close()} must also unblock a call in progress (from
 * another thread).
 *
 * <p>The byte-payload methods ({@link #broadcastBytes}, {@link #allGatherBytes}, {@link #gatherBytes},
 * {@link #sendBytes}, {@link #recvBytes}) carry the encoded objects of the object collectives. Their
 * default implementations use the tensor operations (a length exchange, then the payload, as torch
 * does); a backend may override them to send each payload as one length-prefixed message. Every
 * received length is checked against {@code maxBytes} before anything is allocated.
 */
public interface CpuBackend extends AutoCloseable {

    /** The backend's name, e.g. {@code tcp} or {@code gloo}. */
    String name();

    /**
     * What every operation a backend does not implement throws: each operation of this interface
     * defaults to it, so that a new operation is additive (existing backends keep compiling and refuse
     * it with a typed error; the group stays usable). See "How to add a collective" in
     * {@code docs/ARCHITECTURE.md}.
     */
    default UnsupportedByBackendException unsupported(String operation) {
        return new UnsupportedByBackendException(OpContext.NONE, name(), operation);
    }

    /**
     * Every member's {@link CpuBackendContext#memberTag()}, by group rank (this rank's own included),
     * when this backend published them with the members' addresses at creation; empty when it did not
     * (the caller then exchanges them with a collective). The default is empty.
     */
    default java.util.Optional<java.util.List<String>> memberTags() {
        return java.util.Optional.empty();
    }

    default void barrier(Deadline deadline) {
        throw unsupported("barrier");
    }

    /**
     * Every rank reports to rank 0, which waits for all until the deadline and then releases them;
     * on rank 0 a deadline passed with ranks missing is a {@link io.jcomm.api.CommTimeoutException}
     * naming every missing rank. See {@link io.jcomm.api.ProcessGroup#monitoredBarrier}.
     */
    default void monitoredBarrier(Deadline deadline) {
        throw unsupported("monitoredBarrier");
    }

    /** In place, from {@code src}. */
    default void broadcast(Tensor tensor, int src, Deadline deadline) {
        throw unsupported("broadcast");
    }

    /** In place. {@code F16}/{@code BF16} reduce in float; {@code AVG} = sum / size. */
    default void allReduce(Tensor tensor, ReduceOp op, Deadline deadline) {
        throw unsupported("allReduce");
    }

    /** {@code output.numel() == size * input.numel()}. */
    default void allGather(Tensor output, Tensor input, Deadline deadline) {
        throw unsupported("allGather");
    }

    /** {@code input.numel() == counts[rank]}, {@code output.numel() == sum(counts)}. */
    default void allGatherV(Tensor output, Tensor input, long[] counts, Deadline deadline) {
        throw unsupported("allGatherV");
    }

    /**
     * Equal splits: {@code input.numel() == output.numel()}, divisible by the group size; distinct
     * tensors of one dtype.
     */
    default void allToAll(Tensor output, Tensor input, Deadline deadline) {
        throw unsupported("allToAll");
    }

    /**
     * {@code input.numel() == sum(inputCounts)}, {@code output.numel() == sum(outputCounts)}, one
     * non-negative count per rank each; distinct tensors of one dtype. Whether peers agree is the
     * backend's to check.
     */
    default void allToAllV(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts, Deadline deadline) {
        throw unsupported("allToAllV");
    }

    /** {@code output} is non-null only on {@code dst}. */
    default void gather(Tensor output, Tensor input, int dst, Deadline deadline) {
        throw unsupported("gather");
    }

    /** {@code input} is non-null only on {@code src}. */
    default void scatter(Tensor output, Tensor input, int src, Deadline deadline) {
        throw unsupported("scatter");
    }

    /** {@code input.numel() == size * output.numel()}. */
    default void reduceScatter(Tensor output, Tensor input, ReduceOp op, Deadline deadline) {
        throw unsupported("reduceScatter");
    }

    /**
     * Every send and receive of {@code ops} (checked: host tensors, valid peers other than this rank),
     * returning when all completed. The default issues the sends, then the receives, through
     * {@link #send}/{@link #recv}: right for a backend whose sends return before the peer receives
     * (gloo); a backend whose sends can wait for the peer must override it (tcp posts everything in
     * one operation).
     */
    default void batchP2P(java.util.List<io.jcomm.api.device.P2POp> ops, int tag, Deadline deadline) {
        for (io.jcomm.api.device.P2POp op : ops) {
            if (op.kind() == io.jcomm.api.device.P2POp.Kind.SEND) {
                send(op.tensor(), op.peer(), tag, deadline);
            }
        }
        for (io.jcomm.api.device.P2POp op : ops) {
            if (op.kind() == io.jcomm.api.device.P2POp.Kind.RECV) {
                recv(op.tensor(), op.peer(), tag, deadline);
            }
        }
    }

    default void send(Tensor tensor, int dst, int tag, Deadline deadline) {
        throw unsupported("send");
    }

    default void recv(Tensor tensor, int src, int tag, Deadline deadline) {
        throw unsupported("recv");
    }

    // ---- variable-size byte payloads (object collectives); additive, with tensor-based defaults ----

    /**
     * Tag reserved for the object point-to-point messages of the default {@link #sendBytes} /
     * {@link #recvBytes}. The group only passes non-negative tags from users, so negative tags are
     * free for internal use.
     */
    int OBJECT_TAG = -1;

    /**
     * Broadcasts {@code payload} (meaningful on {@code src} only, may be {@code null} elsewhere) and
     * returns {@code src}'s payload on every rank.
     *
     * @throws ProtocolException if a received length is negative or exceeds {@code maxBytes}
     */
    default byte[] broadcastBytes(byte[] payload, int src, int maxBytes, Deadline deadline) {
        boolean root = payload != null;
        Tensor len = Tensor.allocate(DType.I64, 1);
        if (root) {
            len.setLong(0, payload.length);
        }
        broadcast(len, src, deadline);
        int n = checkedLength(len.getLong(0), maxBytes, src);
        Tensor data = root ? Tensor.ofBytes(payload) : Tensor.allocate(DType.U8, n);
        broadcast(data, src, deadline);
        return root ? payload : data.toByteArray();
    }

    /** Every rank's {@code payload}, indexed by group rank. */
    default byte[][] allGatherBytes(byte[] payload, int rank, int size, int maxBytes, Deadline deadline) {
        Tensor lens = Tensor.allocate(DType.I64, size);
        allGather(lens, Tensor.ofLongs(payload.length), deadline);
        long[] counts = new long[size];
        long total = 0;
        for (int r = 0; r < size; r++) {
            counts[r] = r == rank ? payload.length : checkedLength(lens.getLong(r), maxBytes, r);
            total += counts[r];
        }
        if (total > Integer.MAX_VALUE) {
            throw new ProtocolException("all-gathered payloads total " + total + " bytes, over the 2 GiB limit");
        }
        Tensor out = Tensor.allocate(DType.U8, total);
        allGatherV(out, Tensor.ofBytes(payload), counts, deadline);
        byte[][] result = new byte[size][];
        long off = 0;
        for (int r = 0; r < size; r++) {
            result[r] = out.flatSlice(off, counts[r]).toByteArray();
            off += counts[r];
        }
        return result;
    }

    /**
     * Every rank's {@code payload} on {@code dst} (indexed by group rank); {@code null} on the other
     * ranks. The default exchanges lengths with an all-gather and pads payloads to the longest one.
     */
    default byte[][] gatherBytes(byte[] payload, int dst, int rank, int size, int maxBytes, Deadline deadline) {
        Tensor lens = Tensor.allocate(DType.I64, size);
        allGather(lens, Tensor.ofLongs(payload.length), deadline);
        int max = 0;
        int[] counts = new int[size];
        for (int r = 0; r < size; r++) {
            counts[r] = r == rank ? payload.length : checkedLength(lens.getLong(r), maxBytes, r);
            max = Math.max(max, counts[r]);
        }
        if ((long) max * size > Integer.MAX_VALUE) {
            throw new ProtocolException("gathered payloads of up to " + max + " bytes exceed the 2 GiB limit");
        }
        Tensor in = Tensor.allocate(DType.U8, max);
        in.buffer().put(payload);
        Tensor out = rank == dst ? Tensor.allocate(DType.U8, (long) max * size) : null;
        gather(out, in, dst, deadline);
        if (rank != dst) {
            return null;
        }
        byte[][] result = new byte[size][];
        for (int r = 0; r < size; r++) {
            result[r] = out.flatSlice((long) r * max, counts[r]).toByteArray();
        }
        return result;
    }

    /** Sends a byte payload to {@code dst}, matched by {@link #recvBytes} on {@code dst}. */
    default void sendBytes(byte[] payload, int dst, Deadline deadline) {
        send(Tensor.ofLongs(payload.length), dst, OBJECT_TAG, deadline);
        send(Tensor.ofBytes(payload), dst, OBJECT_TAG, deadline);
    }

    /** Receives a byte payload sent with {@link #sendBytes} by {@code src}. */
    default byte[] recvBytes(int src, int maxBytes, Deadline deadline) {
        Tensor len = Tensor.allocate(DType.I64, 1);
        recv(len, src, OBJECT_TAG, deadline);
        Tensor data = Tensor.allocate(DType.U8, checkedLength(len.getLong(0), maxBytes, src));
        recv(data, src, OBJECT_TAG, deadline);
        return data.toByteArray();
    }

    /**
     * Checks a length received from {@code peer}.
     *
     * @throws ProtocolException if it is negative or larger than {@code maxBytes}
     */
    static int checkedLength(long length, int maxBytes, int peer) {
        if (length < 0 || length > maxBytes) {
            throw new ProtocolException("rank " + peer + " announced a payload of " + length
                    + " bytes; the limit is " + maxBytes + " (option object.maxBytes)");
        }
        return (int) length;
    }

    /**
     * Whether the backend already knows that its next call cannot succeed (a peer died, the group was
     * aborted or closed), even when it found out between calls. A backend that finds out only inside
     * calls returns false. Any thread; cheap.
     */
    default boolean hasFailed() {
        return false;
    }

    /**
     * Closes every connection of this backend at once without telling the peers (no goodbye, no abort
     * message), as a crash of this process or a broken connection looks to them, releases its resources
     * and fails any call in progress; the process lives on. Fault injection's {@code cut}
     * ({@link io.jcomm.cpu.FaultPlan}) calls it on a group it already poisoned. Idempotent; never blocks
     * for long. The default is {@link #close()}, whose goodbye (if the backend sends one) peers may see.
     */
    default void cutConnections() {
        close();
    }

    /**
     * A number every member of this incarnation of the group shares and that differs between the
     * incarnations a backend may make in one store namespace (tcp counts them there); 0 for a
     * backend that needs a fresh namespace per incarnation (gloo). A group's
     * {@link io.jcomm.api.ProcessGroup#shrink} makes its successor's namespace from it.
     */
    default long incarnation() {
        return 0;
    }

    /** Releases resources and fails any call in progress. Idempotent; never blocks for long. */
    @Override
    void close();
}
