package io.jcomm.actor;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.DType;
import io.jcomm.api.OpContext;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.ray.ActorId;
import io.jcomm.api.ray.Communicator;
import io.jcomm.api.ray.TensorAllocator;
import io.jcomm.parallel.GroupCoordinator;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Ray's compiled-graph {@link Communicator} over an existing pipeline-parallel group (vLLM's
 * {@code RayPPCommunicator}): no new connections, the group's own data plane.
 *
 * <ul>
 *   <li>Ranks are PP group ranks; the rank Ray passes to {@link #initialize(int)} is ignored (the
 *       group already knows this process's rank).</li>
 *   <li>Actors map to ranks through an {@link ActorRankMap} gathered over the group
 *       ({@link ActorRankMapper}); an unknown actor is an {@link IllegalArgumentException} naming it.</li>
 *   <li>{@link #send} and {@link #recv} go to a peer rank through the group's device communicator
 *       (host tensors through its host path); after a receive the stream is synchronised and the
 *       closed flag checked.</li>
 *   <li>{@link #allReduce}, {@link #allGather} and {@link #reduceScatter} work over the PP group
 *       (vLLM's adapter leaves them unimplemented).</li>
 *   <li>{@link #destroy()} marks the communicator closed; it does not touch the PP group, which
 *       belongs to its {@code ParallelState}. Every later call fails with
 *       {@link CommClosedException}, and so does a receive that was waiting when it was destroyed,
 *       as soon as its transfer ends (abandoning it midway would desynchronise the shared group).</li>
 * </ul>
 * One thread drives it at a time, like its group; {@link #destroy()} may come from any thread.
 */
public final class PipelineCommunicator implements Communicator {

    private static final Logger LOG = LoggerFactory.getLogger(PipelineCommunicator.class);

    private final GroupCoordinator group;
    private final ActorRankMap actors;
    private volatile boolean initialized;
    private volatile boolean closed;

    /**
     * An adapter over {@code group} with an already gathered map (its size must be the group's).
     */
    public PipelineCommunicator(GroupCoordinator group, ActorRankMap actors) {
        this.group = Objects.requireNonNull(group, "group");
        this.actors = Objects.requireNonNull(actors, "actors");
        if (actors.size() != group.worldSize()) {
            throw new IllegalArgumentException("actor map of " + actors.size() + " for a group of " + group.worldSize());
        }
    }

    /** Gathers the actor ids over {@code group} (collective) and makes the adapter. */
    public static PipelineCommunicator create(GroupCoordinator group, ActorId self) {
        return new PipelineCommunicator(group, ActorRankMapper.map(group, self));
    }

    private OpContext ctx(String op) {
        return OpContext.of(group.name(), group.rankInGroup(), op);
    }

    private void checkOpen(String op) {
        if (closed) {
            throw new CommClosedException(ctx(op), "communicator destroyed");
        }
    }

    /** The map of actors to ranks. */
    public ActorRankMap actorRankMap() {
        return actors;
    }

    /** The PP group underneath. */
    public GroupCoordinator group() {
        return group;
    }

    @Override
    public void initialize(int rank) {
        checkOpen("initialize");
        if (rank != group.rankInGroup()) {
            LOG.debug("group {}: ignoring rank {} from the graph; this process is rank {} of the PP group",
                    group.name(), rank, group.rankInGroup());
        }
        initialized = true;
    }

    /** Whether {@link #initialize} was called. */
    public boolean isInitialized() {
        return initialized;
    }

    @Override
    public List<ActorId> actorHandles() {
        checkOpen("actorHandles");
        return actors.actors();
    }

    @Override
    public int rankOf(ActorId actor) {
        checkOpen("rankOf");
        return actors.rankOf(actor);
    }

    @Override
    public int selfRank() {
        checkOpen("selfRank");
        return group.rankInGroup();
    }

    @Override
    public int worldSize() {
        return group.worldSize();
    }

    @Override
    public void send(Tensor tensor, int peerRank) {
        checkOpen("send");
        try {
            group.send(tensor, peerRank);
        } catch (CommException e) {
            throw closedOr(e, "send");
        }
    }

    @Override
    public Tensor recv(long[] shape, DType dtype, int peerRank, TensorAllocator allocator) {
        checkOpen("recv");
        Objects.requireNonNull(allocator, "allocator");
        Tensor t = allocator.allocate(shape, dtype);
        if (t == null || t.dtype() != dtype || !Arrays.equals(t.shape(), shape)) {
            throw ctx("recv").invalidArgument("the allocator returned " + t + " for " + dtype
                    + Arrays.toString(shape));
        }
        try {
            group.recv(t, peerRank);
            if (!t.isHost()) {
                group.deviceCommunicator().ifPresent(dc -> dc.synchronize(group.stream()));
            }
        } catch (CommException e) {
            throw closedOr(e, "recv");
        }
        if (closed) {
            throw new CommClosedException(ctx("recv"), "communicator destroyed while the receive was in progress");
        }
        return t;
    }

    private CommException closedOr(CommException e, String op) {
        if (closed && !(e instanceof CommClosedException)) {
            return new CommClosedException(ctx(op), "communicator destroyed while the " + op + " was in progress", e);
        }
        return e;
    }

    @Override
    public StreamHandle recvStream() {
        return group.stream();
    }

    @Override
    public StreamHandle sendStream() {
        return group.stream();
    }

    @Override
    public void allReduce(Tensor output, Tensor input, ReduceOp op) {
        checkOpen("allReduce");
        group.allReduce(output, input, op);
    }

    /** Gathers every rank's {@code input} into {@code output} along dimension 0, in rank order. */
    @Override
    public void allGather(Tensor output, Tensor input) {
        checkOpen("allGather");
        group.allGather(output, input, 0);
    }

    /** Reduces {@code input} and gives rank r part r of the result (dimension 0) in {@code output}. */
    @Override
    public void reduceScatter(Tensor output, Tensor input, ReduceOp op) {
        checkOpen("reduceScatter");
        group.reduceScatter(output, input, op, 0);
    }

    @Override
    public void destroy() {
        closed = true;
    }

    public boolean isDestroyed() {
        return closed;
    }

    @Override
    public String transportName() {
        return group.transportName();
    }

    @Override
    public String toString() {
        return "PipelineCommunicator{" + group.name() + " rank " + group.rankInGroup() + "/" + group.worldSize()
                + ", " + transportName() + (closed ? ", destroyed" : "") + "}";
    }
}
