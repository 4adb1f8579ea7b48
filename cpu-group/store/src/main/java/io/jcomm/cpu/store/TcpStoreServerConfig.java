package io.jcomm.cpu.store;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;

/**
 * Immutable configuration of a {@link TcpStoreServer}. Built with {@link #builder()}; every limit has
 * a safe default (torch 2.x's libuv server uses the same sizes).
 *
 * <table>
 *   <caption>Settings</caption>
 *   <tr><th>setting</th><th>default</th><th>meaning</th></tr>
 *   <tr><td>{@code host}</td><td>{@code 127.0.0.1}</td><td>bind address; loopback unless set explicitly
 *       ({@code 0.0.0.0} binds every interface)</td></tr>
 *   <tr><td>{@code port}</td><td>0</td><td>0 = an ephemeral port ({@link TcpStoreServer#port()} tells which)</td></tr>
 *   <tr><td>{@code token}</td><td>none</td><td>job token: when set, every connection must pass the
 *       challenge-response first, and torch clients are refused</td></tr>
 *   <tr><td>{@code maxKeyBytes}</td><td>8 KiB</td><td>longest key</td></tr>
 *   <tr><td>{@code maxValueBytes}</td><td>8 MiB</td><td>longest value</td></tr>
 *   <tr><td>{@code maxKeysPerRequest}</td><td>131072</td><td>keys in one CHECK/WAIT/MULTI_GET/MULTI_SET</td></tr>
 *   <tr><td>{@code maxRequestBytes}</td><td>64 MiB</td><td>largest single request (all its fields)</td></tr>
 *   <tr><td>{@code maxStoreBytes}</td><td>1 GiB</td><td>all keys and values together</td></tr>
 *   <tr><td>{@code maxOpenConnections}</td><td>0 (from the descriptor limit)</td><td>connections of every
 *       kind together, each a file descriptor; 0 derives it at start from the process's descriptor limit
 *       (the JVM raises the soft limit to the hard one): the limit, less the descriptors open at start,
 *       less a reserve of 1/16 of the limit (at least 64) for the rest of the process. A connection
 *       that arrives at this bound closes the oldest connection without a complete request (one holding
 *       part of a request first, else a silent one), logged; when every connection is established, the
 *       newcomer is closed instead. Silent connections (a torch 1.13/2.0 client keeps one open for its
 *       whole life) are closed only here, under descriptor pressure</td></tr>
 *   <tr><td>{@code maxConnections}</td><td>none</td><td>an optional cap on established connections
 *       (those that completed a first request); one more is closed when it completes its first
 *       request</td></tr>
 *   <tr><td>{@code maxPendingConnections}</td><td>256</td><td>connections that sent part of a first request
 *       but not all of it (with a token: connections in the middle of the handshake); when one more
 *       starts a request, the oldest of them is closed (logged), so half-sent requests can never lock
 *       legitimate clients out. Silent connections are not counted here</td></tr>
 *   <tr><td>{@code backlog}</td><td>0 (the kernel's {@code somaxconn})</td><td>the listen backlog;
 *       the kernel caps it at {@code net.core.somaxconn}</td></tr>
 *   <tr><td>{@code expectedClients}</td><td>0 (unknown)</td><td>clients the job will connect (its
 *       {@code WORLD_SIZE}); when two connections per client (what a torch 1.13/2.0 client opens) exceed
 *       {@code maxOpenConnections}, the server warns at start</td></tr>
 *   <tr><td>{@code handshakeTimeout}</td><td>10 s</td><td>time a connection has to authenticate (token only)</td></tr>
 *   <tr><td>{@code incompleteRequestTimeout}</td><td>10 s</td><td>longest time a connection may hold part of a
 *       request (some bytes of a frame, not the whole frame) before it is closed (logged); counted from
 *       when its buffer first ended inside that frame, so a large request must arrive whole within it.
 *       Commands held behind a pending WAIT and a WAIT itself are not incomplete</td></tr>
 *   <tr><td>{@code legacyMode}</td><td>{@code AUTO}</td><td>how to read the command bytes 7 and 8 on a
 *       connection without VALIDATE (see {@link LegacyMode})</td></tr>
 *   <tr><td>{@code transport}</td><td>{@code AUTO}</td><td>epoll when available, else NIO</td></tr>
 *   <tr><td>{@code logConnections}</td><td>false</td><td>log open/close of every connection at INFO
 *       (otherwise DEBUG)</td></tr>
 *   <tr><td>{@code dataDir}</td><td>none (memory only)</td><td>keep the keys in this directory: every
 *       change is written through to an append-only, checksummed file ({@code store.log}) before the
 *       reply, and a server started on the directory resumes with every key (see {@link TcpStoreServer},
 *       "Durability"). One server per directory at a time</td></tr>
 *   <tr><td>{@code maxDataBytes}</td><td>4 GiB</td><td>bound of the data file; it is rewritten with the
 *       live keys when it has doubled since the last rewrite, and a change that would not fit even
 *       then is refused ("data file full"; the server goes on serving)</td></tr>
 *   <tr><td>{@code dataFsync}</td><td>false</td><td>force each change to the device before the reply:
 *       without it a killed store process loses nothing, but a crash of the machine may lose the last
 *       changes</td></tr>
 * </table>
 */
public final class TcpStoreServerConfig {

    /**
     * Connections that do not start with VALIDATE use the legacy numbering, shared by torch 1.13/2.0
     * and 2.1 except for command bytes 7 and 8 (1.13: WATCH_KEY, DELETE_KEY; 2.1: DELETE_KEY, APPEND).
     */
    public enum LegacyMode {
        /**
         * Decide per connection: bytes 9-11 (MULTI_GET, MULTI_SET, CANCEL_WAIT) mark 2.1; byte 8
         * followed at once by more bytes after its key is 2.1's APPEND (a 1.13 client waits for the
         * DELETE_KEY reply before sending anything), otherwise 1.13's DELETE_KEY; byte 7 as the
         * very first command is 1.13's WATCH_KEY (its callback connection), later 2.1's DELETE_KEY.
         */
        AUTO,
        /** Always 1.13/2.0 numbering. */
        TORCH_1_13,
        /** Always 2.1 numbering. */
        TORCH_2_1
    }

    /** Network transport of the server. */
    public enum Transport {
        AUTO, EPOLL, NIO
    }

    public static final String HOST_DEFAULT = "127.0.0.1";
    public static final int MAX_KEY_BYTES_DEFAULT = 8 * 1024;
    public static final int MAX_VALUE_BYTES_DEFAULT = 8 * 1024 * 1024;
    public static final int MAX_KEYS_PER_REQUEST_DEFAULT = 128 * 1024;
    public static final long MAX_REQUEST_BYTES_DEFAULT = 64L * 1024 * 1024;
    public static final long MAX_STORE_BYTES_DEFAULT = 1L << 30;
    /** No cap on established connections beyond {@code maxOpenConnections}. */
    public static final int MAX_CONNECTIONS_DEFAULT = Integer.MAX_VALUE;
    /** 0: derive the bound from the descriptor limit at start. */
    public static final int MAX_OPEN_CONNECTIONS_DEFAULT = 0;
    public static final int MAX_PENDING_CONNECTIONS_DEFAULT = 256;
    public static final Duration HANDSHAKE_TIMEOUT_DEFAULT = Duration.ofSeconds(10);
    public static final Duration INCOMPLETE_REQUEST_TIMEOUT_DEFAULT = Duration.ofSeconds(10);
    public static final long MAX_DATA_BYTES_DEFAULT = 4L << 30;
    /** Smallest data file bound accepted. */
    public static final long MAX_DATA_BYTES_MIN = 1L << 20;

    private final String host;
    private final int port;
    private final byte[] token;
    private final int maxKeyBytes;
    private final int maxValueBytes;
    private final int maxKeysPerRequest;
    private final long maxRequestBytes;
    private final long maxStoreBytes;
    private final int maxConnections;
    private final int maxPendingConnections;
    private final int maxOpenConnections;
    private final int backlog;
    private final int expectedClients;
    private final Duration handshakeTimeout;
    private final Duration incompleteRequestTimeout;
    private final LegacyMode legacyMode;
    private final Transport transport;
    private final boolean logConnections;
    private final String name;
    private final Path dataDir;
    private final long maxDataBytes;
    private final boolean dataFsync;

    private TcpStoreServerConfig(Builder b) {
        this.host = Objects.requireNonNull(b.host, "host");
        this.port = b.port;
        this.token = b.token == null ? null : JobToken.check(b.token, "server token");
        this.maxKeyBytes = b.maxKeyBytes;
        this.maxValueBytes = b.maxValueBytes;
        this.maxKeysPerRequest = b.maxKeysPerRequest;
        this.maxRequestBytes = b.maxRequestBytes;
        this.maxStoreBytes = b.maxStoreBytes;
        this.maxConnections = b.maxConnections;
        this.maxPendingConnections = b.maxPendingConnections;
        this.maxOpenConnections = b.maxOpenConnections;
        this.backlog = b.backlog;
        this.expectedClients = b.expectedClients;
        this.handshakeTimeout = Objects.requireNonNull(b.handshakeTimeout, "handshakeTimeout");
        this.incompleteRequestTimeout = Objects.requireNonNull(b.incompleteRequestTimeout, "incompleteRequestTimeout");
        this.legacyMode = Objects.requireNonNull(b.legacyMode, "legacyMode");
        this.transport = Objects.requireNonNull(b.transport, "transport");
        this.logConnections = b.logConnections;
        this.name = Objects.requireNonNull(b.name, "name");
        this.dataDir = b.dataDir;
        this.maxDataBytes = b.maxDataBytes;
        this.dataFsync = b.dataFsync;
        if (maxDataBytes < MAX_DATA_BYTES_MIN) {
            throw new IllegalArgumentException("maxDataBytes " + maxDataBytes + " is below " + MAX_DATA_BYTES_MIN);
        }
        if (port < 0 || port > 65535) {
            throw new IllegalArgumentException("port out of range: " + port);
        }
        if (maxKeyBytes < 1 || maxValueBytes < 0 || maxKeysPerRequest < 1 || maxConnections < 1
                || maxPendingConnections < 1 || maxOpenConnections < 0 || backlog < 0 || expectedClients < 0) {
            throw new IllegalArgumentException("limits must be positive: " + this);
        }
        if (maxRequestBytes < 1 + 8L + maxKeyBytes + 8L + maxValueBytes) {
            throw new IllegalArgumentException("maxRequestBytes " + maxRequestBytes
                    + " cannot hold one SET of the largest key and value");
        }
        if (maxRequestBytes > Integer.MAX_VALUE - 1024) {
            throw new IllegalArgumentException("maxRequestBytes must be below 2 GiB");
        }
        if (handshakeTimeout.isNegative() || handshakeTimeout.isZero()) {
            throw new IllegalArgumentException("handshakeTimeout must be positive");
        }
        if (incompleteRequestTimeout.isNegative() || incompleteRequestTimeout.isZero()) {
            throw new IllegalArgumentException("incompleteRequestTimeout must be positive");
        }
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Defaults: loopback, ephemeral port, no token. */
    public static TcpStoreServerConfig defaults() {
        return builder().build();
    }

    public String host() {
        return host;
    }

    public int port() {
        return port;
    }

    /** A copy of the token, if one is configured. */
    public Optional<byte[]> token() {
        return Optional.ofNullable(token).map(byte[]::clone);
    }

    public boolean hasToken() {
        return token != null;
    }

    byte[] tokenRef() {
        return token;
    }

    public int maxKeyBytes() {
        return maxKeyBytes;
    }

    public int maxValueBytes() {
        return maxValueBytes;
    }

    public int maxKeysPerRequest() {
        return maxKeysPerRequest;
    }

    public long maxRequestBytes() {
        return maxRequestBytes;
    }

    public long maxStoreBytes() {
        return maxStoreBytes;
    }

    /** Most established connections (that completed a first request). */
    public int maxConnections() {
        return maxConnections;
    }

    /** Most connections holding part of a first request; the oldest gives way to a newer one. */
    public int maxPendingConnections() {
        return maxPendingConnections;
    }

    /** Most connections of every kind together; 0 = derived from the descriptor limit at start. */
    public int maxOpenConnections() {
        return maxOpenConnections;
    }

    /** The listen backlog; 0 = the kernel's {@code somaxconn}. */
    public int backlog() {
        return backlog;
    }

    /** Clients the job will connect; 0 = unknown. */
    public int expectedClients() {
        return expectedClients;
    }

    public Duration handshakeTimeout() {
        return handshakeTimeout;
    }

    /** Longest time a connection may hold an incomplete request. */
    public Duration incompleteRequestTimeout() {
        return incompleteRequestTimeout;
    }

    public LegacyMode legacyMode() {
        return legacyMode;
    }

    public Transport transport() {
        return transport;
    }

    public boolean logConnections() {
        return logConnections;
    }

    /** Label used in log lines and thread names. */
    public String name() {
        return name;
    }

    /** The directory the keys are kept in; empty: in memory only (lost with the process). */
    public Optional<Path> dataDir() {
        return Optional.ofNullable(dataDir);
    }

    /** Bound of the data file. */
    public long maxDataBytes() {
        return maxDataBytes;
    }

    /** Whether every change is forced to the device before the reply. */
    public boolean dataFsync() {
        return dataFsync;
    }

    public Builder toBuilder() {
        Builder b = new Builder();
        b.dataDir = dataDir;
        b.maxDataBytes = maxDataBytes;
        b.dataFsync = dataFsync;
        b.host = host;
        b.port = port;
        b.token = token;
        b.maxKeyBytes = maxKeyBytes;
        b.maxValueBytes = maxValueBytes;
        b.maxKeysPerRequest = maxKeysPerRequest;
        b.maxRequestBytes = maxRequestBytes;
        b.maxStoreBytes = maxStoreBytes;
        b.maxConnections = maxConnections;
        b.maxPendingConnections = maxPendingConnections;
        b.maxOpenConnections = maxOpenConnections;
        b.backlog = backlog;
        b.expectedClients = expectedClients;
        b.handshakeTimeout = handshakeTimeout;
        b.incompleteRequestTimeout = incompleteRequestTimeout;
        b.legacyMode = legacyMode;
        b.transport = transport;
        b.logConnections = logConnections;
        b.name = name;
        return b;
    }

    @Override
    public String toString() {
        return "TcpStoreServerConfig{" + host + ":" + port + (token != null ? ", token" : "") + ", maxKey="
                + maxKeyBytes + ", maxValue=" + maxValueBytes + ", maxKeys=" + maxKeysPerRequest + ", maxRequest="
                + maxRequestBytes + ", maxStore=" + maxStoreBytes + ", maxConnections=" + maxConnections
                + ", maxPending=" + maxPendingConnections + ", maxOpen=" + maxOpenConnections + ", backlog=" + backlog
                + ", expectedClients=" + expectedClients + ", incompleteRequestTimeout=" + incompleteRequestTimeout
                + ", legacy=" + legacyMode + ", transport=" + transport
                + (dataDir != null ? ", data=" + dataDir + " (max " + maxDataBytes + (dataFsync ? ", fsync" : "") + ")" : "")
                + "}";
    }

    /** Mutable builder. */
    public static final class Builder {
        private String host = HOST_DEFAULT;
        private int port;
        private byte[] token;
        private int maxKeyBytes = MAX_KEY_BYTES_DEFAULT;
        private int maxValueBytes = MAX_VALUE_BYTES_DEFAULT;
        private int maxKeysPerRequest = MAX_KEYS_PER_REQUEST_DEFAULT;
        private long maxRequestBytes = MAX_REQUEST_BYTES_DEFAULT;
        private long maxStoreBytes = MAX_STORE_BYTES_DEFAULT;
        private int maxConnections = MAX_CONNECTIONS_DEFAULT;
        private int maxPendingConnections = MAX_PENDING_CONNECTIONS_DEFAULT;
        private int maxOpenConnections = MAX_OPEN_CONNECTIONS_DEFAULT;
        private int backlog;
        private int expectedClients;
        private Duration handshakeTimeout = HANDSHAKE_TIMEOUT_DEFAULT;
        private Duration incompleteRequestTimeout = INCOMPLETE_REQUEST_TIMEOUT_DEFAULT;
        private LegacyMode legacyMode = LegacyMode.AUTO;
        private Transport transport = Transport.AUTO;
        private boolean logConnections;
        private String name = "store";
        private Path dataDir;
        private long maxDataBytes = MAX_DATA_BYTES_DEFAULT;
        private boolean dataFsync;

        private Builder() {
        }

        /** Keep the keys in {@code dir} (created when absent); {@code null}: in memory only (the default). */
        public Builder dataDir(Path dir) { this.dataDir = dir; return this; }
        /** Bound of the data file (at least {@link #MAX_DATA_BYTES_MIN}). */
        public Builder maxDataBytes(long v) { this.maxDataBytes = v; return this; }
        /** Force every change to the device before the reply (survives a machine crash; slower). */
        public Builder dataFsync(boolean v) { this.dataFsync = v; return this; }

        /** Bind address. The default is loopback; anything else must be asked for here. */
        public Builder host(String v) { this.host = v; return this; }
        public Builder port(int v) { this.port = v; return this; }
        /** Job token (copied); {@code null} for none. */
        public Builder token(byte[] v) { this.token = v == null ? null : v.clone(); return this; }
        /** Reads the job token from a file ({@link JobToken#read}). */
        public Builder tokenFile(Path file) { this.token = JobToken.read(file); return this; }
        public Builder maxKeyBytes(int v) { this.maxKeyBytes = v; return this; }
        public Builder maxValueBytes(int v) { this.maxValueBytes = v; return this; }
        public Builder maxKeysPerRequest(int v) { this.maxKeysPerRequest = v; return this; }
        public Builder maxRequestBytes(long v) { this.maxRequestBytes = v; return this; }
        public Builder maxStoreBytes(long v) { this.maxStoreBytes = v; return this; }
        public Builder maxConnections(int v) { this.maxConnections = v; return this; }
        /** Cap on connections holding part of a first request (see the class documentation). */
        public Builder maxPendingConnections(int v) { this.maxPendingConnections = v; return this; }
        /** Bound on all connections together; 0 derives it from the descriptor limit. */
        public Builder maxOpenConnections(int v) { this.maxOpenConnections = v; return this; }
        /** Listen backlog; 0 = the kernel's {@code somaxconn}. */
        public Builder backlog(int v) { this.backlog = v; return this; }
        /** Clients the job will connect (its {@code WORLD_SIZE}), for the warning at start; 0 = unknown. */
        public Builder expectedClients(int v) { this.expectedClients = v; return this; }
        public Builder handshakeTimeout(Duration v) { this.handshakeTimeout = v; return this; }
        /** Longest time a connection may hold an incomplete request before it is closed. */
        public Builder incompleteRequestTimeout(Duration v) { this.incompleteRequestTimeout = v; return this; }
        public Builder legacyMode(LegacyMode v) { this.legacyMode = v; return this; }
        public Builder transport(Transport v) { this.transport = v; return this; }
        public Builder logConnections(boolean v) { this.logConnections = v; return this; }
        public Builder name(String v) { this.name = v; return this; }

        public TcpStoreServerConfig build() {
            return new TcpStoreServerConfig(this);
        }
    }
}
