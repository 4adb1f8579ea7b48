package io.jcomm.transfer.spi;

import io.jcomm.transfer.RemoteDescriptor;
import java.nio.ByteBuffer;
import java.util.Objects;

/**
 * One piece of a transfer: local bytes (from the buffer's position to its limit; a view the transport
 * owns until the transfer completes) and the remote range of the same length.
 *
 * @param local  the local bytes
 * @param remote the remote range
 */
public record Segment(ByteBuffer local, RemoteDescriptor remote) {

    public Segment {
        Objects.requireNonNull(local, "local");
        Objects.requireNonNull(remote, "remote");
        if (local.remaining() != remote.length()) {
            throw new IllegalArgumentException("local has " + local.remaining() + " bytes, remote " + remote.length());
        }
    }
}
