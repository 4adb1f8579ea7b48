package io.jcomm.parallel.internal;

import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.internal.FailureLatch;
import io.jcomm.api.internal.shm.ProcessIdentity;
import io.jcomm.api.internal.shm.ShmFiles;
import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.agrona.concurrent.BackoffIdleStrategy;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Barrier and small-object broadcast for a group whose ranks all share one host, through one mapped
 * file in a tmpfs: no sockets, no system calls on the fast path.
 *
 * <h2>Layout (64-byte lines, native byte order)</h2>
 * <pre>
 *   line 0            published: [0] sequence of the last broadcast, [8] its source rank, [16] length (-1: too big)
 *   line 1 + r        rank r: [0] done = (sequence of r's last completed operation) &lt;&lt; 24 | its kind and root,
 *                     [16] pid, [24] start time of the pid (clock ticks), [32] job nonce (attach mark), [40] closed
 *   then              data area of {@code capacity} bytes
 * </pre>
 * Every rank counts its operations; operation k of every rank is the same collective (the usual
 * rule). A rank publishes "I completed k" by a release store of {@code done}, one word that also
 * says which collective k was (so a reader never pairs a sequence with another step's kind);
 * waiters read with acquire. A barrier completes when every rank's {@code done >= k}. A broadcast's source waits until
 * every rank completed k-1 (so the data area is free), writes the payload, release-stores the
 * published sequence and its own {@code done}; readers wait for the published sequence, copy, and
 * store their {@code done}. A payload larger than the data area is published as length -1 and the
 * caller moves it another way (every rank learns that at once).
 *
 * <h2>Waiting and failures</h2>
 * Waits use an idle strategy (spin, yield, then park up to 100 µs) and are bounded by the caller's
 * deadline ({@link CommTimeoutException} naming the ranks that did not arrive). While waiting, the
 * missing peers are checked every few milliseconds: a peer process that died ({@code /proc}
 * shows it gone or a zombie, or a different process has its pid) gives {@link PeerFailureException};
 * a peer that closed its end gives {@link CommClosedException}; a peer that runs another collective
 * as operation k gives {@link CollectiveMismatchException}. After any failure the channel is
 * poisoned and every later call fails at once.
 *
 * <h2>Set-up</h2>
 * {@link #open} creates (or opens, whoever comes first) the file and writes this rank's slot; the
 * caller then runs one collective on its CPU group (so that every rank has opened it) and calls
 * {@link #attachedByAll()}: true on every rank exactly when every rank mapped the same file (if some
 * ranks see another /dev/shm, every rank sees fewer than all slots, so the verdict is the same
 * everywhere). The file name is then removed; the mappings stay valid.
 *
 * <p>Not thread safe: one thread per rank drives it (like its group). {@link #close()} may be called
 * from any thread.
 */
public final class NodeLocalChannel implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(NodeLocalChannel.class);

    /** File name prefix; only such files are ever created or removed by this class. */
    public static final String FILE_PREFIX = "jcomm-ps-";

    static final int LINE = 64;
    static final int PUB_SEQ = 0;
    static final int PUB_SRC = 8;
    static final int PUB_LEN = 16;
    static final int DONE = 0;
    static final int PID = 16;
    static final int START = 24;
    static final int MARK = 32;
    static final int CLOSED = 40;

    static final long KIND_ATTACH = 1;
    static final long KIND_BARRIER = 2;
    static final long KIND_BROADCAST = 3;
    /** Bits of the done word below the sequence: kind (8 bits) and root rank (16 bits). */
    static final int TAG_BITS = 24;
    static final long TAG_MASK = (1L << TAG_BITS) - 1;

    private static final long LIVENESS_CHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(5);

    private final Path path;
    private final String group;
    private final int rank;
    private final int size;
    private final int capacity;
    private final long nonce;
    private final MappedByteBuffer map; // reachable for as long as the channel is: the GC unmaps it after
    private final UnsafeBuffer buf;
    private final int dataOffset;
    private final IdleStrategy idle = new BackoffIdleStrategy(32, 32, TimeUnit.MICROSECONDS.toNanos(1),
            TimeUnit.MICROSECONDS.toNanos(100));
    private final ProcessIdentity[] peer;
    private final boolean[] peerCheckable;
    private long seq;
    private final FailureLatch failure = new FailureLatch();
    private volatile boolean closed;
    private boolean unmapped;

    private NodeLocalChannel(Path path, String group, int rank, int size, int capacity, long nonce,
                             MappedByteBuffer map) {
        this.path = path;
        this.group = group;
        this.rank = rank;
        this.size = size;
        this.capacity = capacity;
        this.nonce = nonce;
        this.map = map;
        this.buf = new UnsafeBuffer(map);
        this.dataOffset = LINE * (1 + size);
        this.peer = new ProcessIdentity[size];
        this.peerCheckable = new boolean[size];
    }

    /** Bytes of the file for {@code size} ranks and {@code capacity} data bytes. */
    static long fileBytes(int size, int capacity) {
        return (long) LINE * (1 + size) + capacity;
    }

    /** The file name of one group's channel; options that change the layout are part of it. */
    public static String fileName(long jobNonce, String namespace, String group, int size, int capacity) {
        StringBuilder safe = new StringBuilder(namespace.length() + 1 + group.length()).append(namespace).append('-')
                .append(group);
        for (int i = 0; i < safe.length(); i++) {
            char c = safe.charAt(i);
            if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.'
                    || c == '-')) {
                safe.setCharAt(i, '_');
            }
        }
        return FILE_PREFIX + Long.toHexString(jobNonce) + "-" + safe + "-n" + size + "-c" + capacity;
    }

    /**
     * Creates or opens the file and writes this rank's slot. Returns {@code null} (with a debug line)
     * when the file cannot be created or mapped; the caller still takes part in the verification
     * collective, and {@link #attachedByAll()} is then false everywhere.
     */
    public static NodeLocalChannel open(Path dir, String fileName, String group, int rank, int size, int capacity,
                                        long jobNonce) {
        if (size < 2 || size > 0xFFFF || rank < 0 || rank >= size || capacity < 0) {
            throw new IllegalArgumentException("rank " + rank + " of " + size + ", capacity " + capacity);
        }
        Path path = dir.resolve(fileName);
        long bytes = fileBytes(size, capacity);
        MappedByteBuffer map;
        try {
            // every rank asks for the same length (it is part of the name), so growing is idempotent
            map = ShmFiles.openOrCreateMapped(path, bytes);
        } catch (IOException | RuntimeException e) {
            LOG.debug("group {} rank {}: no node-local channel ({}): {}", group, rank, path, e.toString());
            return null;
        }
        NodeLocalChannel c = new NodeLocalChannel(path, group, rank, size, capacity, jobNonce, map);
        int s = c.slot(rank);
        c.buf.putLong(s + PID, ProcessIdentity.self().pid());
        c.buf.putLong(s + START, ProcessIdentity.self().startTicks());
        c.buf.putLongRelease(s + MARK, jobNonce);
        return c;
    }

    private int slot(int r) {
        return LINE * (1 + r);
    }

    private OpContext ctx(String op) {
        return OpContext.of(group, rank, op);
    }

    /**
     * True when every rank's slot carries this job's mark: call after a collective that every rank
     * entered after {@link #open}. Records the peers' process identities for liveness checks.
     */
    public boolean attachedByAll() {
        for (int r = 0; r < size; r++) {
            int s = slot(r);
            if (buf.getLongAcquire(s + MARK) != nonce) {
                return false;
            }
            peer[r] = new ProcessIdentity(buf.getLong(s + PID), buf.getLong(s + START));
            // a peer whose process this rank cannot see (another pid namespace) is only watched
            // through its closed flag and the deadline: never report a live peer as dead
            peerCheckable[r] = peer[r].alive();
        }
        return true;
    }

    /** Removes the file name (idempotent); mappings stay valid. */
    public void unlink() {
        ShmFiles.unlink(path);
    }

    public Path path() {
        return path;
    }

    /** Largest payload {@link #broadcast} carries. */
    public int capacity() {
        return capacity;
    }

    private void check(OpContext c) {
        failure.rethrow();
        if (closed) {
            throw new CommClosedException(c, "node-local channel closed");
        }
    }

    private CommException fail(CommException e) {
        return failure.trip(e);
    }

    /** Waits until every rank completed operation {@code seq}. */
    public void barrier(Deadline deadline) {
        OpContext c = ctx("barrier");
        check(c);
        long k = ++seq;
        complete(k, KIND_BARRIER);
        awaitAll(c, k, KIND_BARRIER, deadline);
    }

    /**
     * Broadcasts {@code payload} (on {@code src}; ignored elsewhere) and returns it on every rank,
     * or {@code null} on every rank when it does not fit the data area (then the caller moves it
     * another way, in the same order on every rank).
     */
    public byte[] broadcast(byte[] payload, int src, Deadline deadline) {
        OpContext c = ctx("broadcastObject");
        check(c);
        if (src < 0 || src >= size) {
            throw c.invalidArgument("src " + src + " not in [0, " + size + ")");
        }
        long k = ++seq;
        long kind = KIND_BROADCAST | ((long) src << 8);
        if (rank == src) {
            awaitAll(c, k - 1, -1, deadline); // the data area is free once everyone finished k-1
            int len = payload.length <= capacity ? payload.length : -1;
            if (len >= 0) {
                buf.putBytes(dataOffset, payload);
            }
            buf.putLong(PUB_SRC, src);
            buf.putLong(PUB_LEN, len);
            buf.putLongRelease(PUB_SEQ, k);
            complete(k, kind);
            return len >= 0 ? payload : null;
        }
        awaitPublished(c, k, src, deadline);
        long publishedSrc = buf.getLong(PUB_SRC);
        long len = buf.getLong(PUB_LEN);
        if (publishedSrc != src) {
            throw fail(new CollectiveMismatchException(c, "broadcast from rank " + src + " but rank " + publishedSrc
                    + " published operation " + k));
        }
        if (len > capacity) {
            throw fail(new ProtocolException(c, "published length " + len + " exceeds the data area of " + capacity + " bytes"));
        }
        byte[] out = null;
        if (len >= 0) {
            out = new byte[(int) len];
            buf.getBytes(dataOffset, out);
        }
        complete(k, kind);
        return out;
    }

    private void complete(long k, long kind) {
        buf.putLongRelease(slot(rank) + DONE, (k << TAG_BITS) | kind);
    }

    /** Waits until every rank's done >= k; checks that each ran {@code kind} as operation k (if kind >= 0). */
    private void awaitAll(OpContext c, long k, long kind, Deadline deadline) {
        if (k <= 0) {
            return;
        }
        long nextCheck = System.nanoTime() + LIVENESS_CHECK_NANOS;
        for (int r = 0; r < size; r++) {
            int s = slot(r);
            idle.reset();
            long word;
            while (((word = buf.getLongAcquire(s + DONE)) >>> TAG_BITS) < k) {
                long now = System.nanoTime();
                if (now - nextCheck >= 0) {
                    nextCheck = now + LIVENESS_CHECK_NANOS;
                    CommException gone = peerProblem(c, r);
                    // a peer may finish operation k and close (or exit) between the read above and
                    // this check: it failed only if it still has not done k now (DONE is written before
                    // CLOSED, both with release semantics)
                    if (gone != null && (buf.getLongAcquire(s + DONE) >>> TAG_BITS) < k) {
                        throw fail(gone);
                    }
                    if (deadline.isExpired()) {
                        StringBuilder sb = new StringBuilder("ranks ").append(missing(k)).append(" did not arrive at operation ")
                                .append(k).append(" within the deadline (node-local)");
                        for (int m : missing(k)) {
                            if (peer[m] != null) {
                                io.jcomm.api.internal.recorder.RecorderReader.describeProcess(peer[m].pid())
                                        .ifPresent(d -> sb.append(" (rank ").append(m).append(": ").append(d).append(')'));
                            }
                        }
                        throw fail(new CommTimeoutException(c, sb.toString()));
                    }
                }
                if (closed) {
                    throw new CommClosedException(c, "node-local channel closed while waiting");
                }
                idle.idle();
            }
            if (kind >= 0 && (word >>> TAG_BITS) == k) {
                long theirs = word & TAG_MASK;
                if (theirs != kind) {
                    throw fail(new CollectiveMismatchException(c, "rank " + r + " ran " + kindName(theirs)
                            + " as operation " + k + " while this rank ran " + kindName(kind)));
                }
            }
        }
    }

    private void awaitPublished(OpContext c, long k, int src, Deadline deadline) {
        long nextCheck = System.nanoTime() + LIVENESS_CHECK_NANOS;
        idle.reset();
        while (buf.getLongAcquire(PUB_SEQ) < k) {
            long now = System.nanoTime();
            if (now - nextCheck >= 0) {
                nextCheck = now + LIVENESS_CHECK_NANOS;
                CommException gone = peerProblem(c, src);
                if (gone != null && buf.getLongAcquire(PUB_SEQ) < k) {
                    throw fail(gone); // (it may have published k and closed since the loop's read)
                }
                long word = buf.getLongAcquire(slot(src) + DONE);
                if ((word >>> TAG_BITS) >= k && buf.getLongAcquire(PUB_SEQ) < k) {
                    throw fail(new CollectiveMismatchException(c, "rank " + src + " ran " + kindName(word & TAG_MASK)
                            + " as operation " + (word >>> TAG_BITS) + " while this rank expects its broadcast " + k));
                }
                if (deadline.isExpired()) {
                    throw fail(new CommTimeoutException(c, "rank " + src + " did not broadcast operation " + k
                            + " within the deadline (node-local)"));
                }
            }
            if (closed) {
                throw new CommClosedException(c, "node-local channel closed while waiting");
            }
            idle.idle();
        }
    }

    private static String kindName(long kind) {
        long base = kind & 0xff;
        if (base == KIND_BARRIER) {
            return "barrier";
        }
        if (base == KIND_BROADCAST) {
            return "broadcast(src=" + (kind >>> 8) + ")";
        }
        if (base == KIND_ATTACH) {
            return "attach";
        }
        return "unknown(" + kind + ")";
    }

    /** Why peer {@code r} will not make progress (it closed its end, or its process is gone), or null. */
    private CommException peerProblem(OpContext c, int r) {
        int s = slot(r);
        if (buf.getLongAcquire(s + CLOSED) != 0) {
            return new CommClosedException(c, "rank " + r + " closed the group (node-local) while this rank waited");
        }
        if (peerCheckable[r] && !peer[r].alive()) {
            return new PeerFailureException(c, r, "process " + peer[r].pid() + " is gone (node-local)");
        }
        return null;
    }

    private List<Integer> missing(long k) {
        List<Integer> out = new ArrayList<>();
        for (int r = 0; r < size; r++) {
            if ((buf.getLongAcquire(slot(r) + DONE) >>> TAG_BITS) < k) {
                out.add(r);
            }
        }
        return out;
    }

    /**
     * Marks this rank's end closed (peers waiting on it fail with {@link CommClosedException}),
     * removes the file name and unmaps. Idempotent. A call in progress on another thread fails.
     */
    @Override
    public void close() {
        synchronized (this) {
            if (unmapped) {
                return;
            }
            closed = true;
            buf.putLongRelease(slot(rank) + CLOSED, 1L);
            unlink();
            unmapped = true;
        }
        // the mapping itself is released by the GC: another thread may still be reading it
        // (a waiter that has not yet noticed the close); unmapping under it would crash the JVM
    }

    @Override
    public String toString() {
        return "NodeLocalChannel{" + group + " rank " + rank + "/" + size + ", " + path + "}";
    }
}
