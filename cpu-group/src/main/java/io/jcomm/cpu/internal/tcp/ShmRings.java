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
 * The shared-memory side of the tcp backend, like NCCL's SHM transport: each rank creates one file
 * in {@code /dev/shm} holding one single-producer/single-consumer ring per peer (its inbound rings),
 * pre-faults it, and publishes its path through the store; a peer on the same host maps its slot of
 * that file and writes payloads into it. The file is unlinked as soon as every peer has mapped it
 * (after the set-up handshake), so nothing is left behind even if a process is killed later.
 *
 * <p>Ring slot layout (64-byte lines): {@code [0] magic, [8] capacity, [64] head (bytes produced,
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

    private final Path path;
    private final int rank;
    private final int ringBytes;
    private final long slotBytes;
    private final Ring[] inbound;
    private final List<MappedByteBuffer> maps = new ArrayList<>();
    private boolean unlinked;

    private ShmRings(Path path, int rank, int size, int ringBytes) {
        this.path = path;
        this.rank = rank;
        this.ringBytes = ringBytes;
        this.slotBytes = HEADER + (long) ringBytes;
        this.inbound = new Ring[size];
    }

    /**
     * Creates this rank's file of inbound rings, or returns null (sockets only) when the directory is
     * missing or too small, with a warning that says so.
     */
    static ShmRings create(TcpConfig cfg, String group, int rank, int size, long generation) {
        Path dir = Path.of(cfg.shmDir);
        long need = (long) (size - 1) * (HEADER + (long) cfg.shmRingBytes);
        try {
            if (!Files.isDirectory(dir) || !Files.isWritable(dir)) {
                LOG.warn("group {} rank {}: shared memory disabled: {} is not a writable directory", group, rank, dir);
                return null;
            }
            long free = Files.getFileStore(dir).getUsableSpace();
            if (free < need + (16L << 20)) {
                LOG.warn("group {} rank {}: shared memory disabled: {} has {} MiB free, the rings need {} MiB "
                        + "(raise the size of /dev/shm, e.g. docker --shm-size, or lower tcp.shm.ringBytes)",
                        group, rank, dir, free >> 20, need >> 20);
                return null;
            }
        } catch (IOException e) {
            LOG.warn("group {} rank {}: shared memory disabled: cannot inspect {}: {}", group, rank, dir, e.toString());
            return null;
        }
        String safe = group.replaceAll("[^A-Za-z0-9_.-]", "_");
        String name = "jcomm-" + safe + "-g" + generation + "-r" + rank + "-" + ProcessHandle.current().pid() + "-"
                + Long.toHexString(new SecureRandom().nextLong());
        ShmRings rings = new ShmRings(dir.resolve(name), rank, size, cfg.shmRingBytes);
        try {
            rings.createFile(size);
            return rings;
        } catch (IOException | RuntimeException e) {
            LOG.warn("group {} rank {}: shared memory disabled: cannot create {} ({} MiB): {} (is /dev/shm large enough? "
                    + "e.g. docker --shm-size; or lower tcp.shm.ringBytes)", group, rank, rings.path, need >> 20, e.toString());
            rings.close();
            return null;
        }
    }

    private void createFile(int size) throws IOException {
        try (FileChannel fc = FileChannel.open(path, StandardOpenOption.CREATE_NEW, StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            fc.truncate(slotBytes * size);
            for (int q = 0; q < size; q++) {
                if (q != rank) {
                    ShmFiles.allocate(fc, slotBytes * q, slotBytes); // ENOSPC here, never SIGBUS later
                }
            }
            for (int q = 0; q < size; q++) {
                if (q == rank) {
                    continue;
                }
                MappedByteBuffer m = fc.map(FileChannel.MapMode.READ_WRITE, slotBytes * q, slotBytes);
                maps.add(m);
                LONGS.setRelease(m, HEAD, 0L);
                LONGS.setRelease(m, TAIL, 0L);
                LONGS.setRelease(m, 8, (long) ringBytes);
                LONGS.setRelease(m, 0, MAGIC);
                inbound[q] = new Ring(m);
            }
        }
    }

    /** What peers need to map this rank's rings: {@code path:ringBytes}. */
    String path() {
        return path + ":" + ringBytes;
    }

    /**
     * The shared-memory link with {@code peer}: receives through this rank's inbound ring, sends
     * through the peer's file when it can be mapped (same host, same /dev/shm), else by socket.
     */
    ShmLink link(int peer, String peerInfo) {
        Ring out = null;
        int colon = peerInfo.lastIndexOf(':');
        try {
            Path p = Path.of(peerInfo.substring(0, colon));
            long theirSlot = HEADER + Long.parseLong(peerInfo.substring(colon + 1));
            try (FileChannel fc = FileChannel.open(p, StandardOpenOption.READ, StandardOpenOption.WRITE)) {
                MappedByteBuffer m = fc.map(FileChannel.MapMode.READ_WRITE, theirSlot * rank, theirSlot);
                if ((long) LONGS.getAcquire(m, 0) != MAGIC || (long) LONGS.getAcquire(m, 8) != theirSlot - HEADER) {
                    LOG.debug("rank {}: ring of rank {} in {} is not initialised; using the socket", rank, peer, p);
                    Unmapper.unmap(m);
                } else {
                    maps.add(m);
                    out = new Ring(m);
                }
            }
        } catch (IOException | RuntimeException e) {
            LOG.debug("rank {}: cannot map the rings of rank {} ({}); using the socket", rank, peer, e.toString());
        }
        return new ShmLink(inbound[peer], out);
    }

    /** Removes the file name; the mappings stay valid. */
    void unlinkFile() {
        if (!unlinked) {
            unlinked = true;
            try {
                Files.deleteIfExists(path);
            } catch (IOException e) {
                LOG.debug("cannot remove {}: {}", path, e.toString());
            }
        }
    }

    String describe(Link[] links) {
        StringBuilder sb = new StringBuilder();
        for (Link l : links) {
            if (l != null && l.shm != null && l.shm.canSend()) {
                sb.append(sb.length() == 0 ? "to ranks " : ",").append(l.peer);
            }
        }
        return sb.length() == 0 ? "none usable" : sb.toString();
    }

    /** Unlinks the file and unmaps every ring. Only after no thread uses them any more. */
    void close() {
        unlinkFile();
        for (MappedByteBuffer m : maps) {
            try {
                Unmapper.unmap(m);
            } catch (RuntimeException e) {
                // the mapping is released with the buffer at the latest
            }
        }
        maps.clear();
    }
}
