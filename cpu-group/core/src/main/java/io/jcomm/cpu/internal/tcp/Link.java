package io.jcomm.cpu.internal.tcp;

import io.jcomm.api.CommException;
import io.jcomm.api.ProtocolException;
import io.jcomm.cpu.TcpOptions;
import io.netty.buffer.ByteBuf;
import io.netty.buffer.ByteBufAllocator;
import io.netty.buffer.Unpooled;
import io.netty.channel.Channel;
import io.netty.channel.ChannelConfig;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.RecvByteBufAllocator;
import io.netty.util.UncheckedBooleanSupplier;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;

/**
 * One connection to one peer: decodes the inbound byte stream into frames and delivers payloads to
 * posted receives, and writes outbound frames.
 *
 * <h2>Receiving without copies</h2>
 * The link is its channel's {@link RecvByteBufAllocator}: while a large payload is being received it
 * hands the channel a buffer that wraps the destination itself (the caller's tensor, or the staging
 * buffer of a reduction), so the kernel copies socket data straight into it. Headers and small
 * payloads are read through a 64 KiB scratch buffer.
 *
 * <h2>Matching</h2>
 * Collective messages from a peer arrive in the order the peer sent them, which is the order in which
 * this rank posts its receives for that peer; each is checked against the posted receive's expected
 * header (a difference is a {@link io.jcomm.api.CollectiveMismatchException}). Point-to-point messages
 * match posted receives by tag. A message that arrives before its receive is posted is buffered
 * (bounded by {@code tcp.maxUnexpectedBytes}; past the bound the link stops reading until space
 * frees up). Payloads flagged {@link Frame#FLAG_SHM} travel through the shared-memory ring instead
 * of the socket.
 *
 * <h2>Flow control</h2>
 * Every data message costs its {@link Frame#cost()} and one message against a per-peer budget
 * ({@code tcp.sendBudgetBytes}, {@code tcp.sendBudgetMessages}): what was sent to the peer and no receive
 * there has consumed yet. A message that would exceed it (or that follows one that waits) is held, in
 * order, until the peer's {@link Frame#CREDIT} frees room; its operation does not complete before it
 * left. The receiving side counts what its receives consumed and credits it back once a quarter of its
 * own budget (bytes or messages) has accumulated, or at once when the sender said it waits ({@link Frame#CREDIT_WANTED}). So what one rank
 * buffers for a slower peer, and how far it runs ahead of it, is bounded by the budget.
 *
 * <h2>Strangers</h2>
 * An accepted connection is bound to a peer only by a valid {@link Frame#HELLO} (the nonce the rank
 * published in the store). Anything else it sends first is dropped with a log line, the connection is
 * closed, and the group never sees it.
 *
 * <p>Everything here runs on the thread that drives the event loop (a caller inside the group, or the
 * process's progress thread when no caller is).
 *
 * <p>The link is a {@link PassThroughInbound}, not a subclass of Netty's adapter, so that a rank's start
 * reads no annotation ({@link MeshBootstrap} avoids Netty's bootstraps for the same reason).
 */
final class Link implements PassThroughInbound, RecvByteBufAllocator, RecvByteBufAllocator.ExtendedHandle {

    static final int SCRATCH_BYTES = 64 << 10;
    static final int DIRECT_READ_MIN = 16 << 10;
    static final int INLINE_PAYLOAD_MAX = 64 << 10;
    static final int MAX_CONTROL_PAYLOAD = 4096;
    private static final int MAX_READS_PER_EVENT = 32;
    /**
     * A point-to-point payload of at least this size whose header arrives before its receive, while nothing
     * else is awaited from this peer and nothing is still being sent to it ({@link #sendingToPeer}), and while
     * this rank's caller is inside a call on this group (between calls, or in another group's call, the
     * progress thread takes it at once: that caller may never post the receive, and the sender waits), stays
     * where it is (in the socket, or in the shared-memory ring with its header left in the socket) for up to
     * {@link #DEFER_MAX_NANOS}: its receive is usually being posted (a tensor-dict receiver decodes the
     * metadata that came just before), and it is then read straight into the destination instead of into an
     * early buffer and copied again. In a same-host pipeline at 1-4 MiB that second copy, in a quarter to a
     * third of the steps (the sender ahead), was the slow mode of the step time.
     */
    static final int DEFER_P2P_MIN = 64 << 10;
    static final long DEFER_MAX_NANOS = 5_000_000L;

    /** A message whose payload arrived (or is arriving) before a receive was posted for it. */
    static final class Early {
        final Frame header;
        ByteBuffer data;
        /** The pooled buffer behind {@link #data} (released with the message), or null. */
        ByteBuf buf;
        int filled;
        boolean complete;
        Recv claimedBy;

        boolean lazy;

        Early(Frame header) {
            this.header = header;
        }
    }

    /** A data message waiting for the peer's credit. */
    private static final class Held {
        final Op op;
        final Frame header;
        final ByteBuffer payload; // null for a header whose payload goes through shared memory

        Held(Op op, Frame header, ByteBuffer payload) {
            this.op = op;
            this.header = header;
            this.payload = payload;
        }
    }

    /** The message whose payload is being received. */
    static final class Incoming {
        final Frame header;
        final Recv recv;       // the receive it feeds, or null
        final Early early;     // the early buffer it fills, or null
        final int control;     // a control frame kind whose payload we collect, or 0
        final ByteBuffer target;
        final int total;
        int filled;

        Incoming(Frame header, Recv recv, Early early, int control, ByteBuffer target) {
            this.header = header;
            this.recv = recv;
            this.early = early;
            this.control = control;
            this.target = target;
            this.total = header.payload;
        }
    }

    final Engine engine;
    int peer = -1;
    Channel channel;
    boolean helloSeen;
    boolean readySeen;
    boolean byeSeen;
    boolean abortSeen;
    boolean inactive;

    private ByteBuf scratch;
    private Incoming current;
    private ByteBuf direct;
    private Incoming directFor;
    private int directBase;
    private ByteBuffer staging;
    private boolean parked;
    /** Since when a large point-to-point payload waits in the socket for its receive (0: none). */
    private long deferredSince;
    private boolean processing;

    private final ArrayDeque<Recv> collectiveRecvs = new ArrayDeque<>();
    private final ArrayDeque<Recv> completionOrder = new ArrayDeque<>();
    private boolean finishing;
    private final List<Recv> p2pRecvs = new ArrayList<>();
    private final ArrayDeque<Early> early = new ArrayDeque<>();

    /** Shared-memory transport to/from this peer, or null. */
    ShmLink shm;
    /** Point-to-point records through the fast path's regions (same-host groups), else null. */
    ShmMailbox mailbox;

    // flow control
    /** Cost of the data messages sent to the peer and not yet credited back by it, and their number. */
    private long inFlight;
    private int inFlightMessages;
    /** Data messages waiting for credit, in send order. */
    private final ArrayDeque<Held> held = new ArrayDeque<>();
    private long heldBytes;
    /** When the first message now held started waiting (0: none waits). */
    private long heldSince;
    /** Cost of the peer's data messages consumed here and not yet credited to it, and their number. */
    private long consumed;
    private int consumedMessages;
    /** The peer said it waits for credit: send it as soon as anything was consumed. */
    private boolean creditWanted;
    /** This rank told the peer it waits for credit and has not received any since. */
    private boolean creditAsked;
    private long creditFrames;

    // read accounting for the allocator handle
    private int attempted;
    private int lastRead;
    private int reads;
    private ChannelConfig config;

    Link(Engine engine) {
        this.engine = engine;
    }

    // ------------------------------------------------------------------ channel life cycle

    void attach(Channel ch) {
        this.channel = ch;
        this.config = ch.config();
        this.scratch = Unpooled.directBuffer(SCRATCH_BYTES, SCRATCH_BYTES);
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        inactive = true;
        engine.onInactive(this, null);
        ctx.fireChannelInactive();
    }

    @Override
    @SuppressWarnings("deprecation") // declared by ChannelInboundHandler, deprecated on ChannelHandler only
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        engine.onInactive(this, cause);
        ctx.close();
    }

    /** Frees the scratch buffer; after the channel closed. */
    void release() {
        if (scratch != null && scratch.refCnt() > 0) {
            scratch.release(scratch.refCnt());
        }
        if (direct != null && direct.refCnt() > 0) {
            direct.release(direct.refCnt());
        }
        direct = null;
        for (Early e : early) {
            engine.early.release(e);
        }
        early.clear();
        held.clear();
        heldBytes = 0;
        completionOrder.clear();
        collectiveRecvs.clear();
        p2pRecvs.clear();
        if (shm != null) {
            shm.close();
        }
    }

    String who() {
        return peer >= 0 ? "rank " + peer : String.valueOf(channel == null ? "?" : channel.remoteAddress());
    }

    // ------------------------------------------------------------------ writing

    /**
     * Writes a frame and its payload (read from {@code payload}'s position to limit). Small payloads
     * are copied next to the header; larger ones are written from the caller's memory, and the
     * returned future completes once the socket took every byte (null when nothing needs tracking).
     */
    ChannelFuture write(Frame f, ByteBuffer payload, boolean flush) {
        int n = payload == null ? 0 : payload.remaining();
        f.payload = n;
        piggyback(f);
        ChannelFuture tracked = null;
        if (n <= INLINE_PAYLOAD_MAX) {
            ByteBuf b = channel.alloc().directBuffer(Frame.SIZE + n);
            f.writeTo(b);
            if (n > 0) {
                b.writeBytes(payload.duplicate());
            }
            channel.write(b, channel.voidPromise());
        } else {
            ByteBuf h = channel.alloc().directBuffer(Frame.SIZE);
            f.writeTo(h);
            channel.write(h, channel.voidPromise());
            tracked = channel.write(Unpooled.wrappedBuffer(payload.slice()));
        }
        if (flush) {
            channel.flush();
        }
        return tracked;
    }

    /**
     * Sends a data message of {@code op} whose payload goes by socket ({@code payload}, may be null), now
     * if the peer's credit allows, else after the messages held before it.
     */
    void sendData(Op op, Frame f, ByteBuffer payload) {
        f.payload = payload == null ? 0 : payload.remaining();
        if (held.isEmpty() && fits(f.cost())) {
            charge(f);
            track(op, write(f, payload, true));
        } else {
            hold(op, f, payload == null ? null : payload.duplicate());
        }
    }

    /**
     * Sends the header of a data message whose {@code payloadBytes} travel through shared memory (the
     * caller queues them in the ring; the ring keeps the headers' order, so they may go ahead of a held header).
     */
    void sendShmHeader(Op op, Frame f, int payloadBytes) {
        f.payload = payloadBytes;
        f.flags |= Frame.FLAG_SHM;
        if (held.isEmpty() && fits(f.cost())) {
            charge(f);
            writeShmHeader(f);
        } else {
            hold(op, f, null);
        }
    }

    private void writeShmHeader(Frame f) {
        piggyback(f);
        ByteBuf b = channel.alloc().directBuffer(Frame.SIZE);
        f.writeTo(b);
        channel.writeAndFlush(b, channel.voidPromise());
    }

    private static void track(Op op, ChannelFuture cf) {
        if (cf != null) {
            op.track(cf);
        }
    }

    /** Whether a message of {@code cost} may go now: within the budget, or alone when larger than it. */
    private boolean fits(long cost) {
        return inFlightMessages == 0
                || (inFlight + cost <= engine.cfg.sendBudgetBytes && inFlightMessages < engine.cfg.sendBudgetMessages);
    }

    private void charge(Frame f) {
        inFlight += f.cost();
        inFlightMessages++;
    }

    private void hold(Op op, Frame f, ByteBuffer payload) {
        held.addLast(new Held(op, f, payload));
        heldBytes += f.cost();
        op.pendingHeld++;
        if (heldSince == 0) {
            heldSince = System.nanoTime();
        }
        askCredit();
    }

    private void askCredit() {
        if (!creditAsked) {
            creditAsked = true;
            writeControl(Frame.CREDIT_WANTED, 0, 0, null);
        }
    }

    /**
     * The peer consumed {@code messages} more of this rank's data messages, costing {@code bytes}: send
     * what it now has room for.
     */
    private void onCredit(long bytes, long messages) {
        if (messages <= 0 || messages > inFlightMessages || bytes < messages * Frame.SIZE || bytes > inFlight) {
            throw new ProtocolException(engine.ctx(), who() + " credited " + messages + " messages of " + bytes
                    + " bytes; " + inFlightMessages + " of " + inFlight + " bytes were outstanding");
        }
        inFlight -= bytes;
        inFlightMessages -= (int) messages;
        creditAsked = false;
        boolean wrote = false;
        Held h;
        while ((h = held.peekFirst()) != null && fits(h.header.cost())) {
            held.pollFirst();
            heldBytes -= h.header.cost();
            charge(h.header);
            if ((h.header.flags & Frame.FLAG_SHM) != 0) {
                piggyback(h.header);
                ByteBuf b = channel.alloc().directBuffer(Frame.SIZE);
                h.header.writeTo(b);
                channel.write(b, channel.voidPromise());
            } else {
                track(h.op, write(h.header, h.payload, false));
            }
            h.op.pendingHeld--;
            wrote = true;
        }
        if (wrote) {
            channel.flush();
        }
        if (held.isEmpty()) {
            heldSince = 0;
        } else {
            askCredit();
        }
    }

    /** This rank's receive consumed a data message of the peer: credit it back when due. */
    private void consumed(Frame f) {
        consumed += f.cost();
        consumedMessages++;
        if (creditWanted || consumed >= engine.cfg.sendBudgetBytes / 4
                || consumedMessages >= Math.max(1, engine.cfg.sendBudgetMessages / 4)) {
            sendCredit();
        }
    }

    /** A data message to the peer carries the credit due to it, if it fits the header's fields. */
    private void piggyback(Frame f) {
        if (consumedMessages > 0 && consumedMessages <= 255 && consumed <= Integer.MAX_VALUE && f.isData()) {
            f.creditMessages = consumedMessages;
            f.creditBytes = (int) consumed;
            consumed = 0;
            consumedMessages = 0;
            creditWanted = false;
        }
    }

    private void sendCredit() {
        creditFrames++;
        Frame f = Frame.of(Frame.CREDIT, 0, consumed);
        f.count = consumedMessages;
        consumed = 0;
        consumedMessages = 0;
        creditWanted = false;
        if (channel != null && channel.isActive()) {
            write(f, null, true);
        }
    }

    /** Bytes sent to the peer that it has not consumed yet, and bytes held for its credit (tests, diagnostics). */
    long inFlightBytes() {
        return inFlight;
    }

    int inFlightMessages() {
        return inFlightMessages;
    }

    /** CREDIT frames sent so far (tests: traffic both ways should need none). */
    long creditFrames() {
        return creditFrames;
    }

    long heldBytes() {
        return heldBytes;
    }

    /**
     * Whether bytes of this rank's sends to this peer still wait (for credit, the socket or room in the ring):
     * the peer may then be blocked in the same way on its own send to this rank, so its payload is not left
     * waiting for a receive (two ranks that both send a large tensor, then receive, would stall each other for
     * the whole deferral).
     */
    private boolean sendingToPeer() {
        return !held.isEmpty() || hasPendingOutput() || (shm != null && shm.sending());
    }

    /**
     * Whether sends to this peer still wait for it to make room: messages held for its credit, records queued for
     * room in the mailbox ring, payloads queued for room in the payload ring. Their operations are not complete
     * until then, so once the peer closed the group they never will be.
     */
    boolean awaitsRoom() {
        return !held.isEmpty() || (mailbox != null && mailbox.hasQueued()) || (shm != null && shm.sending());
    }

    /** Whether bytes written to this connection still wait in its outbound buffer for the socket. */
    boolean hasPendingOutput() {
        if (channel == null || !channel.isActive()) {
            return false;
        }
        io.netty.channel.ChannelOutboundBuffer ob = channel.unsafe().outboundBuffer();
        return ob != null && !ob.isEmpty();
    }

    void writeControl(int kind, int code, long seq, byte[] payload) {
        if (channel == null || !channel.isActive()) {
            return;
        }
        Frame f = Frame.of(kind, code, seq);
        write(f, payload == null ? null : ByteBuffer.wrap(payload), true);
    }

    // ------------------------------------------------------------------ posting receives

    void postCollective(Recv r) {
        r.orderedBy = this;
        completionOrder.addLast(r);
        // Unclaimed early collective messages exist only while no collective receive is queued, and
        // they are matched in arrival order.
        for (Early x : early) {
            if (x.header.kind == Frame.DATA && x.claimedBy == null) {
                claim(x, r);
                return;
            }
        }
        collectiveRecvs.addLast(r);
        if (parked) {
            engine.early.markDirty(this);
        }
    }

    /** Completes the leading collective receives whose payloads are in place, in posting order. */
    void finishInOrder() {
        if (finishing) {
            return; // the outer call drains the queue
        }
        finishing = true;
        try {
            Recv r;
            while ((r = completionOrder.peekFirst()) != null && r.payloadComplete) {
                completionOrder.pollFirst();
                r.complete();
            }
        } finally {
            finishing = false;
        }
    }

    void postP2p(Recv r) {
        for (Early x : early) {
            if (x.header.kind == Frame.P2P && x.claimedBy == null && x.header.root == r.expect.root) {
                claim(x, r);
                return;
            }
        }
        p2pRecvs.add(r);
        if (parked) {
            engine.early.markDirty(this);
        }
    }

    /** Checks a point-to-point message that came through the mailbox against its receive, as {@link #claim} does. */
    void checkP2p(Recv r, Frame got) {
        String diff = Frame.difference(r.expect, got, r.variable());
        if (diff != null) {
            throw engine.mismatch(this, r.expect, got, diff);
        }
        if (r.variable()) {
            checkVariable(r, got);
        }
    }

    private void claim(Early e, Recv r) {
        String diff = Frame.difference(r.expect, e.header, r.variable());
        if (diff != null) {
            throw engine.mismatch(this, r.expect, e.header, diff);
        }
        if (r.variable()) {
            checkVariable(r, e.header);
        }
        e.claimedBy = r;
        consumed(e.header);
        if (e.complete) {
            // delivered from the wait loop, never inside post(): a continuation must not run before
            // the operation's own first sends were issued
            engine.early.markDirty(this);
        }
    }

    private void deliverEarly(Early e) {
        early.remove(e);
        Recv r = e.claimedBy;
        ByteBuffer data = e.data == null ? ByteBuffer.allocate(0) : e.data;
        try {
            r.deliver(data, e.header.payload, engine.cfg.shmNativeCopy);
        } finally {
            engine.early.release(e); // after the copy: the buffer goes back to the pool
        }
        if (parked) {
            engine.early.markDirty(this);
        }
    }

    private void checkVariable(Recv r, Frame got) {
        if (got.payload < 0 || got.payload > r.maxBytes) {
            throw new ProtocolException(engine.ctx(), "rank " + peer + " sent an object of " + got.payload
                    + " bytes; the limit is " + r.maxBytes + " (option object.maxBytes)");
        }
    }

    /**
     * Delivers claimed early messages that are complete, and resumes reading after it was stopped
     * (buffer budget) once receives were posted or space freed. Called from the wait loop.
     */
    void service() {
        for (Early e : early.toArray(new Early[0])) {
            if (e.claimedBy != null && e.complete && early.contains(e)) {
                deliverEarly(e);
            }
        }
        resume();
    }

    private void resume() {
        if (!parked || inactive) {
            return;
        }
        parked = false;
        processScratch();
        if (!parked && channel.isActive()) {
            config.setAutoRead(true);
        }
    }

    private void park() {
        parked = true;
        config.setAutoRead(false);
        engine.early.noteParked(this);
    }

    /** Whether this link is parked on a deferred payload whose deferral is over (it must be buffered now). */
    boolean deferralDue(long now) {
        return parked && deferredSince != 0 && now - deferredSince >= DEFER_MAX_NANOS;
    }

    boolean isParked() {
        return parked;
    }

    /** Whether this rank waits for anything from this peer (posted receives, payload in progress). */
    boolean awaitsData() {
        return !collectiveRecvs.isEmpty() || !p2pRecvs.isEmpty() || current != null || !held.isEmpty()
                || (shm != null && shm.receiving()) || (mailbox != null && mailbox.awaitsData()) || early.stream().anyMatch(e -> e.claimedBy != null && !e.complete);
    }

    // ------------------------------------------------------------------ reading

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        ByteBuf buf = (ByteBuf) msg;
        try {
            if (buf == direct) {
                Incoming in = current;
                int now = directBase + buf.writerIndex();
                in.filled = now;
                buf.readerIndex(buf.writerIndex());
                if (in.filled == in.total) {
                    direct.release();
                    direct = null;
                    directFor = null;
                    current = null;
                    complete(in);
                    processScratch();
                }
            } else if (buf == scratch) {
                processScratch();
            } else {
                // not a buffer we handed out (should not happen): append it to the scratch stream
                scratch.discardReadBytes();
                if (scratch.writableBytes() < buf.readableBytes()) {
                    throw new ProtocolException(engine.ctx(), "inbound buffer overflow from " + who());
                }
                scratch.writeBytes(buf);
                processScratch();
            }
        } catch (CommException e) {
            parked = true;
            config.setAutoRead(false);
            if (peer < 0) {
                // a connection that never said a valid hello (a port scanner, a stale peer): drop it,
                // the group is not affected
                engine.mesh.rejectUnbound(this, e);
            } else {
                engine.fail(e);
            }
        } finally {
            buf.release();
        }
    }

    private void processScratch() {
        if (processing) {
            return;
        }
        processing = true;
        try {
            while (!parked && !engine.hasFailed()) {
                Incoming in = current;
                if (in != null) {
                    int n = Math.min(scratch.readableBytes(), in.total - in.filled);
                    if (n > 0) {
                        ByteBuffer dst = in.target.duplicate();
                        dst.position(in.filled).limit(in.filled + n);
                        scratch.readBytes(dst);
                        in.filled += n;
                    }
                    if (in.filled < in.total) {
                        break;
                    }
                    current = null;
                    complete(in);
                    continue;
                }
                if (scratch.readableBytes() < Frame.SIZE) {
                    break;
                }
                int start = scratch.readerIndex();
                Frame f = Frame.readFrom(scratch);
                if (f == null) {
                    throw new ProtocolException(engine.ctx(), "corrupt stream from " + who() + " (bad magic byte)");
                }
                if (!dispatch(f)) {
                    scratch.readerIndex(start);
                    park();
                    break;
                }
                if (f.creditMessages != 0 && f.isData()) {
                    onCredit(Integer.toUnsignedLong(f.creditBytes), f.creditMessages);
                }
            }
        } finally {
            processing = false;
        }
    }

    /** Handles a header; false when it cannot be handled now (the link parks). */
    private boolean dispatch(Frame f) {
        if (f.payload < 0) {
            throw new ProtocolException(engine.ctx(), who() + " announced a negative payload length");
        }
        if (peer < 0 && f.kind != Frame.HELLO) {
            // an unauthenticated connection: nothing but a hello is acted on (the caller drops it)
            throw new ProtocolException(engine.ctx(), "frame kind " + f.kind + " before a hello from " + who());
        }
        switch (f.kind) {
            case Frame.DATA:
            case Frame.P2P:
                return dispatchData(f);
            case Frame.CREDIT:
                if (f.payload != 0) {
                    throw new ProtocolException(engine.ctx(), "malformed credit from " + who());
                }
                onCredit(f.seq, f.count);
                return true;
            case Frame.CREDIT_WANTED:
                if (f.payload != 0) {
                    throw new ProtocolException(engine.ctx(), "malformed credit request from " + who());
                }
                creditWanted = true;
                if (consumedMessages > 0) {
                    sendCredit();
                }
                return true;
            case Frame.HELLO:
                if (f.payload != 0 || helloSeen) {
                    throw new ProtocolException(engine.ctx(), "unexpected hello from " + who());
                }
                helloSeen = true;
                engine.mesh.onHello(this, f);
                return true;
            case Frame.READY:
                readySeen = true;
                return true;
            case Frame.BYE:
                byeSeen = true;
                return true;
            case Frame.RING:
                if (peer < 0 || f.payload == 0 || f.payload > MAX_CONTROL_PAYLOAD || (shm != null && shm.canReceive())) {
                    throw new ProtocolException(engine.ctx(), "malformed or repeated ring offer from " + who());
                }
                begin(new Incoming(f, null, null, Frame.RING, ByteBuffer.allocate(f.payload)));
                return true;
            case Frame.RING_ACK:
                if (peer < 0 || f.payload != 0 || shm == null || shm.offered == null) {
                    throw new ProtocolException(engine.ctx(), "unexpected ring answer from " + who());
                }
                engine.shm.onRingAnswer(this, f.count == 1);
                return true;
            case Frame.ABORT:
                if (f.payload > MAX_CONTROL_PAYLOAD) {
                    throw new ProtocolException(engine.ctx(), "oversized abort frame from " + who());
                }
                begin(new Incoming(f, null, null, Frame.ABORT, ByteBuffer.allocate(f.payload)));
                return true;
            default:
                throw new ProtocolException(engine.ctx(), "unknown frame kind " + f.kind + " from " + who());
        }
    }

    private boolean dispatchData(Frame f) {
        Recv r = null;
        if (f.kind == Frame.DATA) {
            r = collectiveRecvs.peekFirst();
            if (r != null) {
                String diff = Frame.difference(r.expect, f, r.variable());
                if (diff != null) {
                    throw engine.mismatch(this, r.expect, f, diff);
                }
                collectiveRecvs.pollFirst();
            }
        } else {
            for (int i = 0; i < p2pRecvs.size(); i++) {
                Recv x = p2pRecvs.get(i);
                if (x.expect.root == f.root) {
                    String diff = Frame.difference(x.expect, f, x.variable());
                    if (diff != null) {
                        throw engine.mismatch(this, x.expect, f, diff);
                    }
                    r = p2pRecvs.remove(i);
                    break;
                }
            }
        }
        if (r != null) {
            deferredSince = 0;
            if (r.variable()) {
                checkVariable(r, f);
            }
            consumed(f);
            if ((f.flags & Frame.FLAG_SHM) != 0) {
                requireShm(f).expect(f, r, null);
                return true;
            }
            ByteBuffer target;
            switch (r.mode) {
                case Recv.INTO:
                    target = r.dest;
                    break;
                case Recv.REDUCE:
                    target = staging(f.payload);
                    break;
                default:
                    target = ByteBuffer.allocate(f.payload);
                    break;
            }
            begin(new Incoming(f, r, null, 0, target));
            return true;
        }
        // nobody waits for it yet. A collective payload in shared memory stays in the ring until its
        // receive is posted (the ring is FIFO per sender, and everything this rank needs from that
        // sender before a later collective was sent before it); a large point-to-point one waits a little
        // for its receive (DEFER_P2P_MIN); anything else is buffered, within the budget
        boolean viaShm = (f.flags & Frame.FLAG_SHM) != 0;
        if (f.kind == Frame.P2P && f.payload >= DEFER_P2P_MIN && collectiveRecvs.isEmpty()
                && p2pRecvs.isEmpty() && !sendingToPeer() && engine.callerDriving()) {
            long now = System.nanoTime();
            if (deferredSince == 0) {
                deferredSince = now;
            }
            if (now - deferredSince < DEFER_MAX_NANOS) {
                return false; // left in the socket (and ring): parked until a receive is posted or the deferral ends
            }
        }
        deferredSince = 0;
        boolean lazy = viaShm && f.kind == Frame.DATA;
        if (!lazy && !engine.early.reserve(f.payload)) {
            return false;
        }
        Early e = new Early(f);
        e.lazy = lazy;
        early.addLast(e);
        if (viaShm) {
            if (!lazy) {
                engine.early.allocate(e, f.payload);
            }
            requireShm(f).expect(f, null, e);
            return true;
        }
        engine.early.allocate(e, f.payload);
        begin(new Incoming(f, null, e, 0, e.data));
        return true;
    }

    /** The lowest collective number among messages buffered before their receive, or Long.MAX_VALUE. */
    long earliestEarlyCollective() {
        long min = Long.MAX_VALUE;
        for (Early e : early) {
            if (e.header.kind == Frame.DATA) {
                min = Math.min(min, e.header.seq);
            }
        }
        return min;
    }

    /** A lazily kept shared-memory message was consumed straight into the receive that claimed it. */
    void lazyDelivered(Early e) {
        early.remove(e);
        engine.early.release(e);
    }

    private ShmLink requireShm(Frame f) {
        if (shm == null || !shm.canReceive()) {
            throw new ProtocolException(engine.ctx(), who() + " sent " + f.describe()
                    + " through shared memory, but no shared-memory ring exists from it");
        }
        return shm;
    }

    private ByteBuffer staging(int bytes) {
        if (staging == null || staging.capacity() < bytes) {
            staging = ByteBuffer.allocateDirect(Math.max(bytes, 64 << 10));
        }
        return staging.duplicate().position(0).limit(bytes).slice();
    }

    private void begin(Incoming in) {
        if (in.total == 0) {
            complete(in);
            return;
        }
        current = in;
    }

    /** A payload is complete: apply it. */
    void complete(Incoming in) {
        if (in.recv != null) {
            Recv r = in.recv;
            switch (r.mode) {
                case Recv.INTO:
                    r.finish();
                    break;
                case Recv.REDUCE:
                    r.applyReduce(in.target);
                    r.finish();
                    break;
                default:
                    r.bytes = in.target.array();
                    r.finish();
                    break;
            }
        } else if (in.early != null) {
            earlyComplete(in.early);
        } else if (in.control == Frame.RING) {
            engine.shm.onRingOffer(this, new String(in.target.array(), java.nio.charset.StandardCharsets.UTF_8));
        } else if (in.control == Frame.ABORT) {
            abortSeen = true;
            byte[] reason = in.target.array();
            engine.onAbort(this, in.header.op, new String(reason, java.nio.charset.StandardCharsets.UTF_8));
        }
    }

    /** An early message's payload is complete (called for socket and shared-memory payloads). */
    void earlyComplete(Early e) {
        e.complete = true;
        if (e.claimedBy != null) {
            deliverEarly(e);
        }
    }

    // ------------------------------------------------------------------ RecvByteBufAllocator

    @SuppressWarnings("deprecation") // channels still ask for a Handle; this one is an ExtendedHandle
    @Override
    public Handle newHandle() {
        return this;
    }

    @Override
    public ByteBuf allocate(ByteBufAllocator alloc) {
        Incoming in = current;
        if (direct != null && directFor != in) {
            // the payload it was made for completed through the scratch buffer
            direct.release();
            direct = null;
            directFor = null;
        }
        if (in != null && scratch.readableBytes() == 0 && in.target.isDirect()
                && (direct != null || in.total - in.filled >= DIRECT_READ_MIN)) {
            if (direct == null) {
                ByteBuffer region = in.target.duplicate();
                region.position(in.filled).limit(in.total);
                direct = Unpooled.wrappedBuffer(region).clear();
                directFor = in;
                directBase = in.filled;
            }
            attempted = direct.writableBytes();
            return direct.retain();
        }
        scratch.discardReadBytes();
        attempted = scratch.writableBytes();
        return scratch.retain();
    }

    @Override
    public int guess() {
        return SCRATCH_BYTES;
    }

    @Override
    public void reset(ChannelConfig cfg) {
        reads = 0;
        lastRead = 0;
    }

    @Override
    public void incMessagesRead(int numMessages) {
        reads += numMessages;
    }

    @Override
    public void lastBytesRead(int bytes) {
        lastRead = bytes;
    }

    @Override
    public int lastBytesRead() {
        return lastRead;
    }

    @Override
    public void attemptedBytesRead(int bytes) {
        attempted = bytes;
    }

    @Override
    public int attemptedBytesRead() {
        return attempted;
    }

    @Override
    public boolean continueReading() {
        return continueReading(() -> lastRead == attempted);
    }

    @Override
    public boolean continueReading(UncheckedBooleanSupplier maybeMoreDataSupplier) {
        return config.isAutoRead() && !parked && reads < MAX_READS_PER_EVENT && maybeMoreDataSupplier.get();
    }

    @Override
    public void readComplete() {
        // nothing to adapt: buffer sizes follow the frames
    }

    // ------------------------------------------------------------------ diagnostics

    /** Pending receive descriptions, for timeout messages. */
    String pendingDescription() {
        StringBuilder sb = new StringBuilder();
        Iterator<Recv> it = collectiveRecvs.iterator();
        if (it.hasNext()) {
            sb.append("waiting for ").append(it.next().expect.describe()).append(" from rank ").append(peer);
        }
        if (!p2pRecvs.isEmpty()) {
            sb.append(sb.length() > 0 ? "; " : "").append("waiting for ").append(p2pRecvs.get(0).expect.describe())
                    .append(" from rank ").append(peer);
        }
        if (mailbox != null) {
            String m = mailbox.pendingDescription();
            if (!m.isEmpty()) {
                sb.append(sb.length() > 0 ? "; " : "").append(m);
            }
        }
        if (current != null) {
            sb.append(sb.length() > 0 ? "; " : "").append("receiving ").append(current.filled).append('/')
                    .append(current.total).append(" bytes from rank ").append(peer);
        }
        if (!held.isEmpty()) {
            sb.append(sb.length() > 0 ? "; " : "").append(held.size()).append(" message(s) (").append(heldBytes)
                    .append(" bytes) wait for credit from rank ").append(peer).append(", which has not consumed the ")
                    .append(inFlightMessages).append(" messages (").append(inFlight).append(" bytes) sent to it (budget ")
                    .append(engine.cfg.sendBudgetMessages).append(" messages, ").append(engine.cfg.sendBudgetBytes)
                    .append(" bytes: options ").append(TcpOptions.SEND_BUDGET_MESSAGES).append(", ")
                    .append(TcpOptions.SEND_BUDGET_BYTES).append(") for ")
                    .append(String.format(java.util.Locale.ROOT, "%.1f", (System.nanoTime() - heldSince) / 1e9))
                    .append(" s: the peer is slower than this rank, or stuck");
        }
        return sb.toString();
    }
}
