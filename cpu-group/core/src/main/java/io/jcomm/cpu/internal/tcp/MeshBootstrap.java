package io.jcomm.cpu.internal.tcp;

import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProtocolException;
import io.jcomm.runtime.Entropy;
import io.jcomm.api.store.Store;
import io.jcomm.cpu.spi.CpuBackendContext;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelHandlerContext;
import io.netty.channel.ChannelOption;
import io.netty.channel.ChannelPromise;
import io.netty.channel.DefaultChannelPromise;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sets up an {@link Engine}'s mesh, once, on the creating call's thread: listens, publishes this
 * rank's address, process identity and shared-memory capabilities in the store, connects to the
 * lower ranks and accepts the higher ones (each connection opens with a HELLO bound to the group's
 * incarnation and the receiver's nonce; {@link #onHello} checks it), decides which links may use
 * shared memory, and exchanges READY. A peer that refuses connections for a second, or a member the
 * store reports gone, fails set-up at once instead of at the deadline.
 *
 * <p>A group whose members are not all on this host stops after reading the addresses: it keeps
 * listening, and {@link #connectTo} makes each link when an operation first needs it (the higher rank of
 * a pair connects; a lower rank asks it to with a {@link Frame#HELLO_CALL_BACK}).
 *
 * <p>The channels are made, registered, bound and connected here rather than through Netty's
 * {@code ServerBootstrap}/{@code Bootstrap}: those put a {@code ChannelInitializer} (an adapter marked
 * {@code @Sharable}) into each pipeline, and the pipeline reads that annotation, the first annotation
 * of the JVM in a rank (see {@link PassThroughInbound}). {@link Acceptor} does what Netty's acceptor would: it sets up
 * and registers each accepted channel, and pauses accepting for a second after an error such as too
 * many open files.
 */
final class MeshBootstrap {

    private static final Logger LOG = LoggerFactory.getLogger(MeshBootstrap.class);
    /** A peer whose address refuses connections this long has gone (it listens from before it publishes). */
    private static final long REFUSED_GRACE_NANOS = TimeUnit.SECONDS.toNanos(1);
    /** While set-up waits for peers, this often it asks the store whether a member of the job left. */
    private static final long LIVENESS_PROBE_NANOS = TimeUnit.MILLISECONDS.toNanos(250);
    private static final java.time.Duration LIVENESS_PROBE_WAIT = java.time.Duration.ofMillis(2);
    /**
     * A group whose members are not all on this host connects lazily ({@link #connectTo}); when it has
     * more ranks than this, its world-sized collectives also take the algorithms that need O(log N) peers
     * ({@link Engine#large}); smaller ones keep the direct algorithms and connect every peer on their
     * first collective. Groups on one host (their shared-memory fast path needs every link) connect the
     * full mesh at creation.
     */
    static final int LARGE_ABOVE = 16;
    /** A rank that asked a higher rank to connect asks again after this long without a connection. */
    private static final long ASK_AGAIN_NANOS = TimeUnit.SECONDS.toNanos(1);
    /** In a collective, a rank asks a higher peer without a link to connect after this long ({@link #connectTo}). */
    private static final long COLLECTIVE_ASK_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
    /** An accepted connection that no hello has bound after this long is closed. */
    static final long HELLO_WITHIN_MILLIS = 10_000;
    /** After a failed attempt to connect to a peer, the next one waits this long. */
    private static final long RETRY_NANOS = TimeUnit.MILLISECONDS.toNanos(20);

    private final Engine engine;
    /** Lazy groups: each member's published address (host, port, nonce, host id, shm, ...); null when eager. */
    private String[][] addresses;
    private String hostId;
    /** Lazy groups: when an attempt to reach each peer may next start (nanoTime, 0: now). */
    private long[] nextAttempt;
    /** Lazy groups: since when each peer's address refuses connections (nanoTime, 0: it does not). */
    private long[] refusedSince;

    MeshBootstrap(Engine engine) {
        this.engine = engine;
    }

    /** Drives I/O until {@code done} holds (set-up phases). */
    private void driveUntil(BooleanSupplier done, Deadline d, java.util.function.Supplier<String> what) {
        driveUntil(done, d, what, null);
    }

    /**
     * Drives I/O until {@code done} holds; while it does not, runs {@code probe} (if any) every
     * {@link #LIVENESS_PROBE_NANOS}.
     */
    private void driveUntil(BooleanSupplier done, Deadline d, java.util.function.Supplier<String> what, Runnable probe) {
        long nextProbe = System.nanoTime() + LIVENESS_PROBE_NANOS;
        while (!done.getAsBoolean()) {
            if (probe != null && System.nanoTime() - nextProbe >= 0) {
                probe.run();
                nextProbe = System.nanoTime() + LIVENESS_PROBE_NANOS;
            }
            engine.check();
            engine.early.drain();
            int work = engine.loop.runNow();
            if (done.getAsBoolean()) {
                return;
            }
            if (work > 0) {
                continue;
            }
            long left = d.remainingNanos();
            if (left <= 0) {
                throw engine.fail(new CommTimeoutException(engine.ctx(), "timed out after setting up part of the group: " + what.get()));
            }
            engine.loop.runBlocking(Math.min(left, TimeUnit.MILLISECONDS.toNanos(10)));
        }
    }

    /** Sets up a new connection's channel, accepted ({@code peer} -1) or made to {@code peer}; its link. */
    private Link setUp(Channel ch, int peer) {
        Link l = new Link(engine);
        l.peer = peer;
        l.attach(ch);
        ch.config().setRecvByteBufAllocator(l);
        ch.config().setOption(ChannelOption.TCP_NODELAY, true);
        if (engine.cfg.socketBufferBytes > 0) {
            ch.config().setOption(ChannelOption.SO_SNDBUF, engine.cfg.socketBufferBytes);
            ch.config().setOption(ChannelOption.SO_RCVBUF, engine.cfg.socketBufferBytes);
        }
        ch.pipeline().addLast(l);
        engine.allLinks.add(l);
        if (peer >= 0) {
            engine.links[peer] = l;
        }
        return l;
    }

    /** Registers a new channel with the engine's event loop (what the loop's deprecated {@code register} does). */
    private ChannelFuture register(Channel ch) {
        ChannelPromise promise = new DefaultChannelPromise(ch, engine.loop);
        ch.unsafe().register(engine.loop, promise);
        return promise;
    }

    /** Closes a channel that failed to register, bind or connect (as Netty's bootstraps close theirs). */
    private static void discard(Channel ch) {
        if (ch.isRegistered()) {
            ch.close();
        } else {
            ch.unsafe().closeForcibly();
        }
    }

    /**
     * Discards a connection's channel that failed to register or connect, with its link: the link's
     * buffers go with it, so that failed attempts keep none until the group closes.
     */
    private void abandon(Channel ch, Link l) {
        discard(ch);
        if (l.peer >= 0 && engine.links[l.peer] == l) {
            engine.links[l.peer] = null;
        }
        engine.allLinks.remove(l);
        l.release();
    }

    /** Accepted connections in the order they came, while no hello has bound them (on the event loop). */
    private final java.util.ArrayDeque<Link> waiting = new java.util.ArrayDeque<>();

    /** Accepted connections that are open and that no member's hello has bound; forgets the others. */
    private int waitingForHello() {
        waiting.removeIf(l -> l.peer >= 0 || !l.channel.isOpen());
        return waiting.size();
    }

    /**
     * The listening channel's handler: sets up and registers each accepted connection. At most
     * 2 N + 64 may wait for their hello at once (beyond that the one that waited longest is dropped: a
     * member says hello as soon as it connects), and each gets {@link #HELLO_WITHIN_MILLIS} to send it.
     */
    private final class Acceptor implements PassThroughInbound {

        @Override
        public void channelRead(ChannelHandlerContext ctx, Object msg) {
            Channel child = (Channel) msg;
            int most = 2 * engine.size + 64;
            if (waitingForHello() >= most) {
                // members connect once each and ask to be called back once each, and say hello at once: the
                // connection that has waited longest is someone else's
                Link oldest = waiting.poll();
                refused(new ProtocolException(engine.ctx(), "more than " + most + " connections without a hello: dropped the one"
                        + " from " + oldest.channel.remoteAddress() + " that waited longest"));
                oldest.channel.close();
            }
            try {
                Link l = setUp(child, -1);
                waiting.add(l);
                register(child).addListener((ChannelFuture f) -> {
                    if (!f.isSuccess()) {
                        abandon(child, l);
                        return;
                    }
                    // a connection that never becomes a member's link (a stranger, a refused hello, a request to
                    // connect back) goes with its buffers when it closes, and closes if no hello binds it in time
                    child.closeFuture().addListener(x -> child.eventLoop().execute(() -> {
                        if (l.peer < 0) {
                            engine.allLinks.remove(l);
                            l.release();
                        }
                    }));
                    child.eventLoop().schedule(() -> {
                        if (l.peer < 0 && child.isOpen()) {
                            refused(new ProtocolException(engine.ctx(), "no hello from " + child.remoteAddress() + " within "
                                    + HELLO_WITHIN_MILLIS + " ms: dropped"));
                            child.close();
                        }
                    }, HELLO_WITHIN_MILLIS, TimeUnit.MILLISECONDS);
                });
            } catch (RuntimeException e) {
                LOG.debug("group {} rank {}: cannot set up an accepted connection: {}", engine.group, engine.rank, e.toString());
                discard(child);
            }
        }

        @Override
        @SuppressWarnings("deprecation") // declared by ChannelInboundHandler, deprecated on ChannelHandler only
        public void exceptionCaught(ChannelHandlerContext ctx, Throwable cause) {
            // an accept failed (too many open files, say): pause accepting for a second instead of spinning
            LOG.warn("group {} rank {}: accepting a connection failed (pausing for a second): {}", engine.group, engine.rank,
                    cause.toString());
            Channel server = ctx.channel();
            if (server.config().isAutoRead()) {
                server.config().setAutoRead(false);
                ctx.executor().schedule(() -> server.config().setAutoRead(true), 1, TimeUnit.SECONDS);
            }
        }
    }

    void run(CpuBackendContext ctx, Deadline d) {
        Store store = ctx.store();
        engine.nonce = Entropy.nextLong();
        ServerChannel listener = engine.epoll ? new EpollServerSocketChannel() : new NioServerSocketChannel();
        listener.config().setOption(ChannelOption.SO_BACKLOG, 256);
        listener.pipeline().addLast(new Acceptor());
        ChannelFuture bind = register(listener);
        driveUntil(bind::isDone, d, () -> "registering a server socket");
        if (bind.isSuccess()) {
            bind = listener.bind(new InetSocketAddress(ctx.hostname(), 0));
            driveUntil(bind::isDone, d, () -> "binding a server socket on " + ctx.hostname());
        }
        if (!bind.isSuccess()) {
            discard(listener);
            throw engine.fail(new io.jcomm.api.BackendException(engine.ctx(), "cannot listen on " + ctx.hostname() + ": " + bind.cause(),
                    bind.cause()));
        }
        engine.server = listener;
        int port = ((InetSocketAddress) engine.server.localAddress()).getPort();

        // which incarnation of the group this is (keys of an earlier one in the same namespace are never
        // read); a namespace the caller keeps for this incarnation needs no counting
        engine.generation = engine.cfg.freshNamespace ? 1 : store.add("tcp/instance/" + engine.rank, 1);
        String hostId = engine.cfg.hostId != null ? engine.cfg.hostId : io.jcomm.api.HostIdentity.local();
        if (engine.cfg.shm) {
            engine.shm.enableRings();
        }
        // what this rank can do in shared memory; rings and staging regions are made on first use
        // (staging size and the size from which collectives use it: ranks that differ never set it up)
        // (and the fast path's region size, made once the mesh is up)
        String stagingOffer = engine.cfg.shm && (engine.cfg.shmStagingBytes > 0 || engine.cfg.shmFastBytes > 0)
                ? engine.cfg.shmStagingBytes + ":" + engine.cfg.shmCollectiveMinBytes + ":" + engine.cfg.shmFastBytes : "-";
        String me = ctx.hostname() + " " + port + " " + Long.toUnsignedString(engine.nonce, 16) + " " + hostId + " "
                + (engine.cfg.shm ? "shm" : "-") + " " + stagingOffer + " " + Long.toUnsignedString(engine.progress.processId(), 16)
                + " " + ProcessHandle.current().pid() + " " + (ctx.memberTag().isEmpty() ? "-" : ctx.memberTag());
        String prefix = "tcp/" + engine.generation + "/rank/";
        store.set(prefix + engine.rank, me.getBytes(StandardCharsets.UTF_8));
        List<String> keys = new ArrayList<>();
        for (int r = 0; r < engine.size; r++) {
            if (r != engine.rank) {
                keys.add(prefix + r);
            }
        }
        List<byte[]> values = store.multiGet(keys, d.remaining());
        String[][] peers = new String[engine.size][];
        int i = 0;
        for (int r = 0; r < engine.size; r++) {
            if (r == engine.rank) {
                continue;
            }
            String[] parts = new String(values.get(i++), StandardCharsets.UTF_8).split(" ");
            if (parts.length != 9) {
                throw engine.fail(new ProtocolException(engine.ctx(), "malformed address of rank " + r + " in the store"));
            }
            try {
                engine.peerProcess[r] = Long.parseUnsignedLong(parts[6], 16);
                // its pid, to read its flight recorder when it is on this host (error messages)
                engine.peerStates.pid[r] = parts[3].equals(hostId) ? Long.parseLong(parts[7]) : 0;
                engine.peerStates.remote[r] = !parts[3].equals(hostId);
                engine.peerStates.address[r] = parts[0];
            } catch (NumberFormatException e) {
                throw engine.fail(new ProtocolException(engine.ctx(), "malformed address of rank " + r + " in the store"));
            }
            peers[r] = parts;
            engine.memberTags[r] = parts[8].equals("-") ? "" : parts[8];
        }
        engine.memberTags[engine.rank] = ctx.memberTag();

        // members on other hosts read what this process does through the store, and it reads theirs there
        for (int r = 0; r < engine.size; r++) {
            if (engine.peerStates.remote[r]) {
                engine.peerStates.publish(store, engine.progress.processId());
                break;
            }
        }

        if (lazy(peers, hostId)) {
            // no connection now: each link is made on first use (connectTo); the listener stays open
            addresses = peers;
            this.hostId = hostId;
            nextAttempt = new long[engine.size];
            refusedSince = new long[engine.size];
            engine.lazy = true;
            engine.large = engine.size > LARGE_ABOVE;
            engine.shm.stagingCandidate(false);
            engine.shm.fastCandidate(false);
            LOG.debug("group {} rank {}: {} ranks over {}, connecting on first use", engine.group, engine.rank, engine.size,
                    engine.transportName());
            return;
        }

        // connect to lower ranks, accept from higher ranks
        for (int r = 0; r < engine.rank; r++) {
            connect(r, peers[r], d);
        }
        Store probe = store;
        String probeKey = prefix + "liveness-probe";
        driveUntil(this::allConnected, d, this::missingConnections, () -> probeLiveness(probe, probeKey));

        // shared memory to peers on this host: links that may take a ring later
        boolean stagingCandidate = !stagingOffer.equals("-") && engine.size > 1;
        for (int r = 0; r < engine.size; r++) {
            if (r == engine.rank) {
                continue;
            }
            boolean sameHost = peers[r][3].equals(hostId);
            if (engine.shm.ringsEnabled() && sameHost && peers[r][4].equals("shm")) {
                engine.links[r].shm = new ShmLink(engine.cfg.shmNativeCopy);
                engine.links[r].shm.bind(engine.links[r]);
            }
            stagingCandidate &= sameHost && peers[r][5].equals(stagingOffer);
        }
        // every rank sees the same addresses, so every rank comes to the same answer
        engine.shm.stagingCandidate(stagingCandidate && engine.cfg.shmStagingBytes > 0);
        engine.shm.fastCandidate(stagingCandidate && engine.cfg.shmFastBytes > 0);
        for (int r = 0; r < engine.size; r++) {
            if (r != engine.rank) {
                engine.links[r].write(Frame.of(Frame.READY, 0, engine.generation), null, true);
            }
        }
        driveUntil(this::allReady, d, () -> "waiting for ranks to finish connecting: " + notReady(),
                () -> probeLiveness(probe, probeKey));
        engine.server.close();
        engine.server = null;
        LOG.debug("group {} rank {}: connected {} peers over {} (shared memory: {}, staging: {})", engine.group, engine.rank,
                engine.size - 1, engine.transportName(), engine.shm.ringsEnabled() ? "on first large payload" : "off",
                engine.shm.stagingLater() ? "on first large collective" : "off");
    }

    /** A peer's published listener: host, port and the nonce its HELLO must carry. */
    private record PeerAddress(String host, int port, long nonce) {
    }

    /** Parses rank {@code r}'s published address; a malformed one fails the group. */
    private PeerAddress parse(int r, String[] addr) {
        try {
            return new PeerAddress(addr[0], Integer.parseInt(addr[1]), Long.parseUnsignedLong(addr[2], 16));
        } catch (NumberFormatException e) {
            throw engine.fail(new ProtocolException(engine.ctx(), "malformed address of rank " + r + ": " + String.join(" ", addr)));
        }
    }

    private void connect(int r, String[] addr, Deadline d) {
        PeerAddress a = parse(r, addr);
        String host = a.host();
        int port = a.port();
        long theirNonce = a.nonce();
        long refusedSince = 0;
        while (true) {
            Channel ch = engine.epoll ? new EpollSocketChannel() : new NioSocketChannel();
            ch.config().setOption(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) Math.max(1, Math.min(10_000, d.remainingMillis())));
            Link link = setUp(ch, r);
            ChannelFuture cf = register(ch);
            driveUntil(cf::isDone, d, () -> "registering a connection to rank " + r);
            if (cf.isSuccess()) {
                cf = ch.connect(new InetSocketAddress(host, port));
                driveUntil(cf::isDone, d, () -> "connecting to rank " + r + " at " + host + ":" + port);
            }
            if (cf.isSuccess()) {
                Frame hello = Frame.of(Frame.HELLO, 0, theirNonce);
                hello.root = engine.rank;
                hello.count = engine.generation;
                hello.index = r;
                hello.creditBytes = engine.groupGeneration;
                engine.links[r].write(hello, null, true);
                engine.links[r].helloSeen = true;
                return;
            }
            // this attempt's link goes with its channel: retries until the deadline keep no buffers
            abandon(ch, link);
            if (d.isExpired()) {
                throw engine.fail(new CommTimeoutException(engine.ctx(), "cannot connect to rank " + r + " at " + host + ":" + port
                        + ": " + cf.cause()));
            }
            if (cf.cause() instanceof java.net.ConnectException && String.valueOf(cf.cause().getMessage()).contains("refused")) {
                long now = System.nanoTime();
                if (refusedSince == 0) {
                    refusedSince = now;
                } else if (now - refusedSince > REFUSED_GRACE_NANOS) {
                    // it listened before it published the address: it has closed or died since
                    throw engine.fail(new PeerFailureException(engine.ctx(), r, "nothing listens at " + host + ":" + port
                            + " any more (the rank left or died during group creation)"));
                }
            } else {
                refusedSince = 0;
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20));
        }
    }

    /**
     * Asks the store whether a member of the job left it without a goodbye: a short wait on a key nobody
     * sets, which a jcomm store server answers at once with a failure naming the dead rank (other stores
     * let it time out, and set-up goes on waiting for its deadline).
     */
    private void probeLiveness(Store store, String key) {
        try {
            store.wait(List.of(key), LIVENESS_PROBE_WAIT);
        } catch (PeerFailureException e) {
            throw engine.fail(new PeerFailureException(engine.ctx(), -1, "a member of the job died during group creation: "
                    + e.detail(), e));
        } catch (CommTimeoutException e) {
            // nobody died (or the store cannot tell): keep waiting for the peers
        } catch (CommException e) {
            LOG.debug("group {} rank {}: liveness probe failed: {}", engine.group, engine.rank, e.toString());
        }
    }

    /** Closes a connection that sent bytes before a valid hello. */
    void rejectUnbound(Link l, CommException why) {
        LOG.warn("group {} rank {}: dropping a connection from {} that did not start with a valid hello: {}", engine.group, engine.rank,
                l.channel.remoteAddress(), why.detail());
        refused(why);
        l.channel.close();
    }

    void onHello(Link l, Frame f) {
        if (f.op == Frame.HELLO_CALL_BACK) {
            onCallBack(l, f);
            return;
        }
        ProtocolException why = helloRefusal(f, l);
        if (why != null) {
            LOG.debug("group {} rank {}: refusing a connection from {}: {}", engine.group, engine.rank,
                    l.channel.remoteAddress(), why.detail());
            refused(why);
            l.channel.close();
            return;
        }
        l.peer = f.root;
        engine.links[f.root] = l;
        if (addresses != null) {
            bindShm(l, f.root);
        }
    }

    /**
     * A lower rank of a lazy group asks this rank to connect to it (links are always made by the higher
     * rank of a pair, so two ranks never race to make the same link): the asking connection closes and,
     * unless a link exists or is being made, this rank connects.
     */
    private void onCallBack(Link l, Frame f) {
        int from = f.root;
        String why = null;
        if (addresses == null) {
            why = "a request to connect back, which a group connected at creation does not take";
        } else if (f.creditBytes != engine.groupGeneration || f.seq != engine.nonce || f.count != engine.generation) {
            why = "a request to connect back from another incarnation or generation of the group";
        } else if (f.index != engine.rank || from < 0 || from >= engine.rank) {
            why = "a request to connect back from rank " + from + " to rank " + f.index + ", which this rank does not take";
        }
        l.channel.close(); // its buffers go once this read is over (the acceptor's listener: it never binds)
        if (why != null) {
            ProtocolException e = new ProtocolException(engine.ctx(), why + ": refused");
            LOG.debug("group {} rank {}: refusing a connection from {}: {}", engine.group, engine.rank,
                    l.channel.remoteAddress(), e.detail());
            refused(e);
            return;
        }
        if (engine.links[from] == null && !engine.hasFailed()) {
            dial(from, false);
        }
    }

    /** Why a hello is refused, or null when it is one of this incarnation's and its connection is expected. */
    private ProtocolException helloRefusal(Frame f, Link l) {
        int from = f.root;
        String why = null;
        if (f.creditBytes != engine.groupGeneration) {
            why = "a hello of generation " + f.creditBytes + " where generation " + engine.groupGeneration + " was expected";
        } else if (f.seq != engine.nonce || f.count != engine.generation) {
            why = "a hello of another incarnation of the group (nonce or incarnation " + f.count + " differ)";
        } else if (f.index != engine.rank || from <= engine.rank || from >= engine.size) {
            why = "a hello from rank " + from + " to rank " + f.index + ", which this rank does not accept";
        } else if (engine.links[from] != null || l.peer >= 0) {
            why = "a second hello from rank " + from;
        }
        return why == null ? null : new ProtocolException(engine.ctx(), why + ": refused");
    }

    /** Counts a refused connection (tests, diagnostics); event-loop thread. */
    private void refused(CommException why) {
        if (engine.refusals.size() < 16) {
            engine.refusals.add(why);
        }
    }

    private boolean allConnected() {
        for (int r = 0; r < engine.size; r++) {
            if (r != engine.rank && (engine.links[r] == null || !engine.links[r].channel.isActive())) {
                return false;
            }
        }
        return true;
    }

    private String missingConnections() {
        StringBuilder sb = new StringBuilder("no connection yet with ranks");
        for (int r = 0; r < engine.size; r++) {
            if (r != engine.rank && (engine.links[r] == null || !engine.links[r].channel.isActive())) {
                sb.append(' ').append(r);
            }
        }
        return sb.toString();
    }

    private boolean allReady() {
        for (int r = 0; r < engine.size; r++) {
            if (r != engine.rank && !engine.links[r].readySeen) {
                return false;
            }
        }
        return true;
    }

    private String notReady() {
        StringBuilder sb = new StringBuilder();
        for (int r = 0; r < engine.size; r++) {
            if (r != engine.rank && !engine.links[r].readySeen) {
                sb.append(' ').append(r);
            }
        }
        return sb.toString().trim();
    }

    // ------------------------------------------------------------------ lazy groups

    /** Whether a group with these member addresses connects lazily (see {@link #LARGE_ABOVE}). */
    private boolean lazy(String[][] peers, String hostId) {
        if (engine.cfg.connectAtCreation && engine.size <= LARGE_ABOVE) {
            return false;
        }
        for (int r = 0; r < engine.size; r++) {
            if (r != engine.rank && !peers[r][3].equals(hostId)) {
                return true;
            }
        }
        return false;
    }

    /**
     * Makes sure that this rank has a link to each of {@code peers[0..count)} (this rank and connected
     * peers are skipped): connects to lower ranks and asks higher ranks to connect, each with the HELLO
     * of set-up, and drives I/O until every link is up. On the driving thread, never inside an I/O
     * callback. A peer whose address refuses connections for a second has gone
     * ({@link PeerFailureException}); a peer that does not connect before {@code d} gives a
     * {@link CommTimeoutException} naming it; both fail the group.
     *
     * <p>{@code collective}: every member runs the same operation, whose peers are symmetric (a higher
     * peer connects to this rank when it gets there), so this rank asks a higher peer to connect only
     * after {@link #COLLECTIVE_ASK_NANOS} without its link, instead of at once: in a first barrier of 1,024
     * ranks that arrive together, asking at once opened a short connection per pair for nothing. A peer
     * that is late is asked then, and its progress thread connects back before it arrives; a dead one
     * refuses the request (a second of refusals fails the group). A point-to-point send asks at once (its
     * receiver may not be in an operation of the group).
     */
    void connectTo(int[] peers, int count, Deadline d, boolean collective) {
        while (true) {
            engine.check();
            boolean all = true;
            long now = System.nanoTime();
            for (int i = 0; i < count; i++) {
                int p = peers[i];
                if (p == engine.rank) {
                    continue;
                }
                Link l = engine.links[p];
                if (l == null) {
                    all = false;
                    if (nextAttempt[p] == 0 && collective && p > engine.rank) {
                        nextAttempt[p] = now + COLLECTIVE_ASK_NANOS; // it connects when it gets here
                    } else if (now - nextAttempt[p] >= 0 || nextAttempt[p] == 0) {
                        nextAttempt[p] = now + (p < engine.rank ? RETRY_NANOS : ASK_AGAIN_NANOS);
                        dial(p, p > engine.rank);
                    }
                } else if (!l.helloSeen || !l.channel.isActive()) {
                    engine.checkPeerOpen(p); // a peer that closed the group after its goodbye is not coming back
                    all = false;
                }
            }
            if (all) {
                return;
            }
            engine.early.drain();
            if (engine.loop.runNow() > 0) {
                continue;
            }
            long left = d.remainingNanos();
            if (left <= 0) {
                throw engine.fail(new CommTimeoutException(engine.ctx(), "timed out connecting to ranks "
                        + missing(peers, count)));
            }
            engine.loop.runBlocking(Math.min(left, TimeUnit.MILLISECONDS.toNanos(10)));
        }
    }

    /** Makes sure that this rank has a link to every other member ({@link #connectTo}). */
    void connectToAll(Deadline d, boolean collective) {
        int[] all = new int[engine.size];
        for (int r = 0; r < engine.size; r++) {
            all[r] = r;
        }
        connectTo(all, all.length, d, collective);
    }

    private String missing(int[] peers, int count) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < count; i++) {
            int p = peers[i];
            Link l = engine.links[p];
            if (p != engine.rank && (l == null || !l.helloSeen || !l.channel.isActive())) {
                sb.append(sb.length() == 0 ? "" : " ").append(p);
            }
        }
        return sb.toString();
    }

    /**
     * Starts a connection to rank {@code r} without waiting for it: a link (this rank is the higher of
     * the pair) or, with {@code callBack}, a request that {@code r} connect to this rank (this rank is the
     * lower), which closes once sent. A failure to connect is counted for {@link #connectTo}'s retries;
     * an address that refused connections for a second fails the group.
     */
    private void dial(int r, boolean callBack) {
        PeerAddress a = parse(r, addresses[r]);
        String host = a.host();
        int port = a.port();
        long theirNonce = a.nonce();
        Channel ch = engine.epoll ? new EpollSocketChannel() : new NioSocketChannel();
        ch.config().setOption(ChannelOption.CONNECT_TIMEOUT_MILLIS, 10_000);
        Link link = setUp(ch, callBack ? -1 : r);
        register(ch).addListener((ChannelFuture rf) -> {
            if (!rf.isSuccess()) {
                abandon(ch, link);
                return;
            }
            ch.connect(new InetSocketAddress(host, port)).addListener((ChannelFuture cf) -> {
                if (!cf.isSuccess()) {
                    abandon(ch, link);
                    dialFailed(r, host, port, cf.cause());
                    return;
                }
                refusedSince[r] = 0;
                Frame hello = Frame.of(Frame.HELLO, callBack ? Frame.HELLO_CALL_BACK : 0, theirNonce);
                hello.root = engine.rank;
                hello.count = engine.generation;
                hello.index = r;
                hello.creditBytes = engine.groupGeneration;
                link.write(hello, null, true);
                link.helloSeen = true;
                if (callBack) {
                    // the peer closes it; its buffers go with it
                    ch.closeFuture().addListener(x -> ch.eventLoop().execute(() -> abandon(ch, link)));
                } else {
                    bindShm(link, r);
                }
            });
        });
    }

    private void dialFailed(int r, String host, int port, Throwable cause) {
        if (cause instanceof java.net.ConnectException && String.valueOf(cause.getMessage()).contains("refused")) {
            long now = System.nanoTime();
            if (refusedSince[r] == 0) {
                refusedSince[r] = now;
            } else if (now - refusedSince[r] > REFUSED_GRACE_NANOS) {
                // it listens from creation until it closes the group: it has closed or died
                engine.fail(new PeerFailureException(engine.ctx(), r, "nothing listens at " + host + ":" + port
                        + " any more (the rank closed the group or died)"));
            }
        } else {
            refusedSince[r] = 0;
        }
        // retry soon, even a request to connect back
        nextAttempt[r] = System.nanoTime() + RETRY_NANOS;
    }

    /** A lazy link to a same-host peer that offers shared memory may take a ring later (as at set-up). */
    private void bindShm(Link l, int r) {
        if (engine.shm.ringsEnabled() && addresses[r][3].equals(hostId) && addresses[r][4].equals("shm") && l.shm == null) {
            l.shm = new ShmLink(engine.cfg.shmNativeCopy);
            l.shm.bind(l);
        }
    }
}
