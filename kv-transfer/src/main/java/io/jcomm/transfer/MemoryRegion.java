package io.jcomm.transfer;

import io.jcomm.transfer.internal.RegionTable;
import java.nio.ByteBuffer;
import java.util.Set;

/**
 * Memory registered with a {@link TransferAgent}: a heap or direct buffer, or a shared-memory file
 * the agent made. Remote agents reach it through its {@link #descriptor()}; the agent checks every
 * remote access against this registration (bounds, {@link #permissions()}, {@link #generation()}).
 *
 * <p>Registration does not copy: transfers read and write the registered memory itself, so the
 * caller must not touch a range while a transfer into it is in flight. After
 * {@link TransferAgent#deregister} the region's descriptors are stale and every later remote access
 * is refused; the object stays usable as a value.
 *
 * <p>Immutable; thread safe.
 */
public final class MemoryRegion {

    private final String agent;
    private final RegionTable.Entry entry;

    MemoryRegion(String agent, RegionTable.Entry entry) {
        this.agent = agent;
        this.entry = entry;
    }

    RegionTable.Entry entry() {
        return entry;
    }

    /** The region id (unique among this agent's live regions; reused after deregistration with a new generation). */
    public int id() {
        return entry.id();
    }

    /** The generation of this registration. */
    public long generation() {
        return entry.generation();
    }

    /** Where the memory lives. */
    public MemoryKind kind() {
        return entry.kind();
    }

    /** Bytes registered. */
    public long length() {
        return entry.length();
    }

    /** What remote agents may do with this region. */
    public Set<Permission> permissions() {
        return Permission.of(entry.permissionBits());
    }

    /** False once deregistration began. */
    public boolean isLive() {
        return !entry.revoked();
    }

    /**
     * A view of the registered memory (position 0, limit {@link #length()}, independent position and
     * limit). For a {@link MemoryKind#SHARED} region this is the only way to reach its memory.
     */
    public ByteBuffer buffer() {
        return entry.view();
    }

    /** The descriptor of the whole region, to hand to remote agents. */
    public RemoteDescriptor descriptor() {
        return descriptor(0, length());
    }

    /** The descriptor of {@code [offset, offset + length)} of this region. */
    public RemoteDescriptor descriptor(long offset, long length) {
        if (offset < 0 || length < 0 || offset > length() - length) {
            throw new IllegalArgumentException("[" + offset + ", +" + length + ") outside region " + id() + " of " + length() + " bytes");
        }
        return new RemoteDescriptor(agent, id(), generation(), kind(), offset, length, permissions());
    }

    /** The local range {@code [offset, offset + length)}, the local side of a transfer. */
    public LocalDescriptor slice(long offset, long length) {
        return new LocalDescriptor(this, offset, length);
    }

    /** The whole region as the local side of a transfer. */
    public LocalDescriptor all() {
        return new LocalDescriptor(this, 0, length());
    }

    @Override
    public String toString() {
        return "MemoryRegion[agent=" + agent + ", id=" + id() + ", gen=" + Long.toHexString(generation()) + ", " + kind()
                + ", " + length() + " bytes, " + permissions() + (isLive() ? "" : ", deregistered") + "]";
    }
}
