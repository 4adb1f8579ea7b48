package io.jcomm.device;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.Device;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.UnsupportedByBackendException;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.P2POp;
import io.jcomm.runtime.FailureLatch;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The state every {@link DeviceCommunicator} shares: identity (provider name, group, rank, world
 * size, device), one {@link OpContext} per operation made once, and the closed/poisoned state with
 * its first cause, so that after a failure or {@link #close()} every call fails fast with
 * {@link CommClosedException} carrying the original cause.
 *
 * <p>Subclasses call {@link #ensureOpen(OpContext)} first in every operation, then
 * {@link DeviceArgs} checks, then do the work; on a failure that leaves the communicator unusable
 * they call {@link #poison(CommException)}.
 *
 * <p>It implements {@link #allToAll} and {@link #allToAllV} as one {@link #batchP2P} call (a
 * receive and a send per peer, self included), so a provider that implements {@code batchP2P} gets
 * them without overriding; a provider with a native all-to-all overrides them.
 */
public abstract class AbstractDeviceCommunicator implements DeviceCommunicator {

    /** The operations of the SPI, with the names used in error contexts. */
    public enum Op {
        ALL_REDUCE("allReduce"), ALL_GATHER("allGather"), REDUCE_SCATTER("reduceScatter"), GATHER("gather"),
        BROADCAST("broadcast"), SEND("send"), RECV("recv"), BATCH_P2P("batchP2P"), ALL_TO_ALL("allToAll"),
        ALL_TO_ALL_V("allToAllV"), SYNCHRONIZE("synchronize"), INIT("init"), ABORT("abort"), CLOSE("close"),
        SHRINK("shrink");

        private final String opName;

        Op(String opName) {
            this.opName = opName;
        }

        public String opName() {
            return opName;
        }
    }

    private final String name;
    private final String groupName;
    private final int rank;
    private final int worldSize;
    private final Device device;
    private final Map<Op, OpContext> contexts = new EnumMap<>(Op.class);
    private final FailureLatch poison = new FailureLatch();

    protected AbstractDeviceCommunicator(String name, String groupName, int rank, int worldSize, Device device) {
        this.name = Objects.requireNonNull(name, "name");
        this.groupName = Objects.requireNonNull(groupName, "groupName");
        this.device = Objects.requireNonNull(device, "device");
        if (worldSize < 1 || rank < 0 || rank >= worldSize) {
            throw new IllegalArgumentException("rank " + rank + " of world size " + worldSize);
        }
        this.rank = rank;
        this.worldSize = worldSize;
        for (Op op : Op.values()) {
            contexts.put(op, OpContext.of(groupName, rank, op.opName()));
        }
    }

    @Override
    public final String name() {
        return name;
    }

    @Override
    public final String groupName() {
        return groupName;
    }

    @Override
    public final int rank() {
        return rank;
    }

    @Override
    public final int worldSize() {
        return worldSize;
    }

    @Override
    public final Device device() {
        return device;
    }

    /** The error context of {@code op} on this rank (made once). */
    protected final OpContext ctx(Op op) {
        return contexts.get(op);
    }

    /**
     * Throws {@link CommClosedException} (with the poisoning cause) if the communicator was closed,
     * aborted or poisoned.
     */
    protected final void ensureOpen(OpContext ctx) {
        CommException p = poison.first();
        if (p != null) {
            throw new CommClosedException(ctx, name + " communicator is unusable: " + p.detail(), p);
        }
    }

    /**
     * Marks the communicator unusable with {@code cause} unless it already is.
     *
     * @return true if this call poisoned it (the first cause wins)
     */
    protected final boolean poison(CommException cause) {
        return poison.tripFirst(Objects.requireNonNull(cause, "cause"));
    }

    /** The cause that made the communicator unusable, or {@code null} while it is usable. */
    public final CommException poisonCause() {
        return poison.first();
    }

    /**
     * Equal-split all-to-all as one {@link #batchP2P} call: arguments are checked with
     * {@link DeviceArgs#allToAll} (and the stream, on a device) under this operation's context, then
     * the batch runs; a failure of the batch itself names {@code batchP2P}.
     */
    @Override
    public void allToAll(Tensor output, Tensor input, StreamHandle stream) {
        OpContext c = ctx(Op.ALL_TO_ALL);
        ensureOpen(c);
        long[] counts = DeviceArgs.allToAll(c, output, input, worldSize, device);
        if (!device.isCpu()) {
            DeviceArgs.requireStream(c, stream, device);
        }
        batchAllToAll(c, allToAllOps(output, input, counts, counts), stream);
    }

    /**
     * All-to-all with per-rank counts as one {@link #batchP2P} call, after
     * {@link DeviceArgs#allToAllV}; see {@link #allToAll}.
     */
    @Override
    public void allToAllV(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts, StreamHandle stream) {
        OpContext c = ctx(Op.ALL_TO_ALL_V);
        ensureOpen(c);
        long[][] counts = DeviceArgs.allToAllV(c, output, input, outputCounts, inputCounts, rank, worldSize, device);
        if (!device.isCpu()) {
            DeviceArgs.requireStream(c, stream, device);
        }
        batchAllToAll(c, allToAllOps(output, input, counts[0], counts[1]), stream);
    }

    /** Runs the batch; a provider without {@code batchP2P} refuses the all-to-all by its own name. */
    private void batchAllToAll(OpContext c, List<P2POp> ops, StreamHandle stream) {
        try {
            batchP2P(ops, stream);
        } catch (UnsupportedByBackendException e) {
            if (!Op.BATCH_P2P.opName().equals(e.unsupportedOperation())) {
                throw e;
            }
            throw new UnsupportedByBackendException(c, name, c.operation(), e);
        }
    }

    /**
     * The point-to-point operations of an all-to-all whose arguments were checked: for every peer
     * {@code p} in rank order, a receive of {@code outputCounts[p]} elements into {@code output}'s
     * slice for {@code p} and a send of {@code input}'s slice for {@code p} ({@code inputCounts[p]}
     * elements), leaving out zero counts. The pair with this rank itself is a matched self pair.
     */
    protected static List<P2POp> allToAllOps(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts) {
        List<P2POp> ops = new ArrayList<>(2 * inputCounts.length);
        long in = 0;
        long out = 0;
        for (int p = 0; p < inputCounts.length; p++) {
            if (outputCounts[p] > 0) {
                ops.add(P2POp.recv(output.flatSlice(out, outputCounts[p]), p));
            }
            if (inputCounts[p] > 0) {
                ops.add(P2POp.send(input.flatSlice(in, inputCounts[p]), p));
            }
            in += inputCounts[p];
            out += outputCounts[p];
        }
        return ops;
    }

    /**
     * {@inheritDoc}
     *
     * <p>Checks the arguments ({@link DeviceArgs#shrink}), then lets the library shrink
     * ({@link #shrinkNatively}); a provider whose library cannot is aborted ({@link #abort(Duration)},
     * within the deadline) and bootstraps a fresh communicator over {@code survivors}
     * ({@link #recreate}).
     */
    @Override
    public DeviceCommunicator shrink(List<Integer> excludedRanks, ProcessGroup survivors, Duration timeout) {
        OpContext c = ctx(Op.SHRINK);
        int[] excluded = DeviceArgs.shrink(c, excludedRanks, survivors, timeout, rank, worldSize);
        Deadline deadline = Deadline.after(timeout);
        DeviceCommunicator shrunk = shrinkNatively(excluded, survivors, deadline);
        if (shrunk != null) {
            return shrunk;
        }
        abort(deadline.remaining());
        if (deadline.isExpired()) {
            throw new CommTimeoutException(c, "the abort took the whole shrink timeout of " + timeout.toMillis() + " ms");
        }
        return recreate(survivors, deadline);
    }

    /**
     * Shrinks through the library ({@code ncclCommShrink}), aborting this communicator, within
     * {@code deadline}; {@code null} when the library cannot (the default), and then nothing was done.
     *
     * @param excluded the excluded ranks, checked and sorted
     */
    protected DeviceCommunicator shrinkNatively(int[] excluded, ProcessGroup survivors, Deadline deadline) {
        return null;
    }

    /**
     * A fresh communicator of this provider over {@code survivors} (collective over them: a new unique
     * id through that group), bootstrapped within {@code deadline}; this one is aborted already. The
     * default refuses with {@link UnsupportedByBackendException}.
     */
    protected DeviceCommunicator recreate(ProcessGroup survivors, Deadline deadline) {
        throw unsupported("shrink");
    }

    @Override
    public final boolean isClosed() {
        return poison.isTripped();
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "(" + name + " group=" + groupName + " rank=" + rank + "/" + worldSize
                + " device=" + device + (isClosed() ? " closed" : "") + ")";
    }
}
