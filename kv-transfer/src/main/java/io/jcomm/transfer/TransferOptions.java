package io.jcomm.transfer;

import io.jcomm.api.HostIdentity;
import io.jcomm.transfer.internal.Names;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;

/**
 * The immutable configuration of a {@link TransferAgent}. Build with {@link #builder(String)}; every
 * value is checked by {@link Builder#build()}, and a token file is read there, once.
 */
public final class TransferOptions {

    public static final String NAMESPACE_DEFAULT = "jcomm/transfer";
    public static final String LISTEN_HOST_DEFAULT = "127.0.0.1";
    public static final int TCP_STREAMS_DEFAULT = 2;
    public static final int TCP_CHUNK_BYTES_DEFAULT = 4 << 20;
    /** The largest tcp chunk the wire protocol carries; an owner refuses (and disconnects) anything larger. */
    public static final int TCP_CHUNK_BYTES_MAX = 64 << 20;
    public static final Duration TIMEOUT_DEFAULT = Duration.ofSeconds(30);
    public static final Duration CONNECT_TIMEOUT_DEFAULT = Duration.ofSeconds(10);
    public static final int NOTIFICATION_QUEUE_DEFAULT = 4096;
    public static final int MAX_NOTIFICATION_BYTES_DEFAULT = 64 << 10;
    /** The largest notification the wire protocol carries. */
    public static final int MAX_NOTIFICATION_BYTES_LIMIT = 1 << 20;
    public static final Duration NOTIFICATION_OFFER_TIMEOUT_DEFAULT = Duration.ofSeconds(1);
    public static final Duration PEER_SILENCE_TIMEOUT_DEFAULT = Duration.ofSeconds(3);
    /** The shortest {@link #peerSilenceTimeout()} accepted. */
    public static final Duration PEER_SILENCE_TIMEOUT_MIN = Duration.ofMillis(300);
    public static final int MAX_REGIONS_DEFAULT = 4096;
    public static final Path SHM_DIRECTORY_DEFAULT = Path.of("/dev/shm");
    public static final int TOKEN_MIN_BYTES = io.jcomm.runtime.TokenFiles.MIN_BYTES;
    public static final int TOKEN_MAX_BYTES = io.jcomm.runtime.TokenFiles.MAX_BYTES;

    private final String name;
    private final String namespace;
    private final String listenHost;
    private final String advertiseHost;
    private final int listenPort;
    private final byte[] token;
    private final int tcpStreams;
    private final int tcpChunkBytes;
    private final Duration timeout;
    private final Duration connectTimeout;
    private final int notificationQueueCapacity;
    private final int maxNotificationBytes;
    private final Duration notificationOfferTimeout;
    private final Duration peerSilenceTimeout;
    private final int maxRegions;
    private final Path shmDirectory;
    private final Set<String> transports;
    private final String hostId;

    private TransferOptions(Builder b) {
        this.name = b.name;
        this.namespace = b.namespace;
        this.listenHost = b.listenHost;
        this.advertiseHost = b.advertiseHost != null ? b.advertiseHost : b.listenHost;
        this.listenPort = b.listenPort;
        this.token = b.token;
        this.tcpStreams = b.tcpStreams;
        this.tcpChunkBytes = b.tcpChunkBytes;
        this.timeout = b.timeout;
        this.connectTimeout = b.connectTimeout;
        this.notificationQueueCapacity = b.notificationQueueCapacity;
        this.maxNotificationBytes = b.maxNotificationBytes;
        this.notificationOfferTimeout = b.notificationOfferTimeout;
        this.peerSilenceTimeout = b.peerSilenceTimeout;
        this.maxRegions = b.maxRegions;
        this.shmDirectory = b.shmDirectory;
        this.transports = b.transports == null ? null : Set.copyOf(b.transports);
        this.hostId = b.hostId != null ? b.hostId : HostIdentity.local();
    }

    /** Options for an agent named {@code name} (1 to 128 characters of {@code [A-Za-z0-9_.:-]}). */
    public static Builder builder(String name) {
        return new Builder(name);
    }

    /** The agent's name, unique within the store's {@link #namespace()}. */
    public String name() { return name; }
    /** The store prefix under which agents publish themselves ({@value #NAMESPACE_DEFAULT}). */
    public String namespace() { return namespace; }
    /** The address the tcp transport listens on ({@value #LISTEN_HOST_DEFAULT}: same host only). */
    public String listenHost() { return listenHost; }
    /** The address peers are told to connect to (defaults to {@link #listenHost()}). */
    public String advertiseHost() { return advertiseHost; }
    /** The tcp port (0: any free port). */
    public int listenPort() { return listenPort; }
    /** The job token agents authenticate each other with (HMAC challenge, never sent), if configured. */
    public Optional<byte[]> token() { return Optional.ofNullable(token).map(byte[]::clone); }
    /**
     * Parallel tcp connections per peer for large transfers ({@value #TCP_STREAMS_DEFAULT}), which are split over
     * them; small transfers (at most 256 KiB), notifications and heartbeats take one more connection of their own,
     * so that they never wait behind a large transfer's bytes.
     */
    public int tcpStreams() { return tcpStreams; }
    /** Largest piece a tcp transfer is split into ({@value #TCP_CHUNK_BYTES_DEFAULT}). */
    public int tcpChunkBytes() { return tcpChunkBytes; }
    /** Deadline of transfers and store look-ups that name none (30 s). */
    public Duration timeout() { return timeout; }
    /** Deadline of connecting to and authenticating with a peer (10 s). */
    public Duration connectTimeout() { return connectTimeout; }
    /** Notifications kept until {@link TransferAgent#pollNotification} takes them ({@value #NOTIFICATION_QUEUE_DEFAULT}). */
    public int notificationQueueCapacity() { return notificationQueueCapacity; }
    /** Largest notification accepted or sent ({@value #MAX_NOTIFICATION_BYTES_DEFAULT}). */
    public int maxNotificationBytes() { return maxNotificationBytes; }
    /** How long a full notification queue is waited on before the sender's transfer fails (1 s). */
    public Duration notificationOfferTimeout() { return notificationOfferTimeout; }
    /**
     * How long a connected tcp peer may stay silent before it is counted lost (3 s): an initiator sends a
     * heartbeat every third of it, and fails every pending transfer to a peer that answered nothing for this
     * long with a {@link io.jcomm.api.PeerFailureException} (a cut link, a lost host, a stopped process: none of
     * them closes the connection); an owner closes the connections of an initiator silent for this long, ending
     * its half-received transfers (their regions are released; what landed stays).
     */
    public Duration peerSilenceTimeout() { return peerSilenceTimeout; }
    /** Most regions registered at once ({@value #MAX_REGIONS_DEFAULT}). */
    public int maxRegions() { return maxRegions; }
    /** Where shared regions' files go ({@code /dev/shm}). */
    public Path shmDirectory() { return shmDirectory; }
    /** The transports to use by name; empty means every available one found by {@code ServiceLoader}. */
    public Optional<Set<String>> transports() { return Optional.ofNullable(transports); }
    /** This host's identity ({@link HostIdentity#local()}): agents with equal ids may use shared memory. */
    public String hostId() { return hostId; }

    @Override
    public String toString() {
        return "TransferOptions[name=" + name + ", namespace=" + namespace + ", listen=" + listenHost + ":" + listenPort
                + ", advertise=" + advertiseHost + ", token=" + (token != null ? "set" : "none") + ", tcpStreams=" + tcpStreams
                + ", tcpChunkBytes=" + tcpChunkBytes + ", timeout=" + timeout + ", peerSilenceTimeout=" + peerSilenceTimeout + ", transports="
                + (transports == null ? "all" : transports) + ", hostId=" + hostId + "]";
    }

    /** Builds {@link TransferOptions}. Not thread safe. */
    public static final class Builder {
        private final String name;
        private String namespace = NAMESPACE_DEFAULT;
        private String listenHost = LISTEN_HOST_DEFAULT;
        private String advertiseHost;
        private int listenPort;
        private byte[] token;
        private Path tokenFile;
        private int tcpStreams = TCP_STREAMS_DEFAULT;
        private int tcpChunkBytes = TCP_CHUNK_BYTES_DEFAULT;
        private Duration timeout = TIMEOUT_DEFAULT;
        private Duration connectTimeout = CONNECT_TIMEOUT_DEFAULT;
        private int notificationQueueCapacity = NOTIFICATION_QUEUE_DEFAULT;
        private int maxNotificationBytes = MAX_NOTIFICATION_BYTES_DEFAULT;
        private Duration notificationOfferTimeout = NOTIFICATION_OFFER_TIMEOUT_DEFAULT;
        private Duration peerSilenceTimeout = PEER_SILENCE_TIMEOUT_DEFAULT;
        private int maxRegions = MAX_REGIONS_DEFAULT;
        private Path shmDirectory = SHM_DIRECTORY_DEFAULT;
        private Set<String> transports;
        private String hostId;

        private Builder(String name) {
            this.name = name;
        }

        public Builder namespace(String v) { this.namespace = Objects.requireNonNull(v); return this; }
        public Builder listenHost(String v) { this.listenHost = Objects.requireNonNull(v); return this; }
        public Builder advertiseHost(String v) { this.advertiseHost = v; return this; }
        public Builder listenPort(int v) { this.listenPort = v; return this; }
        /** The job token (16 to 4096 bytes). */
        public Builder token(byte[] v) { this.token = v == null ? null : v.clone(); return this; }
        /** A file holding the job token (text or bytes; trailing white space ignored), read by {@link #build()}. */
        public Builder tokenFile(Path v) { this.tokenFile = v; return this; }
        public Builder tcpStreams(int v) { this.tcpStreams = v; return this; }
        public Builder tcpChunkBytes(int v) { this.tcpChunkBytes = v; return this; }
        public Builder timeout(Duration v) { this.timeout = Objects.requireNonNull(v); return this; }
        public Builder connectTimeout(Duration v) { this.connectTimeout = Objects.requireNonNull(v); return this; }
        public Builder notificationQueueCapacity(int v) { this.notificationQueueCapacity = v; return this; }
        public Builder maxNotificationBytes(int v) { this.maxNotificationBytes = v; return this; }
        public Builder notificationOfferTimeout(Duration v) { this.notificationOfferTimeout = Objects.requireNonNull(v); return this; }
        public Builder peerSilenceTimeout(Duration v) { this.peerSilenceTimeout = Objects.requireNonNull(v); return this; }
        public Builder maxRegions(int v) { this.maxRegions = v; return this; }
        public Builder shmDirectory(Path v) { this.shmDirectory = Objects.requireNonNull(v); return this; }
        /** Only these transports (by provider name, e.g. {@code tcp}); null for every available one. */
        public Builder transports(Set<String> v) { this.transports = v == null ? null : Set.copyOf(v); return this; }
        public Builder hostId(String v) { this.hostId = v; return this; }

        /**
         * Checks every value and reads the token file, if any.
         *
         * @throws IllegalArgumentException naming the first invalid value
         * @throws UncheckedIOException when the token file cannot be read
         */
        public TransferOptions build() {
            String problem = Names.problem(name);
            if (problem != null) {
                throw new IllegalArgumentException(problem);
            }
            if (namespace.isEmpty() || namespace.length() > 256) {
                throw new IllegalArgumentException("namespace must have 1..256 characters");
            }
            if (listenPort < 0 || listenPort > 65535) {
                throw new IllegalArgumentException("listenPort " + listenPort + " outside 0..65535");
            }
            if (tcpStreams < 1 || tcpStreams > 64) {
                throw new IllegalArgumentException("tcpStreams " + tcpStreams + " outside 1..64");
            }
            if (tcpChunkBytes < 4096 || tcpChunkBytes > TCP_CHUNK_BYTES_MAX) {
                throw new IllegalArgumentException("tcpChunkBytes " + tcpChunkBytes + " outside 4096.." + TCP_CHUNK_BYTES_MAX);
            }
            positive(timeout, "timeout");
            positive(connectTimeout, "connectTimeout");
            positive(notificationOfferTimeout, "notificationOfferTimeout");
            if (peerSilenceTimeout.compareTo(PEER_SILENCE_TIMEOUT_MIN) < 0) {
                throw new IllegalArgumentException("peerSilenceTimeout must be at least " + PEER_SILENCE_TIMEOUT_MIN.toMillis()
                        + " ms, got " + peerSilenceTimeout);
            }
            if (notificationQueueCapacity < 1 || notificationQueueCapacity > 1 << 20) {
                throw new IllegalArgumentException("notificationQueueCapacity " + notificationQueueCapacity + " outside 1..2^20");
            }
            if (maxNotificationBytes < 0 || maxNotificationBytes > MAX_NOTIFICATION_BYTES_LIMIT) {
                throw new IllegalArgumentException("maxNotificationBytes " + maxNotificationBytes + " outside 0.." + MAX_NOTIFICATION_BYTES_LIMIT);
            }
            if (maxRegions < 1 || maxRegions > 1 << 20) {
                throw new IllegalArgumentException("maxRegions " + maxRegions + " outside 1..2^20");
            }
            if (token != null && tokenFile != null) {
                throw new IllegalArgumentException("give either token or tokenFile, not both");
            }
            if (tokenFile != null) {
                token = readToken(tokenFile);
            }
            if (token != null && (token.length < TOKEN_MIN_BYTES || token.length > TOKEN_MAX_BYTES)) {
                throw new IllegalArgumentException("a job token has " + TOKEN_MIN_BYTES + ".." + TOKEN_MAX_BYTES
                        + " bytes, got " + token.length);
            }
            return new TransferOptions(this);
        }

        private static void positive(Duration d, String what) {
            if (d.isNegative() || d.isZero()) {
                throw new IllegalArgumentException(what + " must be positive, got " + d);
            }
        }

        private static byte[] readToken(Path file) {
            try {
                return io.jcomm.runtime.TokenFiles.read(file);
            } catch (IOException e) {
                throw new UncheckedIOException("cannot read job token file " + file, e);
            }
        }
    }
}
