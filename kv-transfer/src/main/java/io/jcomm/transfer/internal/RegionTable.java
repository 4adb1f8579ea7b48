package io.jcomm.transfer.internal;

import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.DeviceMemory;
import io.jcomm.runtime.Entropy;
import io.jcomm.transfer.MemoryKind;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.TransferRefusedException;
import io.jcomm.transfer.spi.RegionAccess;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReferenceArray;
import java.util.concurrent.locks.LockSupport;

/**
 * An agent's registered regions: a bounded table of slots, each live registration with a fresh
 * generation, a pin count of the accesses in flight, and a revoked flag.
 *
 * <p>Pin and revoke: an access raises the pin count first and reads the flag second; deregistration
 * sets the flag first and waits for the pin count second. Either the access sees the flag (and is
 * refused), or deregistration waits for it.
 */
public final class RegionTable {

    /** One registration. */
    public static final class Entry {
        private final int id;
        private final long generation;
        private final MemoryKind kind;
        private final ByteBuffer memory;
        private final int permissionBits;
        private final ShmRegionFile shm;
        private final DeviceMemory device;
        private final Tensor tensor;
        private final AtomicInteger pins = new AtomicInteger();
        private volatile boolean revoked;

        Entry(int id, long generation, MemoryKind kind, ByteBuffer memory, int permissionBits, ShmRegionFile shm,
              DeviceMemory device, Tensor tensor) {
            this.id = id;
            this.generation = generation;
            this.kind = kind;
            this.memory = memory;
            this.permissionBits = permissionBits;
            this.shm = shm;
            this.device = device;
            this.tensor = tensor;
        }

        /** For a device region: copies {@code [offset, offset + length)} from the device into the staging buffer. */
        public void fill(long offset, long length) {
            if (device != null) {
                device.copyToHost(tensor, offset, view(offset, length));
            }
        }

        /** For a device region: copies {@code [offset, offset + length)} from the staging buffer to the device. */
        public void flush(long offset, long length) {
            if (device != null && length > 0) {
                device.copyFromHost(view(offset, length), tensor, offset);
            }
        }

        public int id() { return id; }
        public long generation() { return generation; }
        public MemoryKind kind() { return kind; }
        public long length() { return memory.capacity(); }
        public int permissionBits() { return permissionBits; }
        public boolean revoked() { return revoked; }
        public ShmRegionFile shm() { return shm; }

        /** A fresh view of the whole region. */
        public ByteBuffer view() {
            return memory.duplicate().clear();
        }

        /** A view of {@code [offset, offset + length)}, position 0. */
        public ByteBuffer view(long offset, long length) {
            return memory.duplicate().clear().position((int) offset).limit((int) (offset + length)).slice();
        }

        /** Pins the region for a local use; false if it is being deregistered. */
        public boolean pin() {
            pins.incrementAndGet();
            if (revoked) {
                pins.decrementAndGet();
                return false;
            }
            return true;
        }

        public void unpin() {
            pins.decrementAndGet();
        }
    }

    private static final OpContext CONTEXT = OpContext.of("transfer", -1, "access");

    private final String agent;
    private final AtomicReferenceArray<Entry> slots;
    private final boolean[] retired;
    private long nextGeneration;

    public RegionTable(String agent, int maxRegions) {
        this.agent = agent;
        this.slots = new AtomicReferenceArray<>(maxRegions);
        this.retired = new boolean[maxRegions];
        // a random start: a descriptor of an earlier agent of the same name (a restart) is stale here
        this.nextGeneration = (Entropy.nextLong() & 0x3fff_ffff_ffffL) << 16 | 1;
    }

    /** Reserves a free slot and a fresh generation: {@code long[]{id, generation}}. */
    public synchronized long[] reserve() {
        for (int i = 0; i < slots.length(); i++) {
            if (slots.get(i) == null && !retired[i]) {
                retired[i] = true; // reserved until add() or release()
                long g = nextGeneration++;
                if (g == ShmRegionFile.REVOKED) {
                    g = nextGeneration++;
                }
                return new long[] {i, g};
            }
        }
        throw new CommException(CONTEXT.withOperation("register"), "agent " + agent + " has " + slots.length()
                + " regions registered (maxRegions)");
    }

    /** Publishes a registration in its reserved slot. */
    public Entry add(long[] reserved, MemoryKind kind, ByteBuffer memory, int permissionBits, ShmRegionFile shm) {
        return add(reserved, kind, memory, permissionBits, shm, null, null);
    }

    /**
     * Publishes a registration in its reserved slot; for a device region {@code memory} is its host staging
     * buffer and {@code device} copies between it and {@code tensor}.
     */
    public synchronized Entry add(long[] reserved, MemoryKind kind, ByteBuffer memory, int permissionBits, ShmRegionFile shm,
                                  DeviceMemory device, Tensor tensor) {
        int id = (int) reserved[0];
        Entry e = new Entry(id, reserved[1], kind, memory.duplicate().clear().slice(), permissionBits, shm, device, tensor);
        retired[id] = false;
        slots.set(id, e);
        return e;
    }

    /** Frees a reserved slot that was not used. */
    public synchronized void release(long[] reserved) {
        retired[(int) reserved[0]] = false;
    }

    /** The live entries. */
    public List<Entry> live() {
        List<Entry> l = new ArrayList<>();
        for (int i = 0; i < slots.length(); i++) {
            Entry e = slots.get(i);
            if (e != null && !e.revoked) {
                l.add(e);
            }
        }
        return l;
    }

    /** The owner-side check of a remote request (see {@link io.jcomm.transfer.spi.TransportContext#acquire}). */
    public RegionAccess acquire(int regionId, long generation, long offset, long length, Permission access, String peer) {
        Entry e = regionId >= 0 && regionId < slots.length() ? slots.get(regionId) : null;
        if (e == null || e.generation != generation) {
            throw new TransferRefusedException(CONTEXT, TransferRefusedException.Reason.STALE, peer + " named region "
                    + regionId + " generation " + Long.toHexString(generation) + " of " + agent + ", which is "
                    + (e == null ? "not registered" : "at generation " + Long.toHexString(e.generation)));
        }
        if ((e.permissionBits & access.bit()) == 0) {
            throw new TransferRefusedException(CONTEXT, TransferRefusedException.Reason.PERMISSION, "region " + regionId
                    + " of " + agent + " does not grant " + access + " (asked by " + peer + ")");
        }
        if (offset < 0 || length < 0 || offset > e.length() - length) {
            throw new TransferRefusedException(CONTEXT, TransferRefusedException.Reason.OUT_OF_RANGE, "[" + offset
                    + ", +" + length + ") outside region " + regionId + " of " + agent + " (" + e.length()
                    + " bytes; asked by " + peer + ")");
        }
        if (!e.pin()) {
            throw new TransferRefusedException(CONTEXT, TransferRefusedException.Reason.STALE, "region " + regionId
                    + " of " + agent + " is being deregistered (asked by " + peer + ")");
        }
        ByteBuffer view = e.view(offset, length);
        if (access == Permission.READ) {
            try {
                e.fill(offset, length);
            } catch (RuntimeException x) {
                e.unpin();
                throw deviceFailure(e, peer, x);
            }
        }
        return new RegionAccess() {
            private boolean closed;

            @Override
            public ByteBuffer buffer() {
                return view;
            }

            @Override
            public boolean revoked() {
                return e.revoked;
            }

            @Override
            public void commit() {
                try {
                    e.flush(offset, view.position());
                } catch (RuntimeException x) {
                    throw deviceFailure(e, peer, x);
                }
            }

            @Override
            public void close() {
                if (!closed) {
                    closed = true;
                    e.unpin();
                }
            }
        };
    }

    private TransferRefusedException deviceFailure(Entry e, String peer, RuntimeException cause) {
        return new TransferRefusedException(CONTEXT, TransferRefusedException.Reason.DEVICE, "region " + e.id + " of " + agent
                + " (asked by " + peer + "): " + cause.getMessage(), cause);
    }

    /**
     * Deregisters: revokes (new accesses are refused, a tcp transfer in progress stops at its next
     * chunk), waits for the accesses in flight, then frees the slot. When the deadline passes first the
     * region stays revoked and its slot retired (never reused while something may still touch it).
     *
     * @throws CommTimeoutException when accesses are still in flight at the deadline
     */
    public void remove(Entry e, Deadline deadline) {
        e.revoked = true;
        try {
            if (e.shm != null) {
                e.shm.revoke(deadline);
            }
            while (e.pins.get() > 0) {
                if (deadline.isExpired()) {
                    throw new CommTimeoutException(CONTEXT.withOperation("deregister"), "region " + e.id + " of " + agent
                            + " still has " + e.pins.get() + " transfers in flight; it stays revoked");
                }
                LockSupport.parkNanos(20_000);
            }
        } catch (CommTimeoutException t) {
            synchronized (this) {
                retired[e.id] = true;
            }
            throw t;
        }
        synchronized (this) {
            if (slots.get(e.id) == e) {
                slots.set(e.id, null);
            }
        }
        if (e.shm != null) {
            e.shm.delete(false);
        }
    }
}
