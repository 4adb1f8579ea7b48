package io.jcomm.cpu.store.internal;

import io.jcomm.runtime.TokenProof;
import io.netty.buffer.ByteBuf;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelInboundHandlerAdapter;
import io.netty.handler.codec.ByteToMessageDecoder;
import java.io.IOException;
import java.net.SocketAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.ScheduledFuture;

/**
 * One server connection: an incremental decoder (a state machine over the receive buffer) and the
 * command executor, in one handler so that a request is executed straight from the receive buffer
 * without intermediate message objects.
 *
 * <h2>Decoding</h2>
 * Phases: {@code AUTH_HELLO -> AUTH_PROOF} (only with a job token), {@code DETECT} (VALIDATE means
 * 2.2+ numbering, anything else legacy numbering), {@code COMMANDS}. A command is scanned field by
 * field; the scan position survives across reads, so a large request arriving in pieces is never
 * rescanned. Every length and count is checked against the limits as soon as its 8 bytes are in,
 * before any byte of the field is awaited, and nothing is ever allocated from a declared length: the
 * receive buffer grows only with bytes actually received, and a field is copied out only when the
 * whole request is buffered. Any violation closes this connection only, with a logged reason.
 *
 * <h2>Waits</h2>
 * A WAIT whose keys are missing stays pending on the connection. What happens to a command that
 * arrives meanwhile: CANCEL_WAIT cancels the wait (reply WAIT_CANCELED, as torch 2.1+); on a legacy
 * connection of a torch client any other command drops the wait first (torch 1.13's client sends no
 * cancel after a client-side timeout, so a late STOP_WAITING would desynchronise it); otherwise
 * (2.2+ numbering, or a jcomm client) later commands are held in order until the wait completes,
 * which lets a jcomm client pipeline WAIT and GET in one round trip.
 *
 * <p>Replies of one read batch are gathered in one buffer and flushed at the end of the batch. The
 * connection stops reading while its outbound buffer is over the high-water mark, so a client that
 * pipelines requests without reading replies cannot make the server buffer without bound.
 *
 * <h2>Stuck and pending connections</h2>
 * A connection is <em>pending</em> from its accept until its first complete request (with a job
 * token, that comes after authentication). Pending connections that sent part of a request are
 * bounded by {@code maxPendingConnections} (the oldest gives way); silent ones only by
 * {@code maxOpenConnections}, the bound on every connection (descriptor pressure: the oldest partial
 * one gives way, else the oldest silent one; see {@link ServerContext#admit}); established ones
 * optionally by {@code maxConnections}. A connection that leaves an incomplete request in its buffer (not bytes
 * held behind a pending WAIT) for longer than {@code incompleteRequestTimeout} is closed: the time is
 * taken once when a read ends inside a frame, and one timer per connection checks it, re-armed only
 * when it fires, so reading costs nothing extra per byte or per request.
 *
 * <h2>Member liveness (jcomm extension)</h2>
 * A probed connection may declare itself rank R of job J ({@link Wire#MEMBER_KEY}). If it then ends
 * without a goodbye ({@link Wire#GOODBYE_KEY}, processed in order or found at the end of the
 * unprocessed input) and without the server having closed it, R is recorded as dead in J
 * ({@link Members}): every pending WAIT of J's declared connections, and every later one whose keys
 * are missing, is answered {@link Wire#WAIT_MEMBER_FAILED} and R, and that connection is closed.
 * Undeclared and torch connections never see the reply.
 */
public final class ServerConnection extends ChannelInboundHandlerAdapter
        implements StoreEngine.WaitListener, StoreEngine.WatchListener {

    private enum Phase { AUTH_HELLO, AUTH_PROOF, DETECT, COMMANDS, CLOSED }

    private static final int F_DONE = 0;
    private static final int F_KEY = 1;
    private static final int F_VALUE = 2;
    private static final int F_I64 = 3;
    private static final int F_U32 = 4;
    private static final int F_COUNT = 5;

    /** Replies gathered beyond this are written out before decoding more. */
    private static final int BATCH_LIMIT = 256 * 1024;

    private final ServerContext sc;
    private final StoreEngine engine;
    private final Key probe;
    private final long id;
    private ChannelHandlerContext ctx;
    private String remote = "?";
    private ByteBuf acc;
    private ByteBuf batch;
    private Phase phase;
    private Numbering numbering;
    private boolean legacyAuto;
    private boolean jcomm;
    private boolean authenticated;
    private String dialect = "undetected";
    private StoreEngine.WaitRecord pendingWait;
    private boolean readPaused;
    private boolean resumeScheduled;
    private long commands;
    private String closeReason;
    private boolean faulted;
    private byte[] clientNonce;
    private byte[] serverNonce;
    private ScheduledFuture<?> handshakeTimer;
    private List<Key> watched;

    // pending-connection list (ServerContext) and connection limits
    ServerConnection pendingPrev;
    ServerConnection pendingNext;
    ServerContext.PendingList pendingList;
    private boolean admitted;
    private boolean established;
    private long openedNanos;

    // incomplete-request limit: since when the buffer ends inside a frame; one lazily re-armed timer
    private boolean incomplete;
    private long incompleteSince;
    private ScheduledFuture<?> incompleteTimer;
    private final Runnable incompleteCheck = this::checkIncomplete;

    // member liveness
    private Members.Job job;
    private int memberRank = -1;
    private boolean goodbye;
    private boolean closedByServer;

    // request id of the next command (a change of a reconnecting jcomm client)
    private boolean reqTagged;
    private long reqHi;
    private long reqLo;
    private long reqSeq;

    // scanner state of the command being received
    private Op op;
    private boolean ambiguous8;
    private int pos;
    private long field;
    private long count;
    private long pendingLen = -1;

    public ServerConnection(ServerContext sc) {
        this.sc = sc;
        this.engine = sc.engine;
        this.probe = sc.probe;
        this.id = sc.nextConnectionId();
    }

    /** Human-readable dialect of this connection, e.g. {@code torch-2.2+}. */
    public String dialect() {
        return dialect;
    }

    // ------------------------------------------------------------------ lifecycle

    @Override
    public void channelActive(ChannelHandlerContext ctx) {
        this.ctx = ctx;
        SocketAddress ra = ctx.channel().remoteAddress();
        remote = ra == null ? "?" : ra.toString();
        ServerStats st = sc.stats;
        st.connectionsOpened++;
        st.connectionsOpen++;
        openedNanos = System.nanoTime();
        sc.info(sc.name + ": open #" + id + " " + remote);
        if (!sc.admit(this)) { // may close the oldest pending connection first
            phase = Phase.DETECT;
            fail("refused: maxOpenConnections " + sc.maxOpenConnections + " connections are open and all of them "
                    + "are established");
            return;
        }
        admitted = true;
        if (sc.token != null) {
            phase = Phase.AUTH_HELLO;
            handshakeTimer = ctx.executor().schedule(() -> {
                if (!authenticated) {
                    fail("no authentication within " + TimeUnit.NANOSECONDS.toMillis(sc.handshakeTimeoutNanos) + " ms");
                }
            }, sc.handshakeTimeoutNanos, TimeUnit.NANOSECONDS);
        } else {
            phase = Phase.DETECT;
        }
    }

    @Override
    public void channelInactive(ChannelHandlerContext ctx) {
        phase = Phase.CLOSED;
        releaseSlot();
        if (established) {
            established = false;
            sc.established--;
        }
        if (incompleteTimer != null) {
            incompleteTimer.cancel(false);
            incompleteTimer = null;
        }
        if (job != null) {
            memberLeft();
        }
        if (pendingWait != null) {
            engine.cancelWait(pendingWait);
            pendingWait = null;
        }
        if (watched != null) {
            for (Key k : watched) {
                engine.unwatch(k, this);
            }
            watched = null;
        }
        if (handshakeTimer != null) {
            handshakeTimer.cancel(false);
        }
        if (acc != null) {
            acc.release();
            acc = null;
        }
        if (batch != null) {
            batch.release();
            batch = null;
        }
        sc.stats.connectionsOpen--;
        String line = sc.name + ": close #" + id + " " + remote + " dialect=" + dialect + " commands=" + commands
                + (memberRank >= 0 ? " member=rank " + memberRank + (goodbye ? " (goodbye)" : "") : "")
                + " reason=" + (closeReason == null ? "closed by client" : closeReason);
        if (faulted) {
            sc.warnRateLimited(line);
        } else {
            sc.info(line);
        }
    }

    @Override
    public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
        if (cause instanceof IOException) {
            if (closeReason == null) {
                closeReason = "I/O error: " + cause.getMessage();
            }
            phase = Phase.CLOSED;
            ctx.close();
        } else {
            ServerContext.LOG.warn("{}: #{} unexpected error", sc.name, id, cause);
            fail("internal error: " + cause);
        }
    }

    @Override
    public void channelRead(ChannelHandlerContext ctx, Object msg) {
        ByteBuf in = (ByteBuf) msg;
        if (phase == Phase.CLOSED) {
            in.release();
            return;
        }
        if (!established) {
            sc.pendingSpoke(this);
        }
        acc = acc == null ? in : ByteToMessageDecoder.MERGE_CUMULATOR.cumulate(ctx.alloc(), acc, in);
        sc.stats.buffered(acc.readableBytes(), acc.capacity());
        process();
    }

    @Override
    public void channelReadComplete(ChannelHandlerContext ctx) {
        flushReplies();
    }

    @Override
    public void channelWritabilityChanged(ChannelHandlerContext ctx) {
        if (readPaused && ctx.channel().isWritable()) {
            readPaused = false;
            ctx.channel().config().setAutoRead(true);
            process();
            flushReplies();
        }
    }

    private void fail(String reason) {
        if (closeReason == null) {
            closeReason = reason;
        }
        if (phase == Phase.CLOSED) {
            return;
        }
        faulted = true;
        closedByServer = true;
        phase = Phase.CLOSED;
        sc.stats.connectionsFaulted++;
        flushReplies();
        ctx.close();
    }

    /** Closes this connection on the server's initiative without a fault (after a final reply). */
    private void closeByServer(String reason) {
        if (closeReason == null) {
            closeReason = reason;
        }
        if (phase == Phase.CLOSED) {
            return;
        }
        closedByServer = true;
        phase = Phase.CLOSED;
        flushReplies();
        ctx.close();
    }

    /** Closed by {@link ServerContext} to make room: this was the oldest pending connection of its kind. */
    void evict(String why, boolean silent) {
        if (phase == Phase.CLOSED) {
            return;
        }
        releaseSlot(); // now: the channel becomes inactive only later, in another task of the event loop
        sc.stats.pendingEvicted++;
        fail("closed to make room (" + why + ") as the oldest " + (silent ? "silent connection" : "connection holding "
                + "part of a request") + ", open for " + TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - openedNanos)
                + " ms");
    }

    /** Gives this connection's place among the open ones back ({@link ServerContext#closed}); idempotent. */
    private void releaseSlot() {
        if (admitted) {
            admitted = false;
            sc.closed(this);
        }
    }

    /** The first complete request: the connection leaves the pending list and counts as established. */
    private void establish() {
        sc.unlinkPending(this);
        if (sc.established >= sc.maxConnections) {
            throw new StoreFault("too many connections (maxConnections " + sc.maxConnections + ")");
        }
        sc.established++;
        established = true;
    }

    // ------------------------------------------------------------------ incomplete requests

    /** After decoding: notes when the buffer starts to end inside a frame, and arms the timer once. */
    private void trackIncomplete() {
        if (phase == Phase.CLOSED || acc == null || pendingWait != null || readPaused) {
            incomplete = false; // nothing buffered, or bytes held behind a WAIT / by backpressure
            return;
        }
        if (!incomplete) {
            incomplete = true;
            incompleteSince = System.nanoTime();
            if (incompleteTimer == null) {
                incompleteTimer = ctx.executor().schedule(incompleteCheck, sc.incompleteRequestTimeoutNanos,
                        TimeUnit.NANOSECONDS);
            }
        }
    }

    private void checkIncomplete() {
        incompleteTimer = null;
        if (phase == Phase.CLOSED || !incomplete) {
            return;
        }
        long held = System.nanoTime() - incompleteSince;
        long left = sc.incompleteRequestTimeoutNanos - held;
        if (left > 0) {
            incompleteTimer = ctx.executor().schedule(incompleteCheck, left, TimeUnit.NANOSECONDS);
            return;
        }
        sc.stats.incompleteDropped++;
        fail("incomplete request held for " + TimeUnit.NANOSECONDS.toMillis(held) + " ms (incompleteRequestTimeout "
                + TimeUnit.NANOSECONDS.toMillis(sc.incompleteRequestTimeoutNanos) + " ms, " + acc.readableBytes()
                + " bytes buffered, phase " + phase + ")");
    }

    // ------------------------------------------------------------------ replies

    private ByteBuf reply(int bytes) {
        if (batch == null) {
            batch = ctx.alloc().ioBuffer(Math.max(256, bytes));
        } else {
            batch.ensureWritable(bytes);
        }
        return batch;
    }

    private void flushReplies() {
        if (batch != null) {
            ByteBuf b = batch;
            batch = null;
            ctx.writeAndFlush(b, ctx.voidPromise());
        }
    }

    private void replyU8(int v) {
        reply(1).writeByte(v);
    }

    private void replyI64(long v) {
        reply(8).writeLongLE(v);
    }

    private void replyBytes(byte[] v) {
        reply(8 + v.length).writeLongLE(v.length).writeBytes(v);
    }

    // ------------------------------------------------------------------ decoding loop

    private void process() {
        try {
            while (phase != Phase.CLOSED && !readPaused && acc != null && acc.isReadable()) {
                boolean progress;
                switch (phase) {
                    case AUTH_HELLO:
                        progress = authHello();
                        break;
                    case AUTH_PROOF:
                        progress = authProof();
                        break;
                    case DETECT:
                        progress = detect();
                        break;
                    case COMMANDS:
                        progress = command();
                        break;
                    default:
                        progress = false;
                }
                if (!progress) {
                    break;
                }
                if (batch != null && batch.readableBytes() >= BATCH_LIMIT) {
                    flushReplies();
                    if (!ctx.channel().isWritable()) {
                        readPaused = true;
                        ctx.channel().config().setAutoRead(false);
                    }
                }
            }
        } catch (StoreFault f) {
            fail(f.getMessage());
        } catch (RuntimeException e) {
            ServerContext.LOG.warn("{}: #{} internal error while serving {}", sc.name, id, remote, e);
            fail("internal error: " + e);
        }
        if (acc != null) {
            if (!acc.isReadable()) {
                acc.release();
                acc = null;
            } else if (acc.readerIndex() > 64 * 1024) {
                acc.discardSomeReadBytes();
            }
        }
        trackIncomplete();
    }

    private boolean authHello() {
        int r = acc.readerIndex();
        if (acc.getUnsignedByte(r) != Wire.AUTH_MARKER) {
            refuse(Wire.AUTH_REQUIRED, "refused: no job-token handshake (the server requires a token)");
            return false;
        }
        if (acc.readableBytes() < Wire.AUTH_HELLO_BYTES) {
            return false;
        }
        for (int i = 0; i < Wire.AUTH_MAGIC.length; i++) {
            if (acc.getByte(r + 1 + i) != Wire.AUTH_MAGIC[i]) {
                refuse(Wire.AUTH_REFUSED, "refused: bad job-token handshake magic");
                return false;
            }
        }
        clientNonce = new byte[Wire.NONCE_BYTES];
        acc.getBytes(r + 5, clientNonce);
        acc.skipBytes(Wire.AUTH_HELLO_BYTES);
        serverNonce = TokenProof.nonce(sc.random);
        reply(2 + Wire.NONCE_BYTES + Wire.MAC_BYTES).writeByte(Wire.AUTH_MARKER).writeByte(Wire.AUTH_CHALLENGE)
                .writeBytes(serverNonce).writeBytes(Wire.serverProof(sc.token, clientNonce, serverNonce));
        phase = Phase.AUTH_PROOF;
        return true;
    }

    private boolean authProof() {
        if (acc.readableBytes() < Wire.MAC_BYTES) {
            return false;
        }
        byte[] proof = new byte[Wire.MAC_BYTES];
        acc.readBytes(proof);
        if (!TokenProof.matches(proof, Wire.clientProof(sc.token, clientNonce, serverNonce))) {
            refuse(Wire.AUTH_REFUSED, "refused: wrong job token");
            return false;
        }
        replyU8(Wire.AUTH_OK);
        authenticated = true;
        jcomm = true;
        if (handshakeTimer != null) {
            handshakeTimer.cancel(false);
            handshakeTimer = null;
        }
        dialect = "authenticated";
        phase = Phase.DETECT;
        return true;
    }

    private void refuse(int status, String reason) {
        reply(2).writeByte(Wire.AUTH_MARKER).writeByte(status);
        fail(reason);
    }

    private boolean detect() {
        int r = acc.readerIndex();
        int b0 = acc.getUnsignedByte(r);
        if (b0 == 0) {
            if (acc.readableBytes() < 5) {
                return false;
            }
            if (acc.getIntLE(r + 1) == Wire.VALIDATION_MAGIC) {
                establish();
                acc.skipBytes(5);
                numbering = Numbering.TORCH_2_2;
                dialect = jcomm ? "jcomm/2.2+" : "torch-2.2+";
                phase = Phase.COMMANDS;
                return true;
            }
        } else if (b0 == Wire.AUTH_MARKER && sc.token == null) {
            refuse(Wire.AUTH_NOT_CONFIGURED, "refused: client offered a job token but the server has none");
            return false;
        }
        switch (sc.legacyPolicy) {
            case TORCH_2_1:
                numbering = Numbering.TORCH_2_1;
                dialect = "torch-2.1";
                break;
            case TORCH_1_13:
                numbering = Numbering.TORCH_1_13;
                dialect = "torch-1.13";
                break;
            default:
                numbering = Numbering.TORCH_1_13;
                legacyAuto = true;
                dialect = "torch-legacy";
        }
        if (jcomm) {
            dialect = "jcomm/" + dialect;
        }
        phase = Phase.COMMANDS;
        return true;
    }

    private void pinLegacy21() {
        legacyAuto = false;
        numbering = Numbering.TORCH_2_1;
        dialect = jcomm ? "jcomm/2.1" : "torch-2.1";
    }

    /** Decodes a command byte; resolves the legacy ambiguity (see TcpStoreServerConfig.LegacyMode). */
    private Op decodeOp(int code) {
        if (legacyAuto) {
            if (code >= 9 && code <= 11) {
                pinLegacy21();
            } else if (code == 7) {
                if (commands == 0 || watched != null) {
                    return Op.WATCH_KEY;
                }
                pinLegacy21();
            } else if (code == 8) {
                ambiguous8 = true;
                return Op.DELETE_KEY;
            }
        }
        return numbering.decode(code);
    }

    private boolean command() {
        if (op == null) {
            int code = acc.getUnsignedByte(acc.readerIndex());
            Op o = decodeOp(code);
            if (o == null) {
                ambiguous8 = false;
                throw new StoreFault("unknown command byte " + code + " for dialect " + dialect);
            }
            if (pendingWait != null && o != Op.CANCEL_WAIT) {
                if (!jcomm && numbering != Numbering.TORCH_2_2) {
                    // torch 1.13 client gave up waiting (it never sends a cancel): drop the wait
                    engine.cancelWait(pendingWait);
                    pendingWait = null;
                    sc.stats.droppedWaits++;
                } else {
                    ambiguous8 = false;
                    if (acc.readableBytes() > sc.maxRequestBytes) {
                        throw new StoreFault("more than maxRequestBytes sent while a WAIT is pending");
                    }
                    return false; // held until the wait completes
                }
            }
            op = o;
            pos = 1;
            field = 0;
            count = 0;
            pendingLen = -1;
        }
        int len = scan();
        if (len == 0) {
            return false;
        }
        if (!established) {
            establish();
        }
        execute(len);
        op = null;
        commands++;
        sc.stats.request(len);
        return true;
    }

    private int nextField() {
        switch (op.shape()) {
            case NONE:
                return F_DONE;
            case U32:
                return field == 0 ? F_U32 : F_DONE;
            case KEY:
                return field == 0 ? F_KEY : F_DONE;
            case KEY_VALUE:
                return field == 0 ? F_KEY : field == 1 ? F_VALUE : F_DONE;
            case KEY_VALUE_VALUE:
                return field == 0 ? F_KEY : field <= 2 ? F_VALUE : F_DONE;
            case KEY_I64:
                return field == 0 ? F_KEY : field == 1 ? F_I64 : F_DONE;
            case KEYS:
                return field == 0 ? F_COUNT : field <= count ? F_KEY : F_DONE;
            case KEY_VALUE_PAIRS:
                return field == 0 ? F_COUNT : field <= 2 * count ? ((field & 1) == 1 ? F_KEY : F_VALUE) : F_DONE;
            default:
                throw new IllegalStateException(op.toString());
        }
    }

    /** Scans the current command; returns its length once complete and valid, 0 if more bytes are needed. */
    private int scan() {
        final int r = acc.readerIndex();
        final int avail = acc.readableBytes();
        while (true) {
            int kind = nextField();
            switch (kind) {
                case F_DONE:
                    return pos;
                case F_U32:
                    if (avail - pos < 4) {
                        return 0;
                    }
                    pos += 4;
                    field++;
                    break;
                case F_I64:
                    if (avail - pos < 8) {
                        return 0;
                    }
                    pos += 8;
                    field++;
                    break;
                case F_COUNT: {
                    if (avail - pos < 8) {
                        return 0;
                    }
                    long n = acc.getLongLE(r + pos);
                    if (n < 0 || n > sc.maxKeysPerRequest) {
                        throw new StoreFault(op + " with " + Long.toUnsignedString(n) + " keys exceeds maxKeysPerRequest "
                                + sc.maxKeysPerRequest);
                    }
                    count = n;
                    pos += 8;
                    field++;
                    break;
                }
                case F_KEY:
                case F_VALUE: {
                    if (pendingLen < 0) {
                        if (avail - pos < 8) {
                            return 0;
                        }
                        long len = acc.getLongLE(r + pos);
                        long limit = kind == F_KEY ? sc.maxKeyBytes : sc.maxValueBytes;
                        if (len < 0 || len > limit) {
                            throw new StoreFault(op + ": " + (kind == F_KEY ? "key" : "value") + " of "
                                    + Long.toUnsignedString(len) + " bytes exceeds "
                                    + (kind == F_KEY ? "maxKeyBytes " : "maxValueBytes ") + limit);
                        }
                        if (pos + 8L + len > sc.maxRequestBytes) {
                            throw new StoreFault(op + ": request exceeds maxRequestBytes " + sc.maxRequestBytes);
                        }
                        pendingLen = len;
                    }
                    if (avail - pos - 8 < pendingLen) {
                        return 0;
                    }
                    pos += 8 + (int) pendingLen;
                    pendingLen = -1;
                    field++;
                    if (ambiguous8 && kind == F_KEY) {
                        ambiguous8 = false;
                        if (avail - pos >= 8) {
                            // bytes already follow the key: torch 2.1 APPEND (a 1.13 DELETE_KEY waits for its reply)
                            op = Op.APPEND;
                            pinLegacy21();
                        } else {
                            return pos;
                        }
                    }
                    break;
                }
                default:
                    throw new IllegalStateException();
            }
        }
    }

    // ------------------------------------------------------------------ execution

    private int fieldLen(int idx) {
        return (int) acc.getLongLE(idx);
    }

    private Key keyAt(int idx) {
        return probe.load(acc, idx + 8, fieldLen(idx));
    }

    private byte[] bytesAt(int idx) {
        byte[] b = new byte[fieldLen(idx)];
        acc.getBytes(idx + 8, b);
        return b;
    }

    private void execute(int frameLen) {
        final int start = acc.readerIndex();
        int p = start + 1;
        if (reqTagged) {
            reqTagged = false;
            executeTagged(p);
        } else {
            executeOp(p);
        }
        acc.readerIndex(start + frameLen);
    }

    private static boolean isChange(Op op) {
        return op == Op.SET || op == Op.ADD || op == Op.COMPARE_SET || op == Op.DELETE_KEY || op == Op.APPEND
                || op == Op.MULTI_SET;
    }

    /**
     * A change preceded by a request id ({@link Wire#REQUEST_KEY}): answered with a status byte first;
     * a refusal (full store, full data file, ADD on a non-integer) is a reply, not a closed connection;
     * a request the engine already applied is answered as the first time, not applied again.
     */
    private void executeTagged(int p) {
        if (!isChange(op)) {
            throw new StoreFault("a request id before " + op + " (only changes take one)");
        }
        ByteBuf b = reply(1 + 8);
        int mark = b.writerIndex();
        b.writeByte(Wire.REQUEST_OK);
        long[] done = engine.appliedRequest(reqHi, reqLo, reqSeq);
        if (done != null) {
            sc.stats.retriesAnswered++;
            switch (op) {
                case ADD:
                    replyI64(done[1]);
                    break;
                case DELETE_KEY:
                    replyI64(done[1]);
                    break;
                case COMPARE_SET: {
                    int q = p + 8 + fieldLen(p);
                    q += 8 + fieldLen(q);
                    replyBytes(bytesAt(q)); // it succeeded: the value is what it desired
                    break;
                }
                default:
                    break;
            }
            return;
        }
        engine.beginRequest(reqHi, reqLo, reqSeq);
        try {
            executeOp(p);
        } catch (StoreFault f) {
            if (batch != b) {
                throw f;
            }
            b.writerIndex(mark);
            byte[] msg = f.getMessage().getBytes(java.nio.charset.StandardCharsets.UTF_8);
            int len = Math.min(msg.length, Wire.MAX_REFUSAL_BYTES);
            reply(5 + len).writeByte(Wire.REQUEST_REFUSED).writeIntLE(len).writeBytes(msg, 0, len);
            sc.stats.changesRefused++;
            sc.warnRateLimited(sc.name + ": #" + id + " " + remote + ": " + op + " refused: " + f.getMessage());
        } finally {
            engine.endRequest();
        }
    }

    private void executeOp(int p) {
        switch (op) {
            case SET: {
                Key k = keyAt(p);
                byte[] v = bytesAt(p + 8 + k.length());
                engine.set(k, v);
                break;
            }
            case GET: {
                Key k = keyAt(p);
                byte[] v = engine.get(k);
                if (v == null) {
                    throw new StoreFault("GET of missing key '" + k + "'");
                }
                replyBytes(v);
                break;
            }
            case ADD: {
                int kl = fieldLen(p);
                long delta = acc.getLongLE(p + 8 + kl);
                replyI64(engine.add(keyAt(p), delta));
                break;
            }
            case COMPARE_SET: {
                int kl = fieldLen(p);
                int q = p + 8 + kl;
                byte[] expected = bytesAt(q);
                q += 8 + expected.length;
                byte[] desired = bytesAt(q);
                replyBytes(engine.compareSet(keyAt(p), expected, desired));
                break;
            }
            case CHECK:
                executeCheck(p);
                break;
            case WAIT:
                executeWait(p);
                break;
            case GETNUMKEYS:
                replyI64(engine.size());
                break;
            case DELETE_KEY:
                replyI64(engine.delete(keyAt(p)) ? 1 : 0);
                break;
            case WATCH_KEY: {
                if (watched == null) {
                    watched = new ArrayList<>(2);
                    dialect = "torch-1.13-callback";
                }
                if (watched.size() >= sc.maxKeysPerRequest) {
                    throw new StoreFault("too many watched keys");
                }
                watched.add(engine.watch(keyAt(p), this));
                replyU8(Wire.WATCH_CALLBACK_REGISTERED);
                break;
            }
            case APPEND: {
                int kl = fieldLen(p);
                byte[] v = bytesAt(p + 8 + kl);
                engine.append(keyAt(p), v);
                break;
            }
            case MULTI_GET: {
                long n = acc.getLongLE(p);
                p += 8;
                for (long i = 0; i < n; i++) {
                    Key k = keyAt(p);
                    p += 8 + k.length();
                    byte[] v = engine.get(k);
                    if (v == null) {
                        throw new StoreFault("MULTI_GET of missing key '" + k + "'");
                    }
                    replyBytes(v);
                }
                break;
            }
            case MULTI_SET: {
                int n = (int) acc.getLongLE(p);
                p += 8;
                List<Key> keys = new ArrayList<>(n);
                List<byte[]> values = new ArrayList<>(n);
                for (int i = 0; i < n; i++) {
                    int kl = fieldLen(p);
                    byte[] v = bytesAt(p + 8 + kl);
                    keys.add(keyAt(p).copy());
                    values.add(v);
                    p += 16 + kl + v.length;
                }
                engine.multiSet(keys, values);
                break;
            }
            case CANCEL_WAIT:
                if (pendingWait != null) {
                    engine.cancelWait(pendingWait);
                    pendingWait = null;
                }
                replyU8(Wire.WAIT_CANCELED);
                break;
            case VALIDATE: {
                int magic = acc.getIntLE(p);
                if (magic != Wire.VALIDATION_MAGIC) {
                    throw new StoreFault("VALIDATE with wrong magic 0x" + Integer.toHexString(magic));
                }
                break;
            }
            case PING:
                if (!dialect.endsWith("2.5+")) {
                    dialect = jcomm ? "jcomm/2.5+" : "torch-2.5+";
                }
                reply(4).writeIntLE(acc.getIntLE(p));
                break;
            default:
                throw new StoreFault("unsupported command " + op);
        }
    }

    private void executeCheck(int p) {
        long n = acc.getLongLE(p);
        int q = p + 8;
        if (n == 1 && fieldLen(q) == Wire.PROBE_KEY.length && keyAt(q).contentEquals(Wire.PROBE_KEY)) {
            // jcomm capability probe
            jcomm = true;
            if (numbering != Numbering.TORCH_2_2) {
                pinLegacy21();
            } else {
                dialect = dialect.startsWith("jcomm") ? dialect : "jcomm/2.2+";
            }
            replyU8(Wire.CHECK_READY);
            return;
        }
        if (jcomm) {
            if (n == 3 && keyIs(q, Wire.MEMBER_KEY)) {
                declareMember(q + 8 + Wire.MEMBER_KEY.length);
                return;
            }
            if (n == 1 && keyIs(q, Wire.GOODBYE_KEY)) {
                goodbye = true; // no reply: the client closes next
                return;
            }
            if (n == 1 && keyIs(q, Wire.DURABLE_KEY)) {
                // request ids are keys of a CHECK: without room for them the server offers none
                replyU8(sc.maxKeyBytes < Wire.REQUEST_ID_BYTES ? Wire.CHECK_NOT_READY
                        : engine.log() != null ? Wire.CHECK_READY : Wire.DURABLE_NO);
                return;
            }
            if (n == 2 && keyIs(q, Wire.REQUEST_KEY)) {
                int r = q + 8 + Wire.REQUEST_KEY.length;
                if (fieldLen(r) != Wire.REQUEST_ID_BYTES) {
                    throw new StoreFault("a request id of " + fieldLen(r) + " bytes (" + Wire.REQUEST_ID_BYTES
                            + " expected)");
                }
                reqTagged = true;
                reqHi = acc.getLongLE(r + 8);
                reqLo = acc.getLongLE(r + 16);
                reqSeq = acc.getLongLE(r + 24);
                return; // no reply: the change that follows carries the status
            }
            if (n == 1 && keyIs(q, Wire.DEAD_KEY)) {
                int[] dead = job == null ? new int[0] : job.deadRanks();
                ByteBuf r = reply(4 + 4 * dead.length).writeIntLE(dead.length);
                for (int d : dead) {
                    r.writeIntLE(d);
                }
                return;
            }
        }
        boolean all = true;
        for (long i = 0; i < n; i++) {
            Key k = keyAt(q);
            q += 8 + k.length();
            if (!engine.contains(k)) {
                all = false;
                break;
            }
        }
        replyU8(all ? Wire.CHECK_READY : Wire.CHECK_NOT_READY);
    }

    private boolean keyIs(int idx, byte[] key) {
        return fieldLen(idx) == key.length && keyAt(idx).contentEquals(key);
    }

    /** A member declaration: job id and rank follow the member key at {@code q}. */
    private void declareMember(int q) {
        int jobLen = fieldLen(q);
        String jobId = Members.decodeJobId(bytesAt(q));
        if (jobId == null) {
            throw new StoreFault("member declaration with an invalid job id of " + jobLen + " bytes (1 to "
                    + io.jcomm.api.DistributedConfig.MAX_JOB_ID_BYTES + " bytes of UTF-8, no control characters)");
        }
        int r = q + 8 + jobLen;
        if (fieldLen(r) != Wire.MEMBER_RANK_BYTES) {
            throw new StoreFault("member declaration with a rank field of " + fieldLen(r) + " bytes ("
                    + Wire.MEMBER_RANK_BYTES + " expected)");
        }
        int rank = acc.getIntLE(r + 8);
        if (rank < 0) {
            throw new StoreFault("member declaration with rank " + Integer.toUnsignedString(rank)
                    + " (at most " + Integer.MAX_VALUE + ")");
        }
        if (job != null) {
            throw new StoreFault("a second member declaration on one connection (already rank " + memberRank
                    + " of job " + job.id + ")");
        }
        job = sc.members.declare(jobId, this);
        memberRank = rank;
        replyU8(Wire.CHECK_READY);
    }

    /** This declared connection ended: a death unless it said goodbye or the server closed it. */
    private void memberLeft() {
        Members.Job j = job;
        job = null;
        boolean died = !goodbye && !closedByServer && !sc.shuttingDown && !endsWithGoodbye();
        List<ServerConnection> waiting = sc.members.left(j, this, memberRank, died);
        if (!died) {
            return;
        }
        sc.stats.memberDeaths++;
        sc.warnRateLimited(sc.name + ": rank " + memberRank + " of job " + j.id + " left the store without a goodbye (#"
                + id + " " + remote + ", " + (closeReason == null ? "closed by client" : closeReason) + "); the pending "
                + "and later WAITs of the job's " + waiting.size() + " other declared connection(s) fail, naming rank "
                + j.deadRank + " (the job's first dead rank)");
        for (ServerConnection c : waiting) {
            c.memberFailed(j);
        }
    }

    private static final byte[] GOODBYE_21 = Wire.goodbyeFrame(Numbering.TORCH_2_1);
    private static final byte[] GOODBYE_22 = Wire.goodbyeFrame(Numbering.TORCH_2_2);

    /** Whether the unprocessed input ends with a goodbye (one held behind a pending WAIT). */
    private boolean endsWithGoodbye() {
        if (acc == null || numbering == null) {
            return false;
        }
        byte[] g = numbering == Numbering.TORCH_2_2 ? GOODBYE_22 : GOODBYE_21;
        int n = acc.readableBytes();
        if (n < g.length) {
            return false;
        }
        byte[] tail = new byte[g.length];
        acc.getBytes(acc.writerIndex() - g.length, tail);
        return Arrays.equals(tail, g);
    }

    /** A rank of this connection's job died: a pending WAIT is answered with the failure. */
    void memberFailed(Members.Job j) {
        if (phase == Phase.CLOSED || pendingWait == null) {
            return;
        }
        engine.cancelWait(pendingWait);
        pendingWait = null;
        sendMemberFailure(j);
    }

    private void sendMemberFailure(Members.Job j) {
        sc.stats.memberFailuresSent++;
        reply(5).writeByte(Wire.WAIT_MEMBER_FAILED).writeIntLE(j.deadRank);
        // commands may be held behind the WAIT (a pipelined GET): the connection cannot go on
        closeByServer("told the WAIT that rank " + j.deadRank + " of job " + j.id + " left without a goodbye");
    }

    private void executeWait(int p) {
        long n = acc.getLongLE(p);
        int q = p + 8;
        boolean all = true;
        for (long i = 0; i < n; i++) {
            Key k = keyAt(q);
            q += 8 + k.length();
            if (!engine.contains(k)) {
                all = false;
                break;
            }
        }
        if (all) {
            replyU8(Wire.WAIT_STOP_WAITING);
            return;
        }
        if (job != null && job.deadRank >= 0) {
            sendMemberFailure(job);
            return;
        }
        StoreEngine.WaitRecord rec = engine.beginWait(this);
        q = p + 8;
        for (long i = 0; i < n; i++) {
            Key k = keyAt(q);
            q += 8 + k.length();
            engine.waitFor(rec, k);
        }
        if (engine.endWaitRegistration(rec)) {
            replyU8(Wire.WAIT_STOP_WAITING);
        } else {
            pendingWait = rec;
        }
    }

    // ------------------------------------------------------------------ engine callbacks

    @Override
    public void waitCompleted(StoreEngine.WaitRecord record) {
        if (record != pendingWait || phase == Phase.CLOSED) {
            return;
        }
        pendingWait = null;
        replyU8(Wire.WAIT_STOP_WAITING);
        flushReplies();
        if (acc != null && acc.isReadable() && !resumeScheduled) {
            resumeScheduled = true;
            ctx.executor().execute(this::resume);
        }
    }

    private void resume() {
        resumeScheduled = false;
        if (phase != Phase.CLOSED) {
            process();
            flushReplies();
        }
    }

    @Override
    public void keyChanged(int type, Key key, byte[] oldValue, byte[] newValue) {
        if (phase == Phase.CLOSED) {
            return;
        }
        ByteBuf b = reply(1 + 24 + key.length() + oldValue.length + newValue.length);
        b.writeByte(type);
        b.writeLongLE(key.length());
        key.writeTo(b);
        b.writeLongLE(oldValue.length).writeBytes(oldValue);
        b.writeLongLE(newValue.length).writeBytes(newValue);
        flushReplies();
    }
}
