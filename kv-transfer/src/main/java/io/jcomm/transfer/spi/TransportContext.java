package io.jcomm.transfer.spi;

import io.jcomm.api.Deadline;
import io.jcomm.transfer.Notification;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.TransferOptions;
import java.nio.file.Path;

/** What the agent gives a transport it opens. Thread safe. */
public interface TransportContext {

    /** The agent's options (name, token, tcp settings, shm directory, host id). */
    TransferOptions options();

    /** The directory of this agent's {@link io.jcomm.transfer.MemoryKind#SHARED} region files ({@code r<id>-g<generation hex>}). */
    Path sharedRegionDirectory();

    /**
     * Checks a remote request against this agent's registrations and pins the range.
     *
     * @param peer the requesting agent, for messages
     * @throws io.jcomm.transfer.TransferRefusedException when the region id or generation is not live
     *         ({@code STALE}), the range is outside the region ({@code OUT_OF_RANGE}) or the region does
     *         not grant {@code access} ({@code PERMISSION})
     */
    RegionAccess acquire(int regionId, long generation, long offset, long length, Permission access, String peer);

    /**
     * Hands a notification to the agent's queue, waiting up to the options' offer timeout (and the
     * deadline) for room.
     *
     * @throws io.jcomm.transfer.TransferRefusedException {@code NOTIFICATION_QUEUE_FULL} when no room came
     */
    void deliver(Notification notification, Deadline deadline);
}
