package io.jcomm.cpu.internal.tcp;

import io.jcomm.cpu.internal.NativeCopy;
import io.jcomm.cpu.spi.Reductions;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;

/**
 * Shared-memory payload transfer with one peer: an outbound ring (this rank produces into the peer's
 * file) and an inbound ring (the peer produces into this rank's file). Headers still travel by
 * socket, flagged {@link Frame#FLAG_SHM}; the payloads follow in the ring in the same order.
 *
 * <p>Progress happens in {@link #poll()}, called by the waiting thread: copy as much of the pending
 * outbound payloads as the ring has room for, publish the new head with release semantics; read
 * the published head with acquire semantics, copy (or reduce, straight from the ring into the
 * accumulator) what arrived, publish the new tail. Transfers are cut into chunks so that the peer can
 * start on the first bytes while the rest is still being copied. Driving thread only.
 */
final class ShmLink {

    private static final int CHUNK = 256 << 10;

    private static final class Out {
        final Op op;
        final ByteBuffer src;
        final int length;
        int sent;

        Out(Op op, ByteBuffer src) {
            this.op = op;
            this.src = src;
            this.length = src.remaining();
        }
    }

    private static final class In {
        final Link link;
        final Frame header;
        Recv recv;
        final Link.Early early;
        ByteBuffer target; // copy destination (INTO, BYTES, early); null for REDUCE
        int got;

        In(Link link, Frame header, Recv recv, Link.Early early) {
            this.link = link;
            this.header = header;
            this.early = early;
            if (recv != null) {
                bind(recv);
            } else if (!early.lazy) {
                target = early.data;
            }
        }

        void bind(Recv r) {
            recv = r;
            if (r.mode == Recv.INTO) {
                target = r.dest;
            } else if (r.mode == Recv.BYTES) {
                target = ByteBuffer.allocate(header.payload);
            }
        }
    }

    private ShmRings.Ring in;
    private ShmRings.Ring out;
    private final boolean nativeCopy;
    private final ArrayDeque<Out> outQueue = new ArrayDeque<>();
    private final ArrayDeque<In> inQueue = new ArrayDeque<>();
    private long head;      // producer position (out ring), mirrors what was published
    private long tail;      // consumer position (in ring)
    private long skipTo;    // consumer: end of the padding after the last message
    private Link link;
    private boolean polling;
    private boolean producing;
    /** The outbound ring offered to the peer and not yet answered. */
    ShmRings.Ring offered;
    /** Whether this rank offered (or failed to create) its outbound ring: it does so once. */
    boolean offerTried;

    /** @param nativeCopy whether payloads move with {@link NativeCopy} ({@code tcp.shm.nativeCopy}) */
    ShmLink(boolean nativeCopy) {
        this.nativeCopy = nativeCopy;
    }

    /** Takes the peer's ring for payloads from it (before any header flagged for it can arrive). */
    void attachIn(ShmRings.Ring ring) {
        in = ring;
        tail = ring.tail();
        skipTo = tail;
    }

    /** Starts producing into {@code ring}, which the peer mapped. */
    void attachOut(ShmRings.Ring ring) {
        out = ring;
        head = ring.head();
    }

    void bind(Link l) {
        this.link = l;
    }

    boolean canSend() {
        return out != null;
    }

    boolean canReceive() {
        return in != null;
    }

    /** Whether a payload this rank waits for is on its way (a message kept for a later receive is not). */
    boolean receiving() {
        In m = inQueue.peekFirst();
        return m != null && (m.recv != null || !m.early.lazy || m.early.claimedBy != null);
    }

    /** Whether payloads this rank sends to the peer still wait for room in the ring. */
    boolean sending() {
        return !outQueue.isEmpty();
    }

    boolean busy() {
        return sending() || receiving();
    }

    /** Queues an outbound payload whose header was already written to the socket. */
    void send(Op op, ByteBuffer payload) {
        op.pendingShmSends++;
        outQueue.addLast(new Out(op, payload.duplicate()));
        if (!producing) {
            produce(); // only outbound work here: no continuation may run while an operation posts its sends
        }
    }

    /** Expects an inbound payload announced by {@code header}, for {@code recv} or an early buffer. */
    void expect(Frame header, Recv recv, Link.Early early) {
        inQueue.addLast(new In(link, header, recv, early));
        poll();
    }

    private static long align(long v) {
        return (v + 63) & ~63L;
    }

    /** Makes progress in both directions; returns the number of bytes moved. */
    int poll() {
        if (polling) {
            return 0; // called from a continuation inside poll(): the outer call continues
        }
        polling = true;
        try {
            int work = 0;
            if (out != null && !outQueue.isEmpty()) {
                work += produce();
            }
            if (in != null && !inQueue.isEmpty()) {
                work += consume();
            }
            if (work > 0 && out != null && !outQueue.isEmpty()) {
                work += produce(); // continuations may have queued sends
            }
            return work;
        } finally {
            polling = false;
        }
    }

    private int produce() {
        producing = true;
        try {
            return produce0();
        } finally {
            producing = false;
        }
    }

    private int produce0() {
        int moved = 0;
        long t = out.tail();
        while (!outQueue.isEmpty()) {
            Out m = outQueue.peekFirst();
            int free = (int) (out.capacity - (head - t));
            if (m.sent < m.length) {
                if (free == 0) {
                    t = out.tail();
                    if (out.capacity - (head - t) == 0) {
                        break;
                    }
                    continue;
                }
                int n = Math.min(Math.min(free, m.length - m.sent), CHUNK);
                copyIn(m.src, m.sent, n);
                m.sent += n;
                head += n;
                moved += n;
                out.head(head);
                continue;
            }
            long padded = align(head);
            if (padded != head) {
                if (out.capacity - (padded - t) < 0) {
                    t = out.tail();
                    if (out.capacity - (padded - t) < 0) {
                        break;
                    }
                }
                head = padded;
                out.head(head);
            }
            outQueue.pollFirst();
            m.op.pendingShmSends--;
        }
        return moved;
    }

    private void copyIn(ByteBuffer src, int from, int n) {
        int pos = (int) (head & out.mask);
        int first = Math.min(n, out.capacity - pos);
        ByteBuffer s = src.duplicate();
        s.position(src.position() + from).limit(src.position() + from + first);
        NativeCopy.put(out.data.duplicate().position(pos), s, nativeCopy);
        if (first < n) {
            s.limit(src.position() + from + n).position(src.position() + from + first);
            NativeCopy.put(out.data.duplicate().position(0), s, nativeCopy);
        }
    }

    private int consume() {
        int moved = 0;
        long h = in.head();
        while (!inQueue.isEmpty()) {
            if (tail < skipTo) {
                if (h < skipTo) {
                    h = in.head();
                    if (h < skipTo) {
                        break;
                    }
                }
                tail = skipTo;
                in.tail(tail);
            }
            In m = inQueue.peekFirst();
            if (m.recv == null && m.early.lazy) {
                Recv claimed = m.early.claimedBy;
                if (claimed == null) {
                    break; // stays in the ring until its receive is posted
                }
                m.bind(claimed);
            }
            int need = m.header.payload - m.got;
            long avail = h - tail;
            if (avail == 0 && need > 0) {
                h = in.head();
                avail = h - tail;
                if (avail == 0) {
                    break;
                }
            }
            int n = (int) Math.min(Math.min(avail, need), CHUNK);
            if (m.recv != null && m.recv.mode == Recv.REDUCE) {
                int es = m.recv.dtype.byteSize();
                if (n < need) {
                    n -= n % es;
                }
                if (n == 0 && need > 0) {
                    break;
                }
                reduceOut(m, n);
            } else if (n > 0) {
                copyOut(m.target, m.got, n);
            }
            m.got += n;
            tail += n;
            moved += n;
            in.tail(tail);
            if (m.got == m.header.payload) {
                inQueue.pollFirst();
                skipTo = align(tail);
                complete(m);
            }
        }
        return moved;
    }

    private void copyOut(ByteBuffer dst, int at, int n) {
        int pos = (int) (tail & in.mask);
        int first = Math.min(n, in.capacity - pos);
        ByteBuffer d = dst.duplicate();
        d.position(at).limit(at + first);
        NativeCopy.put(d, in.data.duplicate().position(pos).limit(pos + first), nativeCopy);
        if (first < n) {
            d.limit(at + n);
            NativeCopy.put(d, in.data.duplicate().position(0).limit(n - first), nativeCopy);
        }
    }

    private void reduceOut(In m, int n) {
        int pos = (int) (tail & in.mask);
        int first = Math.min(n, in.capacity - pos);
        reducePart(m.recv, m.got, in.data.duplicate().position(pos).limit(pos + first), first);
        if (first < n) {
            reducePart(m.recv, m.got + first, in.data.duplicate().position(0).limit(n - first), n - first);
        }
    }

    private static void reducePart(Recv r, int at, ByteBuffer data, int bytes) {
        int count = bytes / r.dtype.byteSize();
        ByteBuffer acc = r.dest.duplicate();
        acc.position(acc.position() + at);
        if (r.init != null) {
            ByteBuffer init = r.init.duplicate();
            init.position(init.position() + at);
            Reductions.reduce(r.dtype, r.reduceOp, acc, init, data, count);
        } else {
            Reductions.reduceInto(r.dtype, r.reduceOp, acc, data, count);
        }
    }

    private void complete(In m) {
        if (m.recv != null) {
            if (m.recv.mode == Recv.BYTES) {
                m.recv.bytes = m.target.array();
            }
            if (m.early != null) {
                m.link.lazyDelivered(m.early);
            }
            m.recv.finish();
        } else {
            m.link.earlyComplete(m.early);
        }
    }

    /** Nothing to release here: the rings' mappings belong to {@link ShmRings}. */
    void close() {
        outQueue.clear();
        inQueue.clear();
    }
}
