package io.jcomm.cpu.internal.tcp;

import io.jcomm.runtime.shm.ShmFiles;
import io.jcomm.cpu.TcpOptions;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The shared-memory side of the tcp backend, like NCCL's SHM transport, set up lazily per directed
 * pair: the first time a rank sends a large payload to a peer on the same host it creates one file in
 * {@code /dev/shm} holding a single-producer/single-consumer ring (pre-faulted, so that a full tmpfs
 * fails here with ENOSPC instead of SIGBUS later), and offers its path to the peer in-band
 * ({@link Frame#RING}). The peer maps it, removes the file name and answers {@link Frame#RING_ACK};
 * only then do payloads take the ring (until then, and for good if the peer cannot map the file, they
 * go by socket). A group that never moves a large payload between two ranks never creates a ring, so
 * creating a group costs no shared memory at all.
 *
 * <p>Ring file layout (64-byte lines): {@code [0] magic, [8] capacity, [64] head (bytes produced,
 * written by the producer with release semantics), [128] tail (bytes consumed, written by the
 * consumer with release semantics), [256..] data}. Every message starts 64-byte aligned.
 */
final class ShmRings {

    private static final Logger LOG = LoggerFactory.getLogger(ShmRings.class);

    static final int HEADER = 256;
    static final long MAGIC = 0x4A434F4D4D524E47L; // "JCOMMRNG"
    static final int HEAD = 64;
    static final int TAIL = 128;
    private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());

    /** One ring in a mapped file. */
    static final class Ring {
        final MappedByteBuffer map;
        final ByteBuffer data;
        final int capacity;
        final int mask;
        /** The file while it still has a name (the creator's side, until the peer answered). */
        Path file;

        Ring(MappedByteBuffer map) {
            this.map = map;
            this.capacity = (int) (long) LONGS.getAcquire(map, 8);
            this.mask = capacity - 1;
            this.data = map.duplicate().position(HEADER).limit(HEADER + capacity).slice();
        }

        long head() {
            return (long) LONGS.getAcquire(map, HEAD);
        }

        void head(long v) {
            LONGS.setRelease(map, HEAD, v);
        }

        long tail() {
            return (long) LONGS.getAcquire(map, TAIL);
        }

        void tail(long v) {
            LONGS.setRelease(map, TAIL, v);
        }
    }

    private final TcpConfig cfg;
    private final String group;
    private final int rank;
    private final long generation;
    private final List<Ring> rings = new ArrayList<>();
    private boolean warned;
    private boolean cleaned;

    ShmRings(TcpConfig cfg, String group, int rank, long generation) {
        this.cfg = cfg;
        this.group = group;
        this.rank = rank;
        this.generation = generation;
    }

    /** Name prefix of ring files (owned names, {@link ShmFiles#ownedName}); stale ones are cleaned by this prefix. */
    static final String PREFIX = "jcomm-ring-";

    /** The tag of the ring from {@code from} to {@code to}; the receiving side checks its start, {@code r<from>to<to>.} */
    private String tag(int from, int to) {
        return "r" + from + "to" + to + ".g" + generation + "." + group;
    }

    /**
     * Creates, pre-faults and maps the file of a ring from this rank to {@code peer}, or returns null
     * (sockets only to that peer) when the directory is missing or too small, with one warning per
     * group that says so. The first ring of a group first removes the ring files of dead processes.
     */
    Ring createOutbound(int peer) {
        Path dir = Path.of(cfg.shmDir);
        long need = HEADER + (long) cfg.shmRingBytes;
        if (!cleaned) {
            cleaned = true;
            ShmFiles.cleanStale(dir, PREFIX);
        }
        Path path = dir.resolve(ShmFiles.ownedName(PREFIX, tag(rank, peer)));
        try {
            MappedByteBuffer m = ShmFiles.createMapped(path, need, "a shared-memory ring", TcpOptions.SHM_RING_BYTES);
            LONGS.setRelease(m, HEAD, 0L);
            LONGS.setRelease(m, TAIL, 0L);
            LONGS.setRelease(m, 8, (long) cfg.shmRingBytes);
            LONGS.setRelease(m, 0, MAGIC);
            Ring r = new Ring(m);
            r.file = path;
            rings.add(r);
            return r;
        } catch (IOException | RuntimeException e) {
            return refuse(e.getMessage(), e);
        }
    }

    private Ring refuse(String why, Throwable cause) {
        if (!warned) {
            warned = true;
            LOG.warn("group {} rank {}: shared memory disabled: {}", group, rank, why);
        } else {
            LOG.debug("group {} rank {}: no shared-memory ring: {}", group, rank, why, cause);
        }
        return null;
    }

    /**
     * Maps the ring a peer offered (its path as it sent it), checks its header and removes its file
     * name; null when it cannot be used (another /dev/shm, a malformed or foreign file).
     */
    Ring mapInbound(int peer, String offered) {
        Path dir = Path.of(cfg.shmDir);
        Path abs = ShmFiles.offered(dir, offered, PREFIX);
        if (abs == null || !abs.getFileName().toString().startsWith(PREFIX + "r" + peer + "to" + rank + ".")) {
            LOG.debug("group {} rank {}: rank {} offered a ring outside {} or not for this rank ({}); using the socket",
                    group, rank, peer, dir, offered);
            return null;
        }
        try {
            MappedByteBuffer m = ShmFiles.mapExisting(abs, true, HEADER + 1L, HEADER + (1L << 30));
            long size = m.capacity();
            if (Long.bitCount(size - HEADER) != 1 || (long) LONGS.getAcquire(m, 0) != MAGIC
                    || (long) LONGS.getAcquire(m, 8) != size - HEADER) {
                LOG.debug("group {} rank {}: ring of rank {} in {} is not initialised or has a bad size; using the socket",
                        group, rank, peer, abs);
                ShmFiles.unmap(m);
                return null;
            }
            Ring r = new Ring(m);
            rings.add(r);
            ShmFiles.unlink(abs); // both ends have it mapped: nothing is left behind if a process dies later
            return r;
        } catch (IOException | RuntimeException e) {
            LOG.debug("group {} rank {}: cannot map the ring of rank {} ({}); using the socket", group, rank, peer,
                    e.toString());
            return null;
        }
    }

    /** The peer mapped (or refused) {@code r}: its file name goes; a refused ring is unmapped. */
    void settled(Ring r, boolean used) {
        if (r.file != null) {
            ShmFiles.unlink(r.file);
            r.file = null;
        }
        if (!used) {
            rings.remove(r);
            ShmFiles.unmap(r.map);
        }
    }

    /** Removes the names of files not yet taken and unmaps every ring. Only after no thread uses them any more. */
    void close() {
        for (Ring r : rings) {
            if (r.file != null) {
                ShmFiles.unlink(r.file);
                r.file = null;
            }
            ShmFiles.unmap(r.map);
        }
        rings.clear();
    }
}
