package io.jcomm.cpu.store;

import io.jcomm.api.OpContext;
import io.jcomm.api.StoreException;
import io.jcomm.cpu.store.internal.DescriptorPressure;
import io.jcomm.cpu.store.internal.Descriptors;
import io.jcomm.cpu.store.internal.ServerConnection;
import io.jcomm.cpu.store.internal.ServerContext;
import io.jcomm.cpu.store.internal.ServerStats;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.channel.ServerChannel;
import io.netty.channel.WriteBufferWaterMark;
import io.netty.channel.group.ChannelGroup;
import io.netty.channel.group.DefaultChannelGroup;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.SocketChannel;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.util.NetUtil;
import io.netty.util.concurrent.DefaultThreadFactory;
import java.net.InetSocketAddress;
import java.util.Objects;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A rendezvous store server that speaks PyTorch's TCPStore wire protocol, so that torch processes
 * ({@code torch.distributed.TCPStore(host, port, is_master=False)}) and jcomm processes
 * ({@link TcpStore}) share one store.
 *
 * <h2>Dialects</h2>
 * Detected per connection, so clients of every torch generation are served at once: a connection
 * whose first bytes are VALIDATE ({@code 00 CE F7 85 3C}) uses torch 2.2+ numbering (2.5+ PING
 * included); any other connection uses the legacy numbering of torch 1.13/2.0 and 2.1, told apart as
 * described in {@link TcpStoreServerConfig.LegacyMode}. A jcomm client identifies itself with a
 * harmless CHECK probe and gets the 2.1 command set and pipelined WAIT+GET.
 *
 * <h2>Robustness</h2>
 * Every length and count is bounded ({@link TcpStoreServerConfig}) before any byte is buffered for
 * it; an unknown command, a malformed or oversized request, a GET of a missing key or an ADD on a
 * non-integer closes only the offending connection, with a logged reason (warnings are rate-limited
 * to ten a second). Waits are served by the server: a WAIT stays pending until its keys are set;
 * nobody polls.
 *
 * <p>Stuck connections: one that holds part of a request for longer than
 * {@link TcpStoreServerConfig#incompleteRequestTimeout()} is closed (a pending WAIT, and commands held
 * behind it, are not incomplete). Connections holding part of a first request (with a token: in the
 * middle of the handshake) are capped apart ({@link TcpStoreServerConfig#maxPendingConnections()}):
 * one more closes the oldest of them, so they cannot lock legitimate clients out. Silent connections
 * (a torch 1.13/2.0 client keeps one for its life) are closed only under descriptor pressure:
 * {@link TcpStoreServerConfig#maxOpenConnections()} bounds every connection together, by default from
 * the process's descriptor limit ({@link #capacity()}, logged at start), and a connection arriving at
 * that bound closes the oldest one without a complete request.
 *
 * <h2>Member liveness (beyond PyTorch)</h2>
 * A jcomm client with a member identity ({@link TcpStoreConfig#member()}) declares itself rank R of
 * job J on each connection, after the capability probe. When a declared connection ends without the
 * client's goodbye (its process died: EOF or reset, not a close by this server), the server
 * remembers R as dead in J, answers every pending WAIT of J's declared connections with a
 * member-failure reply naming R, and from then on does the same at once for every WAIT of J whose
 * keys are missing (WAITs on existing keys are served as always). The client throws
 * {@link io.jcomm.api.PeerFailureException}. Torch clients and undeclared clients never receive the
 * reply. A death is final for the server's life (no elasticity: a rank that declares itself again
 * is accepted, but its job stays failed). Wire format: {@code internal.Wire#MEMBER_KEY}.
 *
 * <h2>Durability (beyond PyTorch)</h2>
 * With {@link TcpStoreServerConfig#dataDir()} set, every change (set, add, compareSet, append,
 * deleteKey, multiSet) is written to an append-only, checksummed file in that directory before the
 * server replies, and a server started on the directory loads every key back before it listens.
 * What survives: a kill of the server process, {@code kill -9} included, loses nothing a client saw
 * acknowledged (the file's pages are in the operating system's cache, which outlives the process);
 * a crash of the machine or a power loss may lose the last changes unless
 * {@link TcpStoreServerConfig#dataFsync()} forces each change to the device before the reply (one
 * device flush per change). A record cut short by a crash is detected by its checksum and dropped at
 * start. The file is bounded ({@link TcpStoreServerConfig#maxDataBytes()}): it is rewritten with the
 * live keys when it has doubled, and a change that would not fit even then is refused: jcomm clients
 * that ride over restarts get {@link StoreRefusedException} and keep their connection, others (torch)
 * see their connection closed, as for a full store; the server goes on serving. Member liveness is not
 * durable: after a restart each jcomm client declares itself again when it reconnects, and a rank that
 * died while the server was down is not seen dying: its peers' waits on it run to their deadlines.
 * Jcomm clients ride over the restart ({@link TcpStoreConfig.Reconnect}); torch clients fail as with
 * torch's own server (they do not reconnect).
 *
 * <h2>Job token (beyond PyTorch)</h2>
 * With a token configured, every connection must first pass a mutual HMAC-SHA256 challenge-response
 * over fresh nonces (see {@code internal.Wire} and {@code io.jcomm.runtime.TokenProof}); a connection that starts with anything else is
 * answered {@code FA 03} and closed, one that fails the proof {@code FA 01}, one that does not finish
 * within the handshake timeout is closed. <b>Torch clients cannot authenticate, so a server with a
 * token refuses all of them</b>: use a token only for jobs whose store clients are all jcomm.
 *
 * <h2>Threads</h2>
 * One Netty event loop (epoll when available, else NIO) runs the listener, every connection and the
 * map, so no lock is taken anywhere on the request path. {@link #close()} may be called from any
 * thread and waits (bounded) for the loop to stop.
 *
 * <pre>{@code
 * try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.defaults());
 *      TcpStore store = TcpStore.connect(TcpStoreConfig.builder().port(server.port()).build())) {
 *     store.set("k", "v".getBytes());
 * }
 * }</pre>
 */
public final class TcpStoreServer implements AutoCloseable {

    private final TcpStoreServerConfig config;
    private final EventLoopGroup group;
    private final Channel serverChannel;
    private final ServerContext context;
    private final InetSocketAddress address;
    private final String transport;
    private final ChannelGroup connections;
    private final Capacity capacity;
    private volatile boolean closed;

    private TcpStoreServer(TcpStoreServerConfig config, EventLoopGroup group, ChannelGroup connections,
                           Channel serverChannel, ServerContext context, String transport, Capacity capacity) {
        this.capacity = capacity;
        this.config = config;
        this.group = group;
        this.connections = connections;
        this.serverChannel = serverChannel;
        this.context = context;
        this.address = (InetSocketAddress) serverChannel.localAddress();
        this.transport = transport;
    }

    /**
     * Binds and starts a server in this process.
     *
     * @throws StoreException when the address cannot be bound (e.g. the port is in use)
     */
    public static TcpStoreServer start(TcpStoreServerConfig config) {
        Objects.requireNonNull(config, "config");
        boolean epoll = switch (config.transport()) {
            case EPOLL -> {
                if (!Epoll.isAvailable()) {
                    throw new StoreException("epoll transport requested but unavailable: " + Epoll.unavailabilityCause());
                }
                yield true;
            }
            case NIO -> false;
            case AUTO -> Epoll.isAvailable();
        };
        IoHandlerFactory factory = epoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        Class<? extends ServerChannel> channelClass = epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
        EventLoopGroup group = new MultiThreadIoEventLoopGroup(1,
                new DefaultThreadFactory("jcomm-" + config.name(), true), factory);
        Capacity capacity = Capacity.of(config);
        ServerContext ctx = new ServerContext(config.name(), config.token().orElse(null), config.maxKeyBytes(),
                config.maxValueBytes(), config.maxKeysPerRequest(), config.maxRequestBytes(), config.maxStoreBytes(),
                config.maxConnections(), config.maxPendingConnections(), capacity.maxOpenConnections(),
                config.handshakeTimeout().toNanos(),
                config.incompleteRequestTimeout().toNanos(), ServerContext.LegacyPolicy.valueOf(config.legacyMode().name()),
                config.logConnections());
        ChannelGroup connections = new DefaultChannelGroup("jcomm-" + config.name(), group.next());
        long loadNanos = 0;
        if (config.dataDir().isPresent()) {
            long t0 = System.nanoTime();
            try {
                ctx.openLog(config.dataDir().get(), config.maxDataBytes(), config.dataFsync());
            } catch (java.io.UncheckedIOException e) {
                group.shutdownGracefully(0, 1, TimeUnit.SECONDS);
                throw new StoreException(OpContext.of("store", -1, "serverStart"), "cannot open the store's data: "
                        + e.getMessage(), e);
            }
            loadNanos = System.nanoTime() - t0;
        }
        try {
            ServerBootstrap b = new ServerBootstrap()
                    .group(group)
                    .channel(channelClass)
                    .option(ChannelOption.SO_BACKLOG, capacity.backlog())
                    .option(ChannelOption.SO_REUSEADDR, true)
                    .childOption(ChannelOption.TCP_NODELAY, true)
                    .childOption(ChannelOption.SO_KEEPALIVE, true)
                    .childOption(ChannelOption.WRITE_BUFFER_WATER_MARK, new WriteBufferWaterMark(256 * 1024, 1024 * 1024))
                    .handler(new DescriptorPressure(ctx))
                    .childHandler(new ChannelInitializer<SocketChannel>() {
                        @Override
                        protected void initChannel(SocketChannel ch) {
                            connections.add(ch);
                            ch.pipeline().addLast(new ServerConnection(ctx));
                        }
                    });
            ChannelFuture f = b.bind(config.host(), config.port()).awaitUninterruptibly();
            if (!f.isSuccess()) {
                throw new StoreException(OpContext.of("store", -1, "serverStart"),
                        "cannot bind the store server to " + config.host() + ":" + config.port() + ": " + f.cause(),
                        f.cause());
            }
            TcpStoreServer server = new TcpStoreServer(config, group, connections, f.channel(), ctx, epoll ? "epoll" : "nio",
                    capacity);
            ServerContextLog.started(server, loadNanos);
            return server;
        } catch (RuntimeException e) {
            group.shutdownGracefully(0, 1, TimeUnit.SECONDS).awaitUninterruptibly(10, TimeUnit.SECONDS);
            ctx.engine().closeLog();
            throw e;
        }
    }

    /** The bound port (the real one when the configuration asked for port 0). */
    public int port() {
        return address.getPort();
    }

    public InetSocketAddress address() {
        return address;
    }

    /** {@code epoll} or {@code nio}. */
    public String transport() {
        return transport;
    }

    public TcpStoreServerConfig config() {
        return config;
    }

    /** How many connections this server can hold, as decided at start. */
    public Capacity capacity() {
        return capacity;
    }

    /**
     * The connection bounds of a started server.
     *
     * @param descriptorLimit    the process's descriptor limit at start (-1 when unknown)
     * @param descriptorsAtStart descriptors open at start (-1 when unknown)
     * @param maxOpenConnections the bound on all connections together (configured, or derived from the
     *                           two above)
     * @param backlog            the listen backlog asked for (the kernel caps it at {@code somaxconn})
     * @param somaxconn          the kernel's cap on the backlog
     * @param expectedClients    clients the job will connect (0 = unknown)
     */
    public record Capacity(long descriptorLimit, long descriptorsAtStart, int maxOpenConnections, int backlog,
                           int somaxconn, int expectedClients) {

        /** Connections a torch 1.13/2.0 client opens (the second one silent for the client's life). */
        public static final int CONNECTIONS_PER_CLIENT = 2;

        static Capacity of(TcpStoreServerConfig config) {
            long limit = Descriptors.limit();
            long open = Descriptors.open();
            int maxOpen = config.maxOpenConnections() > 0 ? config.maxOpenConnections()
                    : Descriptors.connectionBudget(limit, open);
            int somaxconn = NetUtil.SOMAXCONN;
            int backlog = config.backlog() > 0 ? config.backlog() : somaxconn;
            return new Capacity(limit, open, maxOpen, backlog, somaxconn, config.expectedClients());
        }

        /** Whether the expected clients, at two connections each, fit (true when unknown). */
        public boolean fitsExpectedClients() {
            return (long) expectedClients * CONNECTIONS_PER_CLIENT <= maxOpenConnections;
        }
    }

    public boolean isClosed() {
        return closed;
    }

    /** A snapshot of the server's counters (taken on the event loop; bounded wait). */
    public Stats stats() {
        ServerStats s = context.stats();
        Callable<long[]> read = () -> new long[] {context.engine().size(), context.engine().storedBytes(),
                context.engine().pendingWaits(), context.pendingConnections()};
        long[] e = new long[] {-1, -1, -1, -1};
        if (!closed) {
            try {
                e = group.submit(read).get(5, TimeUnit.SECONDS);
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
            } catch (ExecutionException | TimeoutException | java.util.concurrent.RejectedExecutionException ex) {
                // closed or busy: report what the counters say
            }
        }
        return new Stats(s.connectionsOpened(), s.connectionsOpen(), s.connectionsFaulted(), s.commands(),
                s.droppedWaits(), e[0], e[1], e[2], s.largestRequestBytes(), s.peakBufferedBytes(),
                s.peakBufferCapacity(), e[3], s.pendingEvicted(), s.incompleteDropped(), s.memberDeaths(),
                s.memberFailuresSent(), s.retriesAnswered(), s.changesRefused());
    }

    /**
     * Counters of a server.
     *
     * @param connectionsOpened  connections accepted so far
     * @param connectionsOpen    connections open now
     * @param connectionsFaulted connections the server closed because of bad input or a refusal
     * @param commands           commands executed
     * @param droppedWaits       pending WAITs dropped because a legacy client sent a new command
     * @param keys               keys in the store
     * @param storedBytes        bytes of all keys and values
     * @param pendingWaits       WAITs pending now
     * @param largestRequestBytes largest request executed
     * @param peakBufferedBytes  most bytes ever buffered for one connection's undecoded input
     * @param peakBufferCapacity largest receive buffer ever allocated for one connection
     * @param pendingConnections connections without a complete request now
     * @param pendingEvicted     pending connections closed to admit a newer one ({@code maxPendingConnections})
     * @param incompleteRequestsDropped connections closed for holding an incomplete request too long
     * @param memberDeaths       declared connections that ended without a goodbye
     * @param memberFailuresSent WAITs answered with the member-failure reply
     * @param retriesAnswered    changes of reconnecting clients that had been applied already, answered
     *                           again without applying them twice
     * @param changesRefused     changes of jcomm clients refused with a typed reply (store or data file
     *                           full, ADD on a non-integer); the connection stayed open
     */
    public record Stats(long connectionsOpened, long connectionsOpen, long connectionsFaulted, long commands,
                        long droppedWaits, long keys, long storedBytes, long pendingWaits, long largestRequestBytes,
                        long peakBufferedBytes, long peakBufferCapacity, long pendingConnections, long pendingEvicted,
                        long incompleteRequestsDropped, long memberDeaths, long memberFailuresSent,
                        long retriesAnswered, long changesRefused) {
    }

    /** Stops listening, closes every connection and stops the event loop. Idempotent; bounded. */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        context.shutDown(); // connections ended by the shutdown are no member deaths
        serverChannel.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
        connections.close().awaitUninterruptibly(5, TimeUnit.SECONDS);
        group.shutdownGracefully(0, 2, TimeUnit.SECONDS).awaitUninterruptibly(10, TimeUnit.SECONDS);
        context.engine().closeLog(); // after the loop: no change is being written
        ServerContextLog.stopped(this);
    }

    @Override
    public String toString() {
        return "TcpStoreServer(" + address + ", " + transport + (config.hasToken() ? ", token" : "") + ")";
    }

    /** Start/stop log lines. */
    private static final class ServerContextLog {
        private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(TcpStoreServer.class);

        static void started(TcpStoreServer s, long loadNanos) {
            Capacity c = s.capacity;
            io.jcomm.cpu.store.internal.StoreLog log = s.context.engine().log();
            if (log != null) {
                LOG.info("{}: durable: keys kept in {} ({} keys, {} bytes of data file, loaded in {} ms; fsync {}, "
                                + "max {} bytes)", s.config.name(), log.directory(), s.context.engine().size(),
                        log.size(), loadNanos / 1_000_000, log.fsync() ? "on" : "off", log.maxBytes());
            }
            LOG.info("{}: listening on {}:{} ({}, token {}); holds {} connections (descriptor limit {}, {} open at "
                            + "start), backlog {}", s.config.name(), s.address.getAddress().getHostAddress(),
                    s.address.getPort(), s.transport, s.config.hasToken() ? "required" : "off", c.maxOpenConnections(),
                    c.descriptorLimit(), c.descriptorsAtStart(), Math.min(c.backlog(), c.somaxconn()));
            if (!c.fitsExpectedClients()) {
                LOG.warn("{}: {} clients may open {} connections ({} each for torch 1.13/2.0), more than the {} this "
                                + "server can hold: raise the descriptor limit (ulimit -n; hard limit {}) or the "
                                + "bound (maxOpenConnections)", s.config.name(), c.expectedClients(),
                        (long) c.expectedClients() * Capacity.CONNECTIONS_PER_CLIENT, Capacity.CONNECTIONS_PER_CLIENT,
                        c.maxOpenConnections(), c.descriptorLimit());
            }
            if (c.backlog() > c.somaxconn()) {
                LOG.warn("{}: the listen backlog {} is capped at net.core.somaxconn {}", s.config.name(), c.backlog(),
                        c.somaxconn());
            }
        }

        static void stopped(TcpStoreServer s) {
            LOG.debug("{}: stopped", s.config.name());
        }
    }
}
