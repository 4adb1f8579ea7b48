package io.jcomm.transfer.spi;

import java.nio.ByteBuffer;

/**
 * A checked, pinned range of a region this agent registered, handed to a transport serving a remote
 * request. While it is open the region's memory stays registered; deregistration marks it
 * {@link #revoked()} and waits for it to be closed. Not thread safe; close exactly once.
 */
public interface RegionAccess extends AutoCloseable {

    /** The granted range (position 0, limit its length), a view for this access only. */
    ByteBuffer buffer();

    /** True once the owner began deregistering the region: stop touching it and close. */
    boolean revoked();

    /**
     * After a write: makes the bytes written into {@link #buffer()} (up to its position) part of the
     * registered memory. Nothing to do for host memory; a device region copies them from its staging
     * buffer to the device here.
     *
     * @throws io.jcomm.transfer.TransferRefusedException with reason {@code DEVICE} when that copy fails
     */
    default void commit() {
    }

    /** Unpins the region. */
    @Override
    void close();
}
