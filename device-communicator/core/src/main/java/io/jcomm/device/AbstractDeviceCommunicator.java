package io.jcomm.device;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.Device;
import io.jcomm.api.OpContext;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.internal.FailureLatch;
import java.util.EnumMap;
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
 */
public abstract class AbstractDeviceCommunicator implements DeviceCommunicator {

    /** The operations of the SPI, with the names used in error contexts. */
    public enum Op {
        ALL_REDUCE("allReduce"), ALL_GATHER("allGather"), REDUCE_SCATTER("reduceScatter"), GATHER("gather"),
        BROADCAST("broadcast"), SEND("send"), RECV("recv"), BATCH_P2P("batchP2P"), SYNCHRONIZE("synchronize"),
        INIT("init"), ABORT("abort"), CLOSE("close");

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
