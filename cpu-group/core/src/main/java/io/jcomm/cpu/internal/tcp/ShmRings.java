package io.jcomm.cpu.internal.tcp;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.security.SecureRandom;
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

    ShmRings(TcpConfig cfg, String group, int rank, long generation) {
        this.cfg = cfg;
        this.group = group;
        this.rank = rank;
        this.generation = generation;
    }

    /**
     * Creates, pre-faults and maps the file of a ring from this rank to {@code peer}, or returns null
     * (sockets only to that peer) when the directory is missing or too small, with one warning per
     * group that says so.
     */
    Ring createOutbound(int peer) {
        Path dir = Path.of(cfg.shmDir);
        long need = HEADER + (long) cfg.shmRingBytes;
        try {
            if (!Files.isDirectory(dir) || !Files.isWritable(dir)) {
                return refuse(dir + " is not a writable directory", null);
            }
            long free = Files.getFileStore(dir).getUsableSpace();
            if (free < need + (16L << 20)) {
                return refuse(dir + " has " + (free >> 20) + " MiB free, a ring needs " + (need >> 20) + " MiB "
                        + "(raise the size of /dev/shm, e.g. docker --shm-size, or lower tcp.shm.ringBytes)", null);
            }
        } catch (IOException e) {
            return refuse("cannot inspect " + dir + ": " + e, null);
        }
        String safe = group.replaceAll("[^A-Za-z0-9_.-]", "_");
        Path path = dir.resolve("jcomm-" + safe + "-g" + generation + "-r" + rank + "to" + peer + "-"
                + ProcessHandle.current().pid() + "-" + Long.toHexString(new SecureRandom().nextLong()));
        try (FileChannel fc = FileChannel.open(path, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            ShmFiles.allocate(fc, 0, need); // ENOSPC here, never SIGBUS later
            MappedByteBuffer m = fc.map(FileChannel.MapMode.READ_WRITE, 0, need);
            LONGS.setRelease(m, HEAD, 0L);
            LONGS.setRelease(m, TAIL, 0L);
            LONGS.setRelease(m, 8, (long) cfg.shmRingBytes);
            LONGS.setRelease(m, 0, MAGIC);
            Ring r = new Ring(m);
            r.file = path;
            rings.add(r);
            return r;
        } catch (IOException | RuntimeException e) {
            unlink(path);
            return refuse("cannot create " + path + " (" + (need >> 20) + " MiB): " + e
                    + " (is /dev/shm large enough? e.g. docker --shm-size; or lower tcp.shm.ringBytes)", e);
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
        Path p;
        try {
            p = Path.of(offered);
        } catch (RuntimeException e) {
            return null;
        }
        Path dir = Path.of(cfg.shmDir).toAbsolutePath().normalize();
        Path abs = p.toAbsolutePath().normalize();
        String name = abs.getFileName() == null ? "" : abs.getFileName().toString();
        if (!dir.equals(abs.getParent()) || !name.startsWith("jcomm-") || !name.contains("to" + rank + "-")) {
            LOG.debug("group {} rank {}: rank {} offered a ring outside {} ({}); using the socket", group, rank, peer,
                    dir, offered);
            return null;
        }
        try (FileChannel fc = FileChannel.open(abs, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
            long size = fc.size();
            if (size <= HEADER || size - HEADER > (1L << 30) || Long.bitCount(size - HEADER) != 1) {
                LOG.debug("group {} rank {}: ring file of rank {} has a bad size {}", group, rank, peer, size);
                return null;
            }
            MappedByteBuffer m = fc.map(FileChannel.MapMode.READ_WRITE, 0, size);
            if ((long) LONGS.getAcquire(m, 0) != MAGIC || (long) LONGS.getAcquire(m, 8) != size - HEADER) {
                LOG.debug("group {} rank {}: ring of rank {} in {} is not initialised; using the socket", group, rank,
                        peer, abs);
                Unmapper.unmap(m);
                return null;
            }
            Ring r = new Ring(m);
            rings.add(r);
            unlink(abs); // both ends have it mapped: nothing is left behind if a process dies later
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
            unlink(r.file);
            r.file = null;
        }
        if (!used) {
            rings.remove(r);
            Unmapper.unmap(r.map);
        }
    }

    private static void unlink(Path p) {
        try {
            Files.deleteIfExists(p);
        } catch (IOException e) {
            LOG.debug("cannot remove {}: {}", p, e.toString());
        }
    }

    /** Removes the names of files not yet taken and unmaps every ring. Only after no thread uses them any more. */
    void close() {
        for (Ring r : rings) {
            if (r.file != null) {
                unlink(r.file);
                r.file = null;
            }
            try {
                Unmapper.unmap(r.map);
            } catch (RuntimeException e) {
                // the mapping is released with the buffer at the latest
            }
        }
        rings.clear();
    }
}
