package io.jcomm.cpu.internal.tcp;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * Messages that arrived before their receive was posted, for one {@link Engine}: their bytes are
 * counted against {@code tcp.maxUnexpectedBytes} (a link over budget stops reading: it is parked,
 * and TCP's own window pushes back on the sender), their payloads live in pooled direct buffers,
 * and links with work left are serviced by the driving thread ({@link #drain}). Driving thread only.
 */
final class EarlyMessages {

    private final long maxBytes;
    private long earlyBytes;
    private final ArrayDeque<Link> dirty = new ArrayDeque<>();
    private final List<Link> parkedLinks = new ArrayList<>();

    EarlyMessages(long maxBytes) {
        this.maxBytes = maxBytes;
    }

    /** Bytes of messages buffered before their receive was posted (tests, diagnostics). */
    long bytes() {
        return earlyBytes;
    }

    boolean reserve(int bytes) {
        if (earlyBytes > 0 && earlyBytes + bytes > maxBytes) {
            return false;
        }
        earlyBytes += bytes;
        return true;
    }

    /**
     * A buffer for an early message's payload, from the pooled allocator: the caller keeps it in
     * {@link Link.Early#buf} and {@link #release} gives it back, so that a receiver behind its
     * sender reuses a few buffers instead of leaving one per message to the garbage collector.
     */
    void allocate(Link.Early e, int bytes) {
        if (bytes == 0) {
            e.data = ByteBuffer.allocate(0);
            return;
        }
        e.buf = io.netty.buffer.PooledByteBufAllocator.DEFAULT.directBuffer(bytes, bytes);
        e.data = e.buf.nioBuffer(0, bytes); // direct: reductions may read it (see Reductions)
    }

    void release(Link.Early e) {
        if (!e.lazy) {
            earlyBytes -= e.header.payload;
        }
        e.data = null;
        if (e.buf != null) {
            e.buf.release();
            e.buf = null;
        }
        if (!parkedLinks.isEmpty()) {
            for (Link l : parkedLinks) {
                markDirty(l);
            }
        }
    }

    void noteParked(Link l) {
        if (!parkedLinks.contains(l)) {
            parkedLinks.add(l);
        }
    }

    void markDirty(Link l) {
        if (!dirty.contains(l)) {
            dirty.add(l);
        }
    }

    void drain() {
        if (!parkedLinks.isEmpty()) {
            long now = System.nanoTime();
            for (Link p : parkedLinks) {
                if (p.deferralDue(now)) {
                    markDirty(p); // a payload left in the socket for its receive waited long enough
                }
            }
        }
        Link l;
        while ((l = dirty.poll()) != null) {
            l.service();
            if (!l.isParked()) {
                parkedLinks.remove(l);
            }
        }
    }
}
