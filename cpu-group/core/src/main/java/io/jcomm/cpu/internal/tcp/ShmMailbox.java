package io.jcomm.cpu.internal.tcp;

import io.jcomm.cpu.internal.NativeCopy;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayDeque;
import java.util.Iterator;

/**
 * Point-to-point messages with one peer of a fast-path group ({@link ShmStaging#createFast}): a
 * single-producer/single-consumer ring of records in each direction, inside the two ranks' fast-path
 * regions (the data and head in the producer's region, the consumer's tail in its own). Every
 * point-to-point message to the peer takes one record, in send order: a message of at most a quarter
 * of the ring ({@link #inlineMax()}: 256 KiB in groups of up to 9 ranks, whose rings are 1 MiB,
 * {@link ShmStaging#mailboxBytes}) carries its payload, copied in and out with the native copy; a larger
 * one is a marker, and its payload goes by the link (socket header, ring payload) as before. A receive takes the first record with its tag; a marker hands the
 * receive over to the link, whose messages of that tag are in the same order as their markers. So
 * tag matching and order are those of the links, and a small message costs no system call.
 *
 * <p>Record: {@code [0] i64 stamp, [8] i32 length of the record (16-aligned), [12] u8 kind, [13] u8
 * operation, [14] u8 dtype, [16] i64 count, [24] i32 tag, [28] i32 payload bytes, [32..] payload}. The
 * stamp is the record's position in the stream plus one, written last (release): the receiver polls the
 * stamp at its tail, so a message costs the transfer of its own cache lines only, with no separate head
 * counter. Before it releases a record the sender zeroes the stamp where the next record will start
 * (it keeps {@code NEXT_STAMP} bytes free for that), so the receiver, which polls only there, sees 0 or
 * the next record's stamp, never bytes of the previous lap that happen to look like one. The receiver
 * publishes how far it consumed (its tail), which the sender reads only when its last known tail leaves
 * no room. A record never wraps: the rest of the ring is skipped with a padding record. A record the receiver has no receive for
 * yet stays in the ring, which bounds how far the sender runs ahead (its send is complete once the
 * record is written); only when a receive of another tag waits behind it is it copied out, up to the
 * links' credit ({@code tcp.sendBudgetMessages} and {@code tcp.sendBudgetBytes}).
 *
 * <p>Driving thread only.
 */
final class ShmMailbox {

    static final int HEADER = 32;
    /** The records' stamps: read with acquire, written with release (8-aligned: records are 16-aligned in an aligned ring). */
    private static final VarHandle STAMPS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    /** Ring bytes kept free after the last record for the next record's zeroed stamp (records are 16-aligned). */
    private static final int NEXT_STAMP = 16;
    /** Smallest ring-size quotient: a record may carry up to a quarter of the ring (at least 16 KiB). */
    private static final int INLINE_SHARE = 4;
    private static final int INLINE_MIN = 16 << 10;
    private static final int DATA = 1;
    private static final int MARKER = 2;
    private static final int PAD = 3;

    /** A record waiting for room in the ring. */
    private static final class Out {
        final Op op;
        final Frame header;
        final ByteBuffer payload; // null for a marker

        Out(Op op, Frame header, ByteBuffer payload) {
            this.op = op;
            this.header = header;
            this.payload = payload;
        }
    }

    /** A record copied out of the ring before its receive was posted. */
    private static final class Kept {
        final Frame header;
        final boolean marker;
        final byte[] data;

        Kept(Frame header, boolean marker, byte[] data) {
            this.header = header;
            this.marker = marker;
            this.data = data;
        }
    }

    private final Engine engine;
    private final Link link;
    private final ShmStaging region;
    private final int peer;
    private final ByteBuffer out;
    private final ByteBuffer in;
    private final int capacity;
    private final int inlineMax;
    private final boolean nativeCopy;
    /** What the receiver copies out ahead of its receives: the links' credit ({@code tcp.sendBudget*}). */
    private final long keepBudget;
    private final int keepMessages;
    private final ArrayDeque<Out> queued = new ArrayDeque<>();
    private final ArrayDeque<Recv> posted = new ArrayDeque<>();
    private final ArrayDeque<Kept> kept = new ArrayDeque<>();
    private long keptBytes;
    private long head;
    /** The receiver's tail as this sender last read it (read again only when it leaves no room). */
    private long peerTail;
    private long tail;
    private boolean polling;
    /** Whether the ring to the peer is allocated ({@link ShmStaging#allocateMailbox}, before the first record). */
    private boolean outAllocated;

    ShmMailbox(Engine engine, Link link, ShmStaging region, int peer) {
        this.engine = engine;
        this.link = link;
        this.region = region;
        this.peer = peer;
        this.out = region.mailboxData(engine.rank, peer);
        this.in = region.mailboxData(peer, engine.rank);
        this.capacity = out.capacity();
        this.inlineMax = inlineMax(capacity);
        this.nativeCopy = engine.cfg.shmNativeCopy;
        this.keepBudget = engine.cfg.sendBudgetBytes;
        this.keepMessages = engine.cfg.sendBudgetMessages;
        this.head = 0;
        this.peerTail = 0;
        this.tail = region.mailboxTail(engine.rank, peer);
    }

    /** Largest payload a record of a ring of {@code capacity} bytes carries. */
    static int inlineMax(int capacity) {
        return Math.max(INLINE_MIN, capacity / INLINE_SHARE);
    }

    /** Largest payload a record carries; larger messages are markers with their payload on the link. */
    int inlineMax() {
        return inlineMax;
    }

    /** Sends one point-to-point message: its record now (or once there is room), its payload by the link if large. */
    void send(Op op, Frame header, ByteBuffer payload) {
        if (!outAllocated) {
            try {
                region.allocateMailbox(peer);
            } catch (java.io.IOException e) {
                throw engine.fail(new io.jcomm.api.BackendException(engine.ctx(), "cannot allocate the shared-memory ring to rank "
                        + peer + " (" + e.getMessage() + "): the shared-memory directory is full; free space there, or set "
                        + io.jcomm.cpu.TcpOptions.SHM_FAST_BYTES + "=0", e));
            }
            outAllocated = true;
        }
        int n = payload == null ? 0 : payload.remaining();
        header.payload = n;
        boolean inline = n <= inlineMax;
        op.pendingShmSends++;
        queued.addLast(new Out(op, header, inline ? payload : null));
        flush();
        if (!inline) {
            engine.send(op, peer, header, payload);
        }
    }

    /** Posts a point-to-point receive (its operation counts it from now on). */
    void post(Recv r) {
        r.op.pendingRecvs++;
        for (Iterator<Kept> it = kept.iterator(); it.hasNext(); ) {
            Kept k = it.next();
            if (k.header.root == r.expect.root) {
                it.remove();
                keptBytes -= k.data == null ? 0 : k.data.length;
                if (k.marker) {
                    link.postP2p(r);
                } else {
                    deliver(r, k.header, ByteBuffer.wrap(k.data));
                }
                return;
            }
        }
        posted.addLast(r);
        poll();
    }

    /** Whether a record waits for room (the progress thread finishes it). */
    boolean hasQueued() {
        return !queued.isEmpty();
    }

    /** Whether a posted receive waits for its record. */
    boolean awaitsData() {
        return !posted.isEmpty();
    }

    /** What this rank waits for from the peer through the mailbox (timeouts), or "". */
    String pendingDescription() {
        StringBuilder sb = new StringBuilder();
        Recv r = posted.peekFirst();
        if (r != null) {
            sb.append("waiting for ").append(r.expect.describe()).append(" from rank ").append(peer);
        }
        if (!queued.isEmpty()) {
            sb.append(sb.length() > 0 ? "; " : "").append(queued.size()).append(" message(s) wait for room in the ring to rank ")
                    .append(peer).append(", which has not consumed its messages");
        }
        return sb.toString();
    }

    boolean busy() {
        return !queued.isEmpty() || !posted.isEmpty();
    }

    /** Moves records both ways; returns how many moved. */
    int poll() {
        if (polling) {
            return 0;
        }
        polling = true;
        try {
            return flush() + consume();
        } finally {
            polling = false;
        }
    }

    private static int recordBytes(int payload) {
        return (HEADER + payload + 15) & ~15;
    }

    private int flush() {
        int moved = 0;
        while (!queued.isEmpty()) {
            Out m = queued.peekFirst();
            int len = recordBytes(m.payload == null ? 0 : m.header.payload);
            int at = (int) (head & (capacity - 1));
            int skip = capacity - at < len ? capacity - at : 0;
            if (capacity - (head - peerTail) < skip + len + NEXT_STAMP) {
                peerTail = region.mailboxTail(peer, engine.rank);
                if (capacity - (head - peerTail) < skip + len + NEXT_STAMP) {
                    break;
                }
            }
            if (skip > 0) {
                out.putInt(at + 8, skip);
                out.put(at + 12, (byte) PAD);
                out.putLong(0, 0L); // where the record after the padding starts
                STAMPS.setRelease(out, at, head + 1);
                head += skip;
                at = 0;
            }
            Frame f = m.header;
            out.putInt(at + 8, len);
            out.put(at + 12, (byte) (m.payload == null ? MARKER : DATA));
            out.put(at + 13, (byte) f.op);
            out.put(at + 14, (byte) f.dtype);
            out.putLong(at + 16, f.count);
            out.putInt(at + 24, f.root);
            out.putInt(at + 28, f.payload);
            if (m.payload != null && f.payload > 0) {
                NativeCopy.put(out.duplicate().position(at + HEADER),
                        m.payload.duplicate().limit(m.payload.position() + f.payload), nativeCopy);
            }
            out.putLong((int) ((head + len) & (capacity - 1)), 0L); // where the next record starts
            STAMPS.setRelease(out, at, head + 1);
            head += len;
            queued.pollFirst();
            m.op.pendingShmSends--;
            moved++;
        }
        return moved;
    }

    private int consume() {
        int moved = 0;
        while (true) {
            int at = (int) (tail & (capacity - 1));
            if ((long) STAMPS.getAcquire(in, at) != tail + 1) {
                break; // nothing new (a stale record of the previous lap, or a ring never written here)
            }
            int len = in.getInt(at + 8);
            int kind = in.get(at + 12);
            if (len < 16 || (len & 15) != 0 || len > capacity - at || (kind != PAD && len < HEADER)) {
                throw engine.fail(new io.jcomm.api.ProtocolException(engine.ctx(), "malformed message record from rank "
                        + peer + " in shared memory (length " + len + ")"));
            }
            if (kind != PAD) {
                Frame f = Frame.of(Frame.P2P, in.get(at + 13) & 0xFF, 0);
                f.dtype = in.get(at + 14) & 0xFF;
                f.count = in.getLong(at + 16);
                f.root = in.getInt(at + 24);
                f.payload = in.getInt(at + 28);
                boolean marker = kind == MARKER;
                if (f.payload < 0 || (!marker && recordBytes(f.payload) != len) || (kind != DATA && !marker)) {
                    throw engine.fail(new io.jcomm.api.ProtocolException(engine.ctx(), "malformed message record from rank "
                            + peer + " in shared memory (kind " + kind + ", payload " + f.payload + ")"));
                }
                Recv r = take(f.root);
                if (r != null) {
                    if (marker) {
                        link.postP2p(r);
                    } else {
                        deliver(r, f, in.duplicate().position(at + HEADER).limit(at + HEADER + f.payload).slice());
                    }
                } else {
                    int bytes = marker ? 0 : f.payload;
                    if (posted.isEmpty() || kept.size() >= keepMessages
                            || (keptBytes + bytes > keepBudget && !kept.isEmpty())) {
                        // nobody looks past it: it stays in the ring (the ring bounds the sender, no copy, no
                        // garbage); copied out only for a receive of another tag behind it, within the credit
                        break; // stays in the ring: the sender waits for room
                    }
                    byte[] data = null;
                    if (!marker) {
                        data = new byte[bytes];
                        in.get(at + HEADER, data);
                    }
                    keptBytes += bytes;
                    kept.addLast(new Kept(f, marker, data));
                }
            }
            tail += len;
            moved++;
        }
        if (moved > 0) {
            region.publishMailboxTail(peer, tail);
        }
        return moved;
    }

    private Recv take(int tag) {
        for (Iterator<Recv> it = posted.iterator(); it.hasNext(); ) {
            Recv r = it.next();
            if (r.expect.root == tag) {
                it.remove();
                return r;
            }
        }
        return null;
    }

    private void deliver(Recv r, Frame got, ByteBuffer data) {
        link.checkP2p(r, got);
        r.deliver(data.order(ByteOrder.LITTLE_ENDIAN), got.payload, nativeCopy);
    }

    /** Drops what is queued (the group is closing). */
    void close() {
        queued.clear();
        posted.clear();
        kept.clear();
        keptBytes = 0;
    }
}
