package io.jcomm.api.ray;

import io.jcomm.api.DType;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import java.util.List;
import java.util.UUID;

/**
 * The per-transport communicator a compiled actor graph calls, modelled on Ray's
 * {@code ray.experimental.channel.communicator.Communicator}: actors are identified by
 * {@link ActorId}, ranks are positions in {@link #actorHandles()}.
 *
 * <p>Contract: {@link #initialize(int)} is called once before anything else; {@link #rankOf} of an
 * actor that is not a member fails with {@link IllegalArgumentException} naming the id; after
 * {@link #destroy()} every call, including a {@link #recv} already waiting, fails with
 * {@link io.jcomm.api.CommClosedException}.
 */
public interface Communicator extends AutoCloseable {

    /** Called once per process; {@code rank} is the rank the graph assigned (an adapter may ignore it). */
    void initialize(int rank);

    /** Members in rank order. */
    List<ActorId> actorHandles();

    /** The rank of {@code actor}. */
    int rankOf(ActorId actor);

    /** This process's rank, once initialised. */
    int selfRank();

    int worldSize();

    /** Sends {@code tensor} to {@code peerRank}. */
    void send(Tensor tensor, int peerRank);

    /** Receives a tensor of the given shape and dtype from {@code peerRank} into a buffer from {@code allocator}. */
    Tensor recv(long[] shape, DType dtype, int peerRank, TensorAllocator allocator);

    /** The stream receives run on. */
    StreamHandle recvStream();

    /** The stream sends run on. */
    StreamHandle sendStream();

    /*
     * The collectives take the output first, as every jcomm API does (ProcessGroup, DeviceCommunicator,
     * GroupCoordinator; torch.distributed's all_gather_into_tensor(output, input)), so that a swapped pair of
     * tensors in a Java caller reads wrong wherever it is written. Ray's Python Communicator takes
     * (send_buf, recv_buf): an adapter from Ray's calls swaps the pair once, at the boundary.
     */

    /** Ray's {@code allreduce(send_buf, recv_buf, op)}: {@code output = reduce(input)} over the members. */
    void allReduce(Tensor output, Tensor input, ReduceOp op);

    /** Ray's {@code allgather(send_buf, recv_buf)}: every member's {@code input}, in rank order, into {@code output}. */
    void allGather(Tensor output, Tensor input);

    /** Ray's {@code reducescatter(send_buf, recv_buf, op)}: this member's part of {@code reduce(input)} into {@code output}. */
    void reduceScatter(Tensor output, Tensor input, ReduceOp op);

    /** Marks the communicator closed; pending and later calls fail. Idempotent. */
    void destroy();

    /** The transport's name, e.g. {@code cuda:nccl}. */
    String transportName();

    @Override
    default void close() {
        destroy();
    }

    /** A fresh, unique communicator id (32 hex characters), like Ray's. */
    static String generateCommunicatorId() {
        UUID u = UUID.randomUUID();
        return new ActorId(u.getMostSignificantBits(), u.getLeastSignificantBits()).toHex();
    }
}
