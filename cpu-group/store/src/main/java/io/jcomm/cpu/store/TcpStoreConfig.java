package io.jcomm.cpu.store;

import io.jcomm.api.DistributedConfig;
import io.jcomm.cpu.store.internal.Members;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;

/**
 * Immutable configuration of a {@link TcpStore} client.
 *
 * <table>
 *   <caption>Settings</caption>
 *   <tr><th>setting</th><th>default</th><th>meaning</th></tr>
 *   <tr><td>{@code host}, {@code port}</td><td>{@code 127.0.0.1}, 29500</td><td>the server</td></tr>
 *   <tr><td>{@code dialect}</td><td>{@link TcpStoreDialect#TORCH_1_13}</td><td>protocol generation</td></tr>
 *   <tr><td>{@code timeout}</td><td>60 s</td><td>{@link TcpStore#timeout()}: default wait, and the bound of
 *       every other call including (re)connecting</td></tr>
 *   <tr><td>{@code connectTimeout}</td><td>= timeout</td><td>bound of the first connection in
 *       {@link TcpStore#connect}</td></tr>
 *   <tr><td>{@code token}</td><td>none</td><td>job token for a server that demands one</td></tr>
 *   <tr><td>{@code maxKeyBytes}, {@code maxValueBytes}</td><td>8 KiB, 8 MiB</td><td>bounds on what is sent and
 *       accepted</td></tr>
 *   <tr><td>{@code probe}</td><td>true</td><td>send the jcomm capability probe on connect (off: behave
 *       exactly like a torch client)</td></tr>
 *   <tr><td>{@code group}, {@code rank}</td><td>{@code store}, -1</td><td>labels of error messages</td></tr>
 *   <tr><td>{@code member}</td><td>none</td><td>declare this client rank R of job J to a jcomm server
 *       ({@link Member}): when a declared client of J goes away without {@link TcpStore#close()}, the
 *       waits of J's other declared clients fail at once instead of at their timeout. Clients made
 *       from this configuration (e.g. {@code TcpStore.connect(store.config())}) declare the same
 *       identity. Nothing is sent for it to a torch server</td></tr>
 *   <tr><td>{@code reconnect}</td><td>{@link Reconnect#AUTO}</td><td>whether a call rides over a restart of
 *       the server: reconnects until its deadline and goes on (see {@link Reconnect})</td></tr>
 * </table>
 */
public final class TcpStoreConfig {

    public static final Duration TIMEOUT_DEFAULT = Duration.ofSeconds(60);

    /**
     * What a client does when the server it was talking to goes away (its connection breaks and new
     * ones are refused).
     *
     * <p>Riding over a restart means: every call keeps trying to reconnect to the same address until
     * its own deadline (a wait's timeout, else {@link TcpStoreConfig#timeout()}), then re-sends the
     * handshake (token, member declaration) and the call. Reads, waits, {@code set} and
     * {@code multiSet} are simply sent again. Changes that must not happen twice ({@code add},
     * {@code compareSet}, {@code append}, {@code deleteKey}) carry a request id that a jcomm server
     * remembers with the change (in its data file when it has one): a retry of a change that was made
     * before the reply was lost is answered with the first outcome and not applied again. Changes also
     * wait for the server's acknowledgment, so a {@code set} that returned is in the store (and in its
     * data file).
     */
    public enum Reconnect {
        /**
         * Ride over a restart only of a server that said, when this client connected, that it is durable
         * (it keeps its keys in a data directory, so a restarted one has them all); any other server
         * (a torch server, a jcomm server in memory only) is taken for gone once it has refused
         * connections for about 0.25 s, as torch's own client would fail: the launcher or elastic agent
         * then decides what happens to the job.
         */
        AUTO,
        /**
         * Ride over a restart of any server until the call's deadline. A server in memory only comes back
         * empty: waits for keys set before its restart then run to their timeout.
         */
        ALWAYS,
        /**
         * Never: the behaviour of torch's client. The handshake does not ask whether the server is
         * durable, and changes that must not happen twice are never sent again.
         */
        NEVER
    }

    /**
     * A job member's identity, declared to a jcomm server (the member-liveness extension).
     *
     * @param jobId the job, 1 to {@link DistributedConfig#MAX_JOB_ID_BYTES} bytes of UTF-8 without
     *              control characters; only clients of the same job are told about each other
     * @param rank  this process's rank in the job, {@code >= 0}; named in the other members' errors
     */
    public record Member(String jobId, int rank) {

        /** @throws IllegalArgumentException when the job id or the rank is out of bounds */
        public Member {
            String why = Members.checkJobId(jobId);
            if (why != null) {
                throw new IllegalArgumentException("bad member identity: " + why);
            }
            if (rank < 0) {
                throw new IllegalArgumentException("bad member identity: rank " + rank + " < 0");
            }
        }

        @Override
        public String toString() {
            return "rank " + rank + " of job " + jobId;
        }
    }

    private final String host;
    private final int port;
    private final TcpStoreDialect dialect;
    private final Duration timeout;
    private final Duration connectTimeout;
    private final byte[] token;
    private final int maxKeyBytes;
    private final int maxValueBytes;
    private final boolean probe;
    private final String group;
    private final int rank;
    private final Member member;
    private final Reconnect reconnect;

    private TcpStoreConfig(Builder b) {
        this.host = Objects.requireNonNull(b.host, "host");
        this.port = b.port;
        this.dialect = Objects.requireNonNull(b.dialect, "dialect");
        this.timeout = Objects.requireNonNull(b.timeout, "timeout");
        this.connectTimeout = b.connectTimeout != null ? b.connectTimeout : b.timeout;
        this.token = b.token == null ? null : JobToken.check(b.token, "client token");
        this.maxKeyBytes = b.maxKeyBytes;
        this.maxValueBytes = b.maxValueBytes;
        this.probe = b.probe;
        this.group = Objects.requireNonNull(b.group, "group");
        this.rank = b.rank;
        this.member = b.member;
        this.reconnect = Objects.requireNonNull(b.reconnect, "reconnect");
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("port out of range: " + port);
        }
        if (timeout.isNegative() || timeout.isZero() || connectTimeout.isNegative() || connectTimeout.isZero()) {
            throw new IllegalArgumentException("timeouts must be positive");
        }
        if (maxKeyBytes < 2 || maxValueBytes < 0) {
            throw new IllegalArgumentException("bad limits");
        }
        if (member != null && !probe && token == null) {
            throw new IllegalArgumentException("a member identity needs the capability probe (probe(false) was set)");
        }
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Host, port, timeout, rank and token file of a torchrun-style configuration. */
    public static Builder builder(DistributedConfig dc) {
        Builder b = builder().host(dc.masterAddr()).port(dc.masterPort()).timeout(dc.timeout()).rank(dc.rank());
        dc.tokenFile().ifPresent(b::tokenFile);
        return b;
    }

    public String host() {
        return host;
    }

    public int port() {
        return port;
    }

    public TcpStoreDialect dialect() {
        return dialect;
    }

    public Duration timeout() {
        return timeout;
    }

    public Duration connectTimeout() {
        return connectTimeout;
    }

    public Optional<byte[]> token() {
        return Optional.ofNullable(token).map(byte[]::clone);
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

    public boolean probe() {
        return probe;
    }

    public String group() {
        return group;
    }

    public int rank() {
        return rank;
    }

    /** The member identity this client declares to a jcomm server, if any. */
    public Optional<Member> member() {
        return Optional.ofNullable(member);
    }

    /** What a call does when the server goes away ({@link Reconnect}). */
    public Reconnect reconnect() {
        return reconnect;
    }

    public Builder toBuilder() {
        Builder b = new Builder();
        b.reconnect = reconnect;
        b.host = host;
        b.port = port;
        b.dialect = dialect;
        b.timeout = timeout;
        b.connectTimeout = connectTimeout;
        b.token = token;
        b.maxKeyBytes = maxKeyBytes;
        b.maxValueBytes = maxValueBytes;
        b.probe = probe;
        b.group = group;
        b.rank = rank;
        b.member = member;
        return b;
    }

    @Override
    public String toString() {
        return "TcpStoreConfig{" + host + ":" + port + ", " + dialect + ", timeout=" + timeout
                + (token != null ? ", token" : "") + (probe ? "" : ", no probe")
                + (member != null ? ", member " + member : "")
                + (reconnect != Reconnect.AUTO ? ", reconnect " + reconnect : "") + "}";
    }

    /** Mutable builder. */
    public static final class Builder {
        private String host = "127.0.0.1";
        private int port = DistributedConfig.MASTER_PORT_DEFAULT;
        private TcpStoreDialect dialect = TcpStoreDialect.TORCH_1_13;
        private Duration timeout = TIMEOUT_DEFAULT;
        private Duration connectTimeout;
        private byte[] token;
        private int maxKeyBytes = TcpStoreServerConfig.MAX_KEY_BYTES_DEFAULT;
        private int maxValueBytes = TcpStoreServerConfig.MAX_VALUE_BYTES_DEFAULT;
        private boolean probe = true;
        private String group = "store";
        private int rank = -1;
        private Member member;
        private Reconnect reconnect = Reconnect.AUTO;

        private Builder() {
        }

        /** What a call does when the server goes away (default {@link Reconnect#AUTO}). */
        public Builder reconnect(Reconnect v) { this.reconnect = v; return this; }

        public Builder host(String v) { this.host = v; return this; }
        public Builder port(int v) { this.port = v; return this; }
        public Builder dialect(TcpStoreDialect v) { this.dialect = v; return this; }
        public Builder timeout(Duration v) { this.timeout = v; return this; }
        public Builder connectTimeout(Duration v) { this.connectTimeout = v; return this; }
        public Builder token(byte[] v) { this.token = v == null ? null : v.clone(); return this; }
        public Builder tokenFile(Path file) { this.token = JobToken.read(file); return this; }
        public Builder maxKeyBytes(int v) { this.maxKeyBytes = v; return this; }
        public Builder maxValueBytes(int v) { this.maxValueBytes = v; return this; }
        public Builder probe(boolean v) { this.probe = v; return this; }
        public Builder group(String v) { this.group = v; return this; }
        public Builder rank(int v) { this.rank = v; return this; }
        /** Declare this client rank {@code rank} of job {@code jobId} (see {@link Member}). */
        public Builder member(String jobId, int rank) { this.member = new Member(jobId, rank); return this; }
        /** The member identity to declare; {@code null}: none (the default). */
        public Builder member(Member v) { this.member = v; return this; }

        public TcpStoreConfig build() {
            return new TcpStoreConfig(this);
        }
    }
}
