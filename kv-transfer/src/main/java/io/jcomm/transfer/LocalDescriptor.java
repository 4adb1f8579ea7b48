package io.jcomm.transfer;

import java.util.Objects;

/**
 * A byte range of a region registered with this agent: the local side of a transfer (the source of
 * a write, the destination of a read). Made by {@link MemoryRegion#slice}; checked against the
 * region's bounds when made.
 *
 * @param region the registered region
 * @param offset first byte within the region
 * @param length bytes
 */
public record LocalDescriptor(MemoryRegion region, long offset, long length) {

    public LocalDescriptor {
        Objects.requireNonNull(region, "region");
        if (offset < 0 || length < 0 || offset > region.length() - length) {
            throw new IllegalArgumentException("[" + offset + ", +" + length + ") outside region " + region.id()
                    + " of " + region.length() + " bytes");
        }
    }
}
