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
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Shared staging buffers for collectives among ranks that all share one host (like
 * vLLM's custom all-reduce or NCCL's intra-node direct mode): every rank owns one region that it
 * writes and that every peer maps read-only. A large collective is cut into pieces; per piece a rank
 * copies its input into its region, publishes a piece number, and peers read the inputs directly
 * from the regions (one copy in, no forwarding through intermediate ranks).
 *
 * <p>Region layout: {@code [0] magic, [8] piece bytes, [64] input piece number, [128] result piece
 * number, [192] and [256] the descriptors of the two slots (piece number, collective number, count,
 * op code, offset, length, and for a cross-memory read the input's address and the process id), [320] the
 * last piece whose cross-memory reads failed on this rank, [4096..] two slots, each an input area and a
 * result area of piece bytes}. Piece k
 * uses slot k mod 2. A rank writes its descriptor and data, then the piece number with release
 * semantics; peers read the piece number with acquire semantics before they read anything else. A
 * rank publishes piece k+1 only after it finished reading everyone's piece k, and it writes slot
 * k mod 2 again (piece k+2) only after it saw everyone's piece k+1: so with two slots a collective
 * needs one synchronisation per piece (all-reduce two: inputs, then results).
 *
 * <p>Two kinds of regions share this layout: the large-collective regions ({@code jcomm-stage-}, pieces
 * of a quarter of {@code tcp.shm.stagingBytes}, made by the first large collective) and the fast path's
 * ({@code jcomm-fast-}, pieces of {@code tcp.shm.fastBytes}, made at group creation), which add after
 * the slots one block per peer for the point-to-point mailboxes ({@link ShmMailbox}): {@code [+0] head
 * of this rank's ring to that peer, [+64] this rank's tail of that peer's ring to it, [+128..] the ring
 * of this rank to that peer}. Each rank writes only its own region; peers map it read-only.
 */
final class ShmStaging {

    private static final Logger LOG = LoggerFactory.getLogger(ShmStaging.class);
    private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());

    static final int HEADER = 4096;
    static final long MAGIC = 0x4A434F4D4D535447L; // "JCOMMSTG"
    static final int INPUT_SEQ = 64;
    static final int RESULT_SEQ = 128;
    /** Descriptor of slot s at {@code 192 + 64 s}: piece, collective number, count, code, offset. */
    private static final int D_BASE = 192;
    private static final int D_PIECE = 0;
    private static final int D_SEQ = 8;
    private static final int D_COUNT = 16;
    private static final int D_CODE = 24;
    private static final int D_OFFSET = 32;
    /** Length of an object payload (object collectives: not compared, each rank's own). */
    private static final int D_LENGTH = 40;
    /** Where this rank's input is in its own process, for peers' cross-memory reads (0: not offered). */
    private static final int D_ADDRESS = 48;
    private static final int D_PID = 56;
    /** The last piece whose cross-memory reads failed on this rank (written before its result is published). */
    private static final int CROSS_FAILED = 320;

    private static int desc(long piece) {
        return D_BASE + 64 * (int) (piece & 1);
    }

    private final Path dir;
    private final Path path;
    private final String prefix;
    private final int rank;
    private final int pieceBytes;
    /** Ring bytes of each point-to-point mailbox ({@link ShmMailbox}; 0: none, the large-collective regions). */
    private final int mailboxBytes;
    private final MappedByteBuffer[] regions;
    private boolean unlinked;
    /** This rank's fast-path region while parts of it are still to be allocated (its mailbox rings), else null. */
    private ShmFiles.Partial file;
    /** The last piece number this rank used (pieces are numbered per region, alike on every rank). */
    private long piece;

    private ShmStaging(Path dir, Path path, String prefix, int rank, int size, int pieceBytes, int mailboxBytes) {
        this.dir = dir;
        this.path = path;
        this.prefix = prefix;
        this.rank = rank;
        this.pieceBytes = pieceBytes;
        this.mailboxBytes = mailboxBytes;
        this.regions = new MappedByteBuffer[size];
    }

    /** Name prefix of staging files (owned names, {@link ShmFiles#ownedName}). */
    static final String PREFIX = "jcomm-stage-";
    /** Name prefix of the small regions of the fast path ({@link TcpOptions#SHM_FAST_BYTES}). */
    static final String FAST_PREFIX = "jcomm-fast-";

    /** Creates this rank's large-collective region, or returns null (with a log line) when shared memory cannot be used. */
    static ShmStaging create(TcpConfig cfg, String group, int rank, int size, long generation) {
        return create(cfg, PREFIX, pieceBytes(cfg), 0, TcpOptions.SHM_STAGING_BYTES, group, rank, size, generation);
    }

    /** Creates this rank's fast-path region (pieces of {@code tcp.shm.fastBytes}), or null. */
    static ShmStaging createFast(TcpConfig cfg, String group, int rank, int size, long generation) {
        return create(cfg, FAST_PREFIX, cfg.shmFastBytes, mailboxBytes(size), TcpOptions.SHM_FAST_BYTES, group, rank, size,
                generation);
    }

    private static ShmStaging create(TcpConfig cfg, String prefix, int piece, int mailbox, String option, String group,
                                     int rank, int size, long generation) {
        Path dir = Path.of(cfg.shmDir);
        ShmFiles.cleanStale(dir, prefix);
        Path path = dir.resolve(ShmFiles.ownedName(prefix, "r" + rank + ".g" + generation + "." + group));
        ShmStaging s = new ShmStaging(dir, path, prefix, rank, size, piece, mailbox);
        try {
            MappedByteBuffer m;
            if (mailbox == 0) {
                m = ShmFiles.createMapped(path, s.regionBytes(size), "shared staging", option);
            } else {
                // the rings are allocated one by one before their first record (allocateMailbox): most are never used
                s.file = ShmFiles.createPartly(path, s.regionBytes(size), "shared staging", option);
                m = s.file.map();
                s.file.allocate(0, s.mailbox(0));
                for (int p = 0; p < size; p++) {
                    // the control line (this rank's tail of the ring from p) and the first page of the ring to p,
                    // where p polls for the first record
                    s.file.allocate(s.mailbox(p), MAILBOX_CONTROL + Math.min(mailbox, MAILBOX_FIRST_BYTES));
                }
            }
            LONGS.setRelease(m, INPUT_SEQ, 0L);
            LONGS.setRelease(m, RESULT_SEQ, 0L);
            LONGS.setRelease(m, 8, (long) piece);
            LONGS.setRelease(m, 0, MAGIC);
            s.regions[rank] = m;
            return s;
        } catch (IOException | RuntimeException e) {
            LOG.warn("group {} rank {}: shared staging disabled: {}", group, rank, e.getMessage());
            s.close();
            return null;
        }
    }

    String path() {
        return path.toString();
    }

    /** Bytes of one piece of a region made with {@code cfg} (a region holds two slots of input and result). */
    static int pieceBytes(TcpConfig cfg) {
        return cfg.shmStagingBytes / 4;
    }

    int pieceBytes() {
        return pieceBytes;
    }

    /** Bounds of a mailbox ring, and what all of one rank's rings of a group may take together. */
    private static final int MAILBOX_MIN = 64 << 10;
    private static final int MAILBOX_MAX = 1 << 20;
    private static final int MAILBOXES_PER_RANK = 8 << 20;
    /** Bytes at the start of each ring allocated with the region: where its consumer polls before any record. */
    private static final int MAILBOX_FIRST_BYTES = 4096;

    /**
     * Ring bytes of each mailbox of a fast-path region of a group of {@code size} ranks: 1 MiB in groups
     * of up to 9 ranks, then smaller so that a rank's rings stay near 8 MiB (a power of two, at least
     * 64 KiB). A function of the size alone, so that every rank lays the regions out alike. A ring's memory
     * is allocated when its sender first uses it ({@link #allocateMailbox}): a group of 8 ranks that
     * never sends point to point costs each rank its header and slots, not 8 MiB.
     */
    static int mailboxBytes(int size) {
        int share = MAILBOXES_PER_RANK / Math.max(1, size - 1);
        return Math.max(MAILBOX_MIN, Math.min(MAILBOX_MAX, Integer.highestOneBit(share)));
    }
    /** Per peer: a spare line, a line for this rank's tail of the ring from that peer, then this rank's ring to it. */
    private static final int MAILBOX_CONTROL = 128;

    private long regionBytes(int size) {
        return HEADER + 4L * pieceBytes + (mailboxBytes == 0 ? 0 : (long) size * (MAILBOX_CONTROL + mailboxBytes));
    }

    private int mailbox(int peer) {
        return HEADER + 4 * pieceBytes + peer * (MAILBOX_CONTROL + mailboxBytes);
    }

    /** The ring of messages from {@code owner} to {@code dest} (in {@code owner}'s region). */
    ByteBuffer mailboxData(int owner, int dest) {
        int at = mailbox(dest) + MAILBOX_CONTROL;
        return regions[owner].duplicate().position(at).limit(at + mailboxBytes).slice().order(ByteOrder.LITTLE_ENDIAN);
    }

    /**
     * Allocates this rank's ring to {@code dest} through the file before its first record (a page of a
     * full tmpfs touched first through the mapping would be a SIGBUS). Once per ring: its mailbox calls it
     * before its first record. Driving thread.
     *
     * @throws IOException when the shared-memory directory is full
     */
    void allocateMailbox(int dest) throws IOException {
        if (file != null) {
            file.allocate(mailbox(dest) + MAILBOX_CONTROL, mailboxBytes);
        }
    }

    /** Bytes {@code consumer} consumed of the ring from {@code source} (acquire). */
    long mailboxTail(int consumer, int source) {
        return (long) LONGS.getAcquire(regions[consumer], mailbox(source) + 64);
    }

    void publishMailboxTail(int source, long tail) {
        LONGS.setRelease(regions[rank], mailbox(source) + 64, tail);
    }

    /** The next piece number (every rank numbers the pieces of a region alike). */
    long nextPiece() {
        return ++piece;
    }

    /** Maps a peer's region read-only; false if it cannot be mapped or does not match this rank's. */
    boolean map(int peer, String peerPath) {
        Path p = ShmFiles.offered(dir, peerPath, prefix);
        if (p == null || !p.getFileName().toString().startsWith(prefix + "r" + peer + ".")) {
            LOG.debug("rank {}: rank {} offered a staging region outside {} or not its own: {}", rank, peer, dir, peerPath);
            return false;
        }
        try {
            long len = regionBytes(regions.length);
            MappedByteBuffer m = ShmFiles.mapExisting(p, false, len, len);
            if ((long) LONGS.getAcquire(m, 0) != MAGIC || (long) LONGS.getAcquire(m, 8) != pieceBytes) {
                ShmFiles.unmap(m);
                return false;
            }
            regions[peer] = m;
            return true;
        } catch (IOException | RuntimeException e) {
            LOG.debug("rank {}: cannot map the staging region of rank {}: {}", rank, peer, e.toString());
            return false;
        }
    }

    /** The input area of {@code r}'s region for piece {@code piece} ({@code pieceBytes}). */
    ByteBuffer input(int r, long piece) {
        int at = HEADER + (int) (piece & 1) * 2 * pieceBytes;
        return regions[r].duplicate().position(at).limit(at + pieceBytes).slice().order(ByteOrder.LITTLE_ENDIAN);
    }

    /** The result area of {@code r}'s region for piece {@code piece} ({@code pieceBytes}). */
    ByteBuffer result(int r, long piece) {
        int at = HEADER + (int) (piece & 1) * 2 * pieceBytes + pieceBytes;
        return regions[r].duplicate().position(at).limit(at + pieceBytes).slice().order(ByteOrder.LITTLE_ENDIAN);
    }

    /** Writes this rank's descriptor of piece {@code piece} and publishes its input. */
    void publishInput(long piece, long seq, long count, long code, long offset) {
        publishInput(piece, seq, count, code, offset, 0);
    }

    /** {@link #publishInput(long, long, long, long, long)} with the length of this rank's object payload. */
    void publishInput(long piece, long seq, long count, long code, long offset, long length) {
        publishInput(piece, seq, count, code, offset, length, 0, 0);
    }

    /**
     * {@link #publishInput(long, long, long, long, long, long)} offering this rank's input for peers to read
     * from its process: {@code address} in process {@code pid} (0 and 0: not offered).
     */
    void publishInput(long piece, long seq, long count, long code, long offset, long length, long address, long pid) {
        MappedByteBuffer m = regions[rank];
        int d = desc(piece);
        m.putLong(d + D_ADDRESS, address);
        m.putLong(d + D_PID, pid);
        m.putLong(d + D_LENGTH, length);
        m.putLong(d + D_PIECE, piece);
        m.putLong(d + D_SEQ, seq);
        m.putLong(d + D_COUNT, count);
        m.putLong(d + D_CODE, code);
        m.putLong(d + D_OFFSET, offset);
        LONGS.setRelease(m, INPUT_SEQ, piece);
    }

    /** The input address {@code r} offered with piece {@code piece} (0: none), read after its piece number was seen. */
    long address(int r, long piece) {
        return regions[r].getLong(desc(piece) + D_ADDRESS);
    }

    /** The process id {@code r} offered with piece {@code piece}. */
    long pid(int r, long piece) {
        return regions[r].getLong(desc(piece) + D_PID);
    }

    void publishResult(long piece) {
        LONGS.setRelease(regions[rank], RESULT_SEQ, piece);
    }

    /** Publishes the result of piece {@code piece}, saying whether this rank's cross-memory reads of it failed. */
    void publishResult(long piece, boolean crossFailed) {
        if (crossFailed) {
            regions[rank].putLong(CROSS_FAILED, piece);
        }
        publishResult(piece);
    }

    /** Whether {@code r}'s cross-memory reads of piece {@code piece} failed (read after its result was seen). */
    boolean crossFailed(int r, long piece) {
        return regions[r].getLong(CROSS_FAILED) == piece;
    }

    /** The object length {@code r} published with piece {@code piece} (read after its piece number was seen). */
    long length(int r, long piece) {
        return regions[r].getLong(desc(piece) + D_LENGTH);
    }

    long flag(int r, int which) {
        return (long) LONGS.getAcquire(regions[r], which);
    }

    /**
     * Describes how {@code r}'s descriptor differs from the expected one (call after its input piece
     * number was seen), or null.
     */
    String descriptorDifference(int r, long piece, long seq, long count, long code, long offset) {
        MappedByteBuffer m = regions[r];
        int d = desc(piece);
        StringBuilder sb = new StringBuilder();
        if (m.getLong(d + D_SEQ) != seq) {
            sb.append(" collective #").append(m.getLong(d + D_SEQ)).append(" vs #").append(seq).append(';');
        }
        if (m.getLong(d + D_CODE) != code) {
            sb.append(" operation/dtype/reduce op/root code ").append(Long.toHexString(m.getLong(d + D_CODE))).append(" vs ")
                    .append(Long.toHexString(code)).append(';');
        }
        if (m.getLong(d + D_COUNT) != count) {
            sb.append(" count ").append(m.getLong(d + D_COUNT)).append(" vs ").append(count).append(';');
        }
        if (sb.length() == 0 && (m.getLong(d + D_PIECE) != piece || m.getLong(d + D_OFFSET) != offset)) {
            sb.append(" piece ").append(m.getLong(d + D_PIECE)).append('@').append(m.getLong(d + D_OFFSET)).append(" vs ")
                    .append(piece).append('@').append(offset).append(';');
        }
        return sb.length() == 0 ? null : sb.toString();
    }

    void unlinkFile() {
        if (!unlinked) {
            unlinked = true;
            ShmFiles.unlink(path);
        }
    }

    /**
     * Closes this rank's file (the mappings stay): no mailbox ring of it will be allocated any more.
     * {@link #allocateMailbox} is then a no-op, so call it only when the group has no mailboxes.
     */
    void closeFile() {
        if (file != null) {
            try {
                file.close();
            } catch (IOException e) {
                LOG.debug("rank {}: closing {}: {}", rank, path, e.toString());
            }
            file = null;
        }
    }

    /** Unlinks the file and unmaps every region. Only when no thread uses them any more. */
    void close() {
        unlinkFile();
        closeFile();
        for (int i = 0; i < regions.length; i++) {
            if (regions[i] != null) {
                ShmFiles.unmap(regions[i]);
                regions[i] = null;
            }
        }
    }
}
