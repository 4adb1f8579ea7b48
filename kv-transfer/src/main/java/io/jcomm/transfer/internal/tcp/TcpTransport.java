package io.jcomm.transfer.internal.tcp;

import io.jcomm.runtime.TokenProof;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProtocolException;
import io.jcomm.runtime.Entropy;
import io.jcomm.transfer.Notification;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import io.jcomm.transfer.TransferOptions;
import io.jcomm.transfer.TransferRefusedException;
import io.jcomm.transfer.internal.Names;
import io.jcomm.transfer.spi.PeerInfo;
import io.jcomm.transfer.spi.RegionAccess;
import io.jcomm.transfer.spi.Segment;
import io.jcomm.transfer.spi.Transport;
import io.jcomm.transfer.spi.TransportContext;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.SocketTimeoutException;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The tcp transport of one agent. Owner side: an acceptor thread and one thread per incoming stream
 * that checks each request ({@link TransportContext#acquire}) before touching memory and reads a
 * write's data straight into the registered range (stopping at the next 1 MiB step if the region is
 * revoked). Initiator side: per peer one express connection (transfers of at most
 * {@link #EXPRESS_BYTES}, notifications, heartbeats; pipelined) and {@link TransferOptions#tcpStreams()}
 * bulk connections that carry the pieces of larger transfers, at most {@link #BULK_IN_FLIGHT} unanswered
 * per connection; each connection has a sender and a receiver thread, requests matched by id. A small
 * transfer therefore never waits behind a large one's bytes, on either side, and the owner serves it
 * on a thread of its own. A reaper closes a connection whose transfer passed its deadline and sends
 * heartbeats: a peer that answered nothing for {@link TransferOptions#peerSilenceTimeout()} (a cut link, a
 * lost host, a stopped process) fails every pending transfer with a {@link PeerFailureException}, and an
 * owner closes the connections of an initiator silent that long. A broken connection (the peer died)
 * fails every transfer on it with a {@link PeerFailureException} as soon as the socket reports it.
 */
final class TcpTransport implements Transport {

    private static final int STEP = 1 << 20;
    private static final int QUEUE = 4096;
    /** Transfers of at most this many bytes (and notifications) take a stream's express lane. */
    static final long EXPRESS_BYTES = 256 << 10;
    /** Pieces of large transfers sent and not yet answered on one bulk connection. */
    static final int BULK_IN_FLIGHT = 2;
    private static final long REAPER_PERIOD_MS = 10;
    /** How often the owner looks for silent initiators, in reaper periods. */
    private static final int SESSION_CHECK_PERIODS = 10;

    private final TransportContext ctx;
    private final TransferOptions opts;
    private final String self;
    private final byte[] token;
    private final ServerSocketChannel server;
    private final byte[] endpoint;
    private final Map<String, PeerConn> conns = new ConcurrentHashMap<>();
    private final Map<String, Object> connectLocks = new ConcurrentHashMap<>();
    private final Set<Session> sessions = ConcurrentHashMap.newKeySet();
    private final long silenceNanos;
    private final AtomicLong requestIds = new AtomicLong(1);
    private final Thread acceptor;
    private final Thread reaper;
    private volatile boolean closed;

    TcpTransport(TransportContext ctx) {
        this.ctx = ctx;
        this.opts = ctx.options();
        this.self = opts.name();
        this.token = opts.token().orElse(null);
        this.silenceNanos = opts.peerSilenceTimeout().toNanos();
        try {
            server = ServerSocketChannel.open();
            server.bind(new InetSocketAddress(opts.listenHost(), opts.listenPort()), 256);
        } catch (IOException e) {
            throw new CommException(context("listen"), "cannot listen on " + opts.listenHost() + ":" + opts.listenPort() + ": " + e, e);
        }
        int port = ((InetSocketAddress) server.socket().getLocalSocketAddress()).getPort();
        endpoint = new TcpEndpoint(opts.advertiseHost(), port).encode();
        acceptor = daemon(this::acceptLoop, "jcomm-transfer-" + self + "-accept");
        reaper = daemon(this::reapLoop, "jcomm-transfer-" + self + "-reaper");
    }

    private static Thread daemon(Runnable r, String name) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    private OpContext context(String op) {
        return OpContext.of("transfer:" + self, -1, "tcp." + op);
    }

    @Override
    public String name() {
        return TcpTransportProvider.NAME;
    }

    @Override
    public byte[] endpoint() {
        return endpoint.clone();
    }

    @Override
    public boolean reaches(PeerInfo peer, RemoteDescriptor remote) {
        return peer.endpoints().containsKey(TcpTransportProvider.NAME);
    }

    @Override
    public boolean carriesNotifications() {
        return true;
    }

    // ------------------------------------------------------------------ initiator side

    /** One request in flight on a stream. */
    private static final class Op {
        final int type;
        final long id;
        final RemoteDescriptor remote;
        final long offset;
        final long length;
        final ByteBuffer local;
        final byte[] notification;
        final Deadline deadline;
        final boolean express;
        final CompletableFuture<Void> future = new CompletableFuture<>();

        Op(int type, long id, RemoteDescriptor remote, long offset, long length, ByteBuffer local, byte[] notification,
           Deadline deadline, boolean express) {
            this.express = express;
            this.type = type;
            this.id = id;
            this.remote = remote;
            this.offset = offset;
            this.length = length;
            this.local = local;
            this.notification = notification;
            this.deadline = deadline;
        }
    }

    @Override
    public CompletableFuture<Void> write(PeerInfo peer, List<Segment> segments, byte[] notification, Deadline deadline) {
        return submit(peer, segments, TcpWire.WRITE, notification, deadline);
    }

    @Override
    public CompletableFuture<Void> read(PeerInfo peer, List<Segment> segments, Deadline deadline) {
        return submit(peer, segments, TcpWire.READ, null, deadline);
    }

    @Override
    public CompletableFuture<Void> notify(PeerInfo peer, byte[] notification, Deadline deadline) {
        try {
            PeerConn c = connection(peer, deadline);
            Op op = new Op(TcpWire.NOTIFY, requestIds.getAndIncrement(), null, 0, 0, null, notification, deadline, true);
            c.express().submit(op);
            return op.future;
        } catch (CommException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    private CompletableFuture<Void> submit(PeerInfo peer, List<Segment> segments, int type, byte[] notification, Deadline deadline) {
        PeerConn c;
        try {
            c = connection(peer, deadline);
        } catch (CommException e) {
            return CompletableFuture.failedFuture(e);
        }
        int streams = c.streams.length - 1;
        long total = 0;
        for (Segment s : segments) {
            total += s.remote().length();
        }
        boolean express = total <= EXPRESS_BYTES;
        List<Op> ops = new ArrayList<>();
        for (Segment s : segments) {
            long len = s.remote().length();
            long piece = len >= (long) streams * (256 << 10) ? Math.min(opts.tcpChunkBytes(), (len + streams - 1) / streams)
                    : Math.min(len, opts.tcpChunkBytes());
            long at = 0;
            do {
                long n = Math.min(piece, len - at);
                ByteBuffer local = s.local().duplicate();
                local.position(local.position() + (int) at).limit(local.position() + (int) n);
                ops.add(new Op(type, requestIds.getAndIncrement(), s.remote(), s.remote().offset() + at, n,
                        local.slice(), null, deadline, express));
                at += n;
            } while (at < len);
        }
        boolean attach = notification != null && ops.size() == 1;
        if (attach) {
            Op o = ops.get(0);
            ops.set(0, new Op(o.type, o.id, o.remote, o.offset, o.length, o.local, notification, deadline, o.express));
        }
        CompletableFuture<?>[] fs = new CompletableFuture<?>[ops.size()];
        for (int i = 0; i < ops.size(); i++) {
            fs[i] = ops.get(i).future;
            Op op = ops.get(i);
            (op.express ? c.express() : c.bulk()).submit(op);
        }
        CompletableFuture<Void> all = fs.length == 1 ? ops.get(0).future : CompletableFuture.allOf(fs);
        if (notification == null || attach) {
            return all;
        }
        return all.thenCompose(v -> notify(peer, notification, deadline));
    }

    private PeerConn connection(PeerInfo peer, Deadline deadline) {
        if (closed) {
            throw new CommClosedException(context("connect"), "transfer agent " + self + " is closed");
        }
        PeerConn c = conns.get(peer.name());
        if (c != null && !c.broken) {
            return c;
        }
        synchronized (connectLocks.computeIfAbsent(peer.name(), k -> new Object())) {
            c = conns.get(peer.name());
            if (c != null && !c.broken) {
                return c;
            }
            byte[] ep = peer.endpoint(TcpTransportProvider.NAME).orElseThrow(() -> new PeerFailureException(context("connect"),
                    -1, "agent " + peer.name() + " has no tcp endpoint"));
            TcpEndpoint endpointOfPeer = TcpEndpoint.decode(ep, peer.name());
            String host = endpointOfPeer.host();
            int port = endpointOfPeer.port();
            Deadline d = deadline.min(Deadline.after(opts.connectTimeout()));
            Stream[] streams = new Stream[1 + opts.tcpStreams()]; // [0]: the express connection
            PeerConn conn = new PeerConn(peer.name(), streams);
            try {
                for (int i = 0; i < streams.length; i++) {
                    streams[i] = new Stream(conn, connect(peer.name(), host, port, d));
                }
            } catch (CommException e) {
                for (Stream s : streams) {
                    if (s != null) {
                        s.abort(e);
                    }
                }
                throw e;
            }
            for (Stream s : streams) {
                s.start();
            }
            conns.put(peer.name(), conn);
            return conn;
        }
    }

    private SocketChannel connect(String peer, String host, int port, Deadline d) {
        SocketChannel ch = null;
        try {
            ch = SocketChannel.open();
            ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            ch.setOption(StandardSocketOptions.SO_RCVBUF, 4 << 20);
            ch.setOption(StandardSocketOptions.SO_SNDBUF, 4 << 20);
            ch.socket().connect(new InetSocketAddress(host, port), (int) Math.max(1, d.remainingMillis()));
            ch.socket().setSoTimeout((int) Math.max(1, d.remainingMillis()));
            InputStream in = ch.socket().getInputStream();
            OutputStream out = ch.socket().getOutputStream();
            byte[] nonce = new byte[TokenProof.NONCE_BYTES];
            Entropy.nextBytes(nonce);
            byte[] me = self.getBytes(StandardCharsets.US_ASCII);
            ByteBuffer hello = ByteBuffer.allocate(8 + 2 + me.length + TokenProof.NONCE_BYTES + 1).order(ByteOrder.LITTLE_ENDIAN);
            hello.putInt(TcpWire.HELLO).putInt(TcpWire.VERSION).putShort((short) me.length).put(me).put(nonce)
                    .put((byte) (token != null ? 1 : 0));
            out.write(hello.array());
            DataInputStream din = new DataInputStream(in);
            ByteBuffer h = le(din, 10);
            int magic = h.getInt();
            int status = h.getInt();
            int nl = h.getShort() & 0xffff;
            if (magic != TcpWire.CHALLENGE || nl > TcpWire.MAX_NAME) {
                throw new ProtocolException(context("connect"), host + ":" + port + " is not a transfer agent");
            }
            byte[] sn = new byte[nl];
            din.readFully(sn);
            byte[] serverNonce = new byte[TokenProof.NONCE_BYTES];
            din.readFully(serverNonce);
            byte[] serverMac = new byte[TokenProof.PROOF_BYTES];
            din.readFully(serverMac);
            int dl = le(din, 2).getShort() & 0xffff;
            if (dl > TcpWire.MAX_DETAIL) {
                throw new ProtocolException(context("connect"), "handshake detail of " + dl + " bytes");
            }
            byte[] detail = new byte[dl];
            din.readFully(detail);
            String serverName = new String(sn, StandardCharsets.US_ASCII);
            if (status != 0) {
                throw new ProtocolException(context("connect"), "agent " + serverName + " refused " + self + ": "
                        + new String(detail, StandardCharsets.UTF_8));
            }
            if (!serverName.equals(peer)) {
                throw new ProtocolException(context("connect"), host + ":" + port + " is agent " + serverName + ", not " + peer
                        + " (a stale store record?)");
            }
            if (token != null && !TokenProof.matches(serverMac, TcpWire.proof(token, "server", nonce, serverNonce, self, serverName))) {
                throw new ProtocolException(context("connect"), "agent " + peer + " failed to prove the job token");
            }
            ByteBuffer auth = ByteBuffer.allocate(4 + TokenProof.PROOF_BYTES).order(ByteOrder.LITTLE_ENDIAN);
            auth.putInt(TcpWire.AUTH).put(TcpWire.proof(token, "client", nonce, serverNonce, self, serverName));
            out.write(auth.array());
            ByteBuffer v = le(din, 8);
            if (v.getInt() != TcpWire.VERDICT || v.getInt() != 0) {
                throw new ProtocolException(context("connect"), "agent " + peer + " refused " + self + "'s job token");
            }
            ch.socket().setSoTimeout(0);
            return ch;
        } catch (SocketTimeoutException e) {
            close(ch);
            throw new CommTimeoutException(context("connect"), "no handshake with agent " + peer + " at " + host + ":" + port
                    + " before the deadline", e);
        } catch (IOException e) {
            close(ch);
            throw new PeerFailureException(context("connect"), -1, "cannot reach agent " + peer + " at " + host + ":" + port
                    + ": " + e, e);
        } catch (CommException e) {
            close(ch);
            throw e;
        }
    }

    private static ByteBuffer le(DataInputStream in, int n) throws IOException {
        byte[] b = new byte[n];
        in.readFully(b);
        return ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static void close(java.io.Closeable c) {
        if (c != null) {
            try {
                c.close();
            } catch (IOException ignored) {
                // closing
            }
        }
    }

    /** The connections to one peer: {@code streams[0]} the express one, the others bulk. */
    private final class PeerConn {
        final String agent;
        final Stream[] streams;
        final AtomicInteger next = new AtomicInteger();
        volatile boolean broken;
        /** When the last heartbeat was sent (reaper thread only). */
        long lastPing = System.nanoTime();

        PeerConn(String agent, Stream[] streams) {
            this.agent = agent;
            this.streams = streams;
        }

        Stream express() {
            return streams[0];
        }

        Stream bulk() {
            return streams[1 + Math.floorMod(next.getAndIncrement(), streams.length - 1)];
        }

        /** When the peer last answered anything on any of the connections. */
        long lastHeard() {
            long l = streams[0].lastHeard;
            for (Stream s : streams) {
                if (s.lastHeard - l > 0) {
                    l = s.lastHeard;
                }
            }
            return l;
        }

        /** Sends a heartbeat every third of the silence timeout; fails the peer once it has been silent that long. */
        void heartbeat(long now) {
            if (now - lastHeard() > silenceNanos) {
                fail(new PeerFailureException(context("transfer"), -1, "agent " + agent + " answered nothing, not even a heartbeat, for "
                        + TimeUnit.NANOSECONDS.toMillis(now - lastHeard()) + " ms (a cut link, a lost host or a stopped process)"));
            } else if (now - lastPing > silenceNanos / 3) {
                lastPing = now;
                express().submit(new Op(TcpWire.PING, requestIds.getAndIncrement(), null, 0, 0, null, null,
                        Deadline.after(java.time.Duration.ofNanos(2 * silenceNanos)), true));
            }
        }

        void fail(CommException cause) {
            broken = true;
            conns.remove(agent, this);
            for (Stream s : streams) {
                if (s != null) {
                    s.abort(cause);
                }
            }
        }
    }

    /**
     * One connection: a sender and a receiver thread, requests matched to responses by id. Express
     * requests (transfers of at most {@link #EXPRESS_BYTES}, notifications, heartbeats) are sent as they
     * come; bulk pieces only while fewer than {@link #BULK_IN_FLIGHT} are unanswered, so that the socket
     * buffers never hold more than that many pieces of a stream. The express connection carries only
     * express requests and each bulk connection only pieces, but either kind works on any connection.
     */
    private final class Stream {
        final PeerConn conn;
        final SocketChannel ch;
        final ReentrantLock lock = new ReentrantLock();
        final Condition ready = lock.newCondition();
        final ArrayDeque<Op> express = new ArrayDeque<>();
        final ArrayDeque<Op> bulk = new ArrayDeque<>();
        /** Bulk pieces sent and not yet answered (at most {@link #BULK_IN_FLIGHT}); guarded by {@link #lock}. */
        int bulkInFlight;
        final Map<Long, Op> pending = new ConcurrentHashMap<>();
        volatile CommException failure;
        /** When the last response arrived (or the connection was made). */
        volatile long lastHeard = System.nanoTime();
        /** Held while a request is written, by the sender thread or a caller sending directly. */
        final ReentrantLock writeLock = new ReentrantLock();
        /** The request header; guarded by {@link #writeLock}. */
        final ByteBuffer header = ByteBuffer.allocateDirect(TcpWire.REQUEST_HEADER).order(ByteOrder.LITTLE_ENDIAN);

        Stream(PeerConn conn, SocketChannel ch) {
            this.conn = conn;
            this.ch = ch;
        }

        void start() {
            daemon(this::sendLoop, "jcomm-transfer-" + self + "-to-" + conn.agent + "-send");
            daemon(this::receiveLoop, "jcomm-transfer-" + self + "-to-" + conn.agent + "-recv");
        }

        void submit(Op op) {
            if (failure != null) {
                op.future.completeExceptionally(failure);
                return;
            }
            if (op.express && sendDirect(op)) {
                return;
            }
            boolean queued;
            lock.lock();
            try {
                queued = express.size() + bulk.size() < QUEUE;
                if (queued) {
                    (op.express ? express : bulk).add(op);
                    ready.signal();
                }
            } finally {
                lock.unlock();
            }
            if (!queued) {
                op.future.completeExceptionally(new CommTimeoutException(context("submit"), QUEUE
                        + " requests already queued to agent " + conn.agent));
                return;
            }
            if (failure != null) {
                drain();
            }
        }

        void abort(CommException cause) {
            synchronized (this) {
                if (failure == null) {
                    failure = cause;
                }
            }
            close(ch);
            drain();
        }

        void drain() {
            CommException f = failure;
            List<Op> queued = new ArrayList<>();
            lock.lock();
            try {
                queued.addAll(express);
                queued.addAll(bulk);
                express.clear();
                bulk.clear();
                ready.signalAll();
            } finally {
                lock.unlock();
            }
            for (Op op : queued) {
                op.future.completeExceptionally(f);
            }
            for (Long id : pending.keySet()) {
                Op p = pending.remove(id);
                if (p != null) {
                    p.future.completeExceptionally(f);
                }
            }
        }

        private void brokenBy(Throwable e) {
            if (failure == null) {
                conn.fail(closed ? new CommClosedException(context("transfer"), "transfer agent " + self + " closed")
                        : e instanceof CommException ce ? ce
                        : new PeerFailureException(context("transfer"), -1, "connection to agent " + conn.agent
                                + " broke: " + e, e));
            }
        }

        private void sendLoop() {
            try {
                while (failure == null) {
                    Op op = next();
                    if (op == null) {
                        continue;
                    }
                    writeLock.lock();
                    try {
                        if (!send(op)) {
                            return;
                        }
                    } finally {
                        writeLock.unlock();
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                brokenBy(e);
            } catch (IOException | RuntimeException e) {
                brokenBy(e);
            }
        }

        /**
         * Writes one request (header, notification, a write's data) with {@link #writeLock} held; false
         * when the stream failed first (its requests, this one included, are failed).
         */
        private boolean send(Op op) throws IOException {
            pending.put(op.id, op);
            if (failure != null) {
                drain();
                return false;
            }
            int nl = op.notification == null ? 0 : op.notification.length;
            ByteBuffer h = header;
            h.clear();
            h.putInt(op.type).putInt(nl).putLong(op.id)
                    .putInt(op.remote == null ? 0 : op.remote.regionId()).putInt(0)
                    .putLong(op.remote == null ? 0 : op.remote.generation()).putLong(op.offset).putLong(op.length);
            h.flip();
            TcpWire.writeFully(ch, h);
            if (nl > 0) {
                TcpWire.writeFully(ch, ByteBuffer.wrap(op.notification));
            }
            if (op.type == TcpWire.WRITE) {
                TcpWire.writeFully(ch, op.local.duplicate());
            }
            return true;
        }

        /**
         * Sends an express request on the caller's thread when nothing else is queued or unanswered on
         * this stream (so the socket's buffer has room and nothing is overtaken), which saves the hand-off
         * to the sender thread; false when it has to be queued.
         */
        private boolean sendDirect(Op op) {
            if (!pending.isEmpty() || !writeLock.tryLock()) {
                return false;
            }
            try {
                lock.lock();
                try {
                    if (!express.isEmpty() || !bulk.isEmpty() || !pending.isEmpty()) {
                        return false;
                    }
                } finally {
                    lock.unlock();
                }
                send(op);
            } catch (IOException | RuntimeException e) {
                brokenBy(e);
                drain();
            } finally {
                writeLock.unlock();
            }
            return true;
        }

        /** The next request to send, express first; null after a 100 ms wait with nothing sendable. */
        private Op next() throws InterruptedException {
            lock.lock();
            try {
                Op op = express.poll();
                if (op == null && bulkInFlight < BULK_IN_FLIGHT) {
                    op = bulk.poll();
                    if (op != null) {
                        bulkInFlight++;
                    }
                }
                if (op == null) {
                    ready.await(100, TimeUnit.MILLISECONDS);
                }
                return op;
            } finally {
                lock.unlock();
            }
        }

        /** A bulk piece was answered: the next one may go. */
        private void answered(Op op) {
            if (!op.express) {
                lock.lock();
                try {
                    bulkInFlight--;
                    ready.signal();
                } finally {
                    lock.unlock();
                }
            }
        }

        private void receiveLoop() {
            ByteBuffer h = ByteBuffer.allocateDirect(TcpWire.RESPONSE_HEADER).order(ByteOrder.LITTLE_ENDIAN);
            // the request whose answer is being read: out of pending, so the stream's failure must end it here
            Op current = null;
            try {
                while (failure == null) {
                    h.clear();
                    if (!TcpWire.readFully(ch, h)) {
                        throw new PeerFailureException(context("transfer"), -1, "agent " + conn.agent + " closed the connection");
                    }
                    h.flip();
                    lastHeard = System.nanoTime();
                    int magic = h.getInt();
                    int status = h.getInt();
                    long id = h.getLong();
                    int dl = h.getInt();
                    if (magic != TcpWire.RESPONSE || dl < 0 || dl > TcpWire.MAX_DETAIL) {
                        throw new ProtocolException(context("transfer"), "malformed response from agent " + conn.agent);
                    }
                    Op op = pending.remove(id);
                    current = op;
                    if (op == null) {
                        throw new ProtocolException(context("transfer"), "agent " + conn.agent + " answered unknown request " + id);
                    }
                    String detail = "";
                    if (dl > 0) {
                        ByteBuffer d = ByteBuffer.allocate(dl);
                        if (!TcpWire.readFully(ch, d)) {
                            throw new PeerFailureException(context("transfer"), -1, "agent " + conn.agent + " closed the connection");
                        }
                        detail = new String(d.array(), StandardCharsets.UTF_8);
                    }
                    if (status != TcpWire.STATUS_OK) {
                        answered(op);
                        current = null;
                        op.future.completeExceptionally(new TransferRefusedException(context(op.type == TcpWire.READ ? "read"
                                : "write"), TransferRefusedException.Reason.ofCode(status), "by agent " + conn.agent + ": " + detail));
                        continue;
                    }
                    if (op.type == TcpWire.READ) {
                        ByteBuffer dst = op.local.duplicate();
                        if (!TcpWire.readFully(ch, dst) && op.length > 0) {
                            throw new PeerFailureException(context("read"), -1, "agent " + conn.agent + " closed the connection");
                        }
                    }
                    answered(op);
                    current = null;
                    op.future.complete(null);
                }
            } catch (IOException | RuntimeException e) {
                brokenBy(e);
                if (current != null) {
                    CommException f = failure;
                    current.future.completeExceptionally(f != null ? f : new PeerFailureException(context("transfer"), -1,
                            "connection to agent " + conn.agent + " broke: " + e, e));
                }
            }
        }

        /** Fails the stream if one of its requests passed its deadline. */
        void reap(long now) {
            for (Op op : pending.values()) {
                if (now - op.deadline.nanoTime() > 0) {
                    expire(op);
                    return;
                }
            }
            Op late = null;
            lock.lock();
            try {
                for (Op op : express) {
                    if (now - op.deadline.nanoTime() > 0) {
                        late = op;
                        break;
                    }
                }
                for (Op op : bulk) {
                    if (late == null && now - op.deadline.nanoTime() > 0) {
                        late = op;
                        break;
                    }
                }
            } finally {
                lock.unlock();
            }
            if (late != null) {
                expire(late);
            }
        }

        private void expire(Op op) {
            conn.fail(new CommTimeoutException(context(op.type == TcpWire.READ ? "read" : "write"), "a transfer to agent "
                    + conn.agent + " passed its deadline; its connection was closed"));
        }
    }

    private void reapLoop() {
        for (long round = 1; !closed; round++) {
            try {
                Thread.sleep(REAPER_PERIOD_MS);
            } catch (InterruptedException e) {
                return;
            }
            long now = System.nanoTime();
            for (PeerConn c : conns.values()) {
                for (Stream s : c.streams) {
                    s.reap(now);
                }
                if (!c.broken) {
                    c.heartbeat(now);
                }
            }
            if (round % SESSION_CHECK_PERIODS == 0) {
                closeSilentSessions(now);
            }
        }
    }

    /**
     * Owner side: closes every connection of an initiator that sent nothing on any of them (its
     * heartbeats included) for the silence timeout, which ends the transfers they were receiving.
     */
    private void closeSilentSessions(long now) {
        Map<String, Long> heard = new java.util.HashMap<>();
        for (Session s : sessions) {
            if (s.peer != null) {
                heard.merge(s.peer, s.lastHeard, (a, b) -> a - b > 0 ? a : b);
            }
        }
        for (Session s : sessions) {
            Long h = s.peer == null ? null : heard.get(s.peer);
            if (h != null && now - h > silenceNanos) {
                close(s.ch);
            }
        }
    }

    @Override
    public void forget(String agent) {
        PeerConn c = conns.get(agent);
        if (c != null) {
            c.fail(new PeerFailureException(context("transfer"), -1, "agent " + agent + " was forgotten"));
        }
    }

    // ------------------------------------------------------------------ owner side

    /** An accepted connection; {@link #peer} is set once the initiator has authenticated. */
    private static final class Session {
        final SocketChannel ch;
        volatile String peer;
        /** When the last request header arrived (or the initiator authenticated). */
        volatile long lastHeard = System.nanoTime();

        Session(SocketChannel ch) {
            this.ch = ch;
        }
    }

    private void acceptLoop() {
        while (!closed) {
            SocketChannel ch;
            try {
                ch = server.accept();
            } catch (IOException e) {
                return; // closed
            }
            Session s = new Session(ch);
            sessions.add(s);
            daemon(() -> serve(s), "jcomm-transfer-" + self + "-serve");
        }
    }

    private void serve(Session s) {
        SocketChannel ch = s.ch;
        try {
            ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            ch.setOption(StandardSocketOptions.SO_RCVBUF, 4 << 20);
            ch.setOption(StandardSocketOptions.SO_SNDBUF, 4 << 20);
            String peer = handshake(ch);
            if (peer != null) {
                s.lastHeard = System.nanoTime();
                s.peer = peer;
                serveRequests(s, peer);
            }
        } catch (IOException | RuntimeException e) {
            // the peer went away or broke the protocol: its requests' outcomes are its own to see
        } finally {
            sessions.remove(s);
            close(ch);
        }
    }

    private String handshake(SocketChannel ch) throws IOException {
        ch.socket().setSoTimeout((int) opts.connectTimeout().toMillis());
        DataInputStream in = new DataInputStream(ch.socket().getInputStream());
        OutputStream out = ch.socket().getOutputStream();
        ByteBuffer h = le(in, 10);
        int magic = h.getInt();
        int version = h.getInt();
        int nl = h.getShort() & 0xffff;
        if (magic != TcpWire.HELLO || nl > TcpWire.MAX_NAME) {
            return null;
        }
        byte[] cn = new byte[nl];
        in.readFully(cn);
        byte[] clientNonce = new byte[TokenProof.NONCE_BYTES];
        in.readFully(clientNonce);
        boolean clientHasToken = in.readByte() != 0;
        String client = new String(cn, StandardCharsets.US_ASCII);
        String refusal = version != TcpWire.VERSION ? "protocol version " + version + ", expected " + TcpWire.VERSION
                : Names.problem(client) != null ? Names.problem(client)
                : clientHasToken != (token != null) ? (token != null ? "this agent requires the job token" : "this agent has no job token")
                : null;
        byte[] serverNonce = new byte[TokenProof.NONCE_BYTES];
        Entropy.nextBytes(serverNonce);
        byte[] me = self.getBytes(StandardCharsets.US_ASCII);
        byte[] detail = refusal == null ? new byte[0] : refusal.getBytes(StandardCharsets.UTF_8);
        ByteBuffer c = ByteBuffer.allocate(8 + 2 + me.length + 2 * 32 + 2 + detail.length).order(ByteOrder.LITTLE_ENDIAN);
        c.putInt(TcpWire.CHALLENGE).putInt(refusal == null ? 0 : 1).putShort((short) me.length).put(me).put(serverNonce)
                .put(refusal == null ? TcpWire.proof(token, "server", clientNonce, serverNonce, client, self) : new byte[32])
                .putShort((short) detail.length).put(detail);
        out.write(c.array());
        if (refusal != null) {
            return null;
        }
        ByteBuffer a = le(in, 4 + TokenProof.PROOF_BYTES);
        boolean ok = a.getInt() == TcpWire.AUTH;
        byte[] mac = new byte[TokenProof.PROOF_BYTES];
        a.get(mac);
        ok &= token == null || TokenProof.matches(mac, TcpWire.proof(token, "client", clientNonce, serverNonce, client, self));
        out.write(ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putInt(TcpWire.VERDICT).putInt(ok ? 0 : 1).array());
        ch.socket().setSoTimeout(0);
        return ok ? client : null;
    }

    private void serveRequests(Session session, String peer) throws IOException {
        SocketChannel ch = session.ch;
        ByteBuffer h = ByteBuffer.allocateDirect(TcpWire.REQUEST_HEADER).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer r = ByteBuffer.allocateDirect(TcpWire.RESPONSE_HEADER).order(ByteOrder.LITTLE_ENDIAN);
        ByteBuffer scratch = null;
        int maxNotification = opts.maxNotificationBytes();
        while (!closed) {
            h.clear();
            if (!TcpWire.readFully(ch, h)) {
                return;
            }
            h.flip();
            session.lastHeard = System.nanoTime();
            int type = h.getInt();
            int nl = h.getInt();
            long id = h.getLong();
            int region = h.getInt();
            h.getInt();
            long generation = h.getLong();
            long offset = h.getLong();
            long length = h.getLong();
            if (type < TcpWire.WRITE || type > TcpWire.PING || nl < 0 || nl > maxNotification || length < 0
                    || length > TransferOptions.TCP_CHUNK_BYTES_MAX) {
                respond(ch, r, id, TransferRefusedException.Reason.MALFORMED.code(), "request type " + type + ", notification of "
                        + nl + " bytes (at most " + maxNotification + "), length " + length + " (at most "
                        + TransferOptions.TCP_CHUNK_BYTES_MAX + "): connection closed");
                return;
            }
            byte[] notification = null;
            if (nl > 0) {
                ByteBuffer nb = ByteBuffer.allocate(nl);
                if (!TcpWire.readFully(ch, nb)) {
                    return;
                }
                notification = nb.array();
            }
            if (type == TcpWire.PING) {
                respond(ch, r, id, TcpWire.STATUS_OK, null);
                continue;
            }
            if (type == TcpWire.NOTIFY) {
                deliverAndRespond(ch, r, id, peer, notification == null ? new byte[0] : notification);
                continue;
            }
            RegionAccess access;
            try {
                access = ctx.acquire(region, generation, offset, length, type == TcpWire.WRITE ? Permission.WRITE : Permission.READ, peer);
            } catch (TransferRefusedException e) {
                if (type == TcpWire.WRITE) {
                    scratch = drain(ch, length, scratch);
                }
                respond(ch, r, id, e.reason().code(), e.detail());
                continue;
            }
            if (type == TcpWire.READ) {
                try (access) {
                    respond(ch, r, id, TcpWire.STATUS_OK, null);
                    TcpWire.writeFully(ch, access.buffer());
                }
                continue;
            }
            boolean revoked = false;
            long left;
            TransferRefusedException failed = null;
            try (access) {
                ByteBuffer dst = access.buffer();
                while (dst.hasRemaining()) {
                    if (access.revoked()) {
                        revoked = true;
                        break;
                    }
                    int cap = dst.capacity();
                    dst.limit(Math.min(cap, dst.position() + STEP));
                    if (!TcpWire.readFully(ch, dst)) {
                        throw new PeerFailureException(context("write"), -1, "agent " + peer + " closed mid-write");
                    }
                    dst.limit(cap);
                }
                left = dst.remaining();
                if (!revoked) {
                    try {
                        access.commit();
                    } catch (TransferRefusedException e) {
                        failed = e;
                    }
                }
            }
            if (failed != null) {
                respond(ch, r, id, failed.reason().code(), failed.detail());
                continue;
            }
            if (revoked) {
                scratch = drain(ch, left, scratch);
                respond(ch, r, id, TransferRefusedException.Reason.STALE.code(), "region " + region
                        + " was deregistered during the transfer");
                continue;
            }
            if (notification != null) {
                deliverAndRespond(ch, r, id, peer, notification);
            } else {
                respond(ch, r, id, TcpWire.STATUS_OK, null);
            }
        }
    }

    private void deliverAndRespond(SocketChannel ch, ByteBuffer r, long id, String peer, byte[] notification) throws IOException {
        try {
            ctx.deliver(new Notification(peer, notification), Deadline.after(opts.notificationOfferTimeout()));
            respond(ch, r, id, TcpWire.STATUS_OK, null);
        } catch (TransferRefusedException e) {
            respond(ch, r, id, e.reason().code(), e.detail());
        }
    }

    private static ByteBuffer drain(SocketChannel ch, long bytes, ByteBuffer scratch) throws IOException {
        ByteBuffer s = scratch != null ? scratch : ByteBuffer.allocateDirect(256 << 10);
        long left = bytes;
        while (left > 0) {
            s.clear().limit((int) Math.min(s.capacity(), left));
            if (!TcpWire.readFully(ch, s)) {
                throw new IOException("closed while draining a refused write");
            }
            left -= s.position();
        }
        return s;
    }

    private static void respond(SocketChannel ch, ByteBuffer r, long id, int status, String detail) throws IOException {
        byte[] d = detail == null ? new byte[0] : detail.getBytes(StandardCharsets.UTF_8);
        int dl = Math.min(d.length, TcpWire.MAX_DETAIL);
        r.clear();
        r.putInt(TcpWire.RESPONSE).putInt(status).putLong(id).putInt(dl).putInt(0).flip();
        TcpWire.writeFully(ch, r);
        if (dl > 0) {
            TcpWire.writeFully(ch, ByteBuffer.wrap(d, 0, dl));
        }
    }

    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        close(server);
        for (PeerConn c : conns.values()) {
            c.fail(new CommClosedException(context("close"), "transfer agent " + self + " closed"));
        }
        for (Session s : sessions) {
            close(s.ch);
        }
        acceptor.interrupt();
        reaper.interrupt();
    }
}
