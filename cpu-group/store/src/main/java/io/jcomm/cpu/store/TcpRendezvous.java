package io.jcomm.cpu.store;

import io.jcomm.runtime.Backoff;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.OpContext;
import io.jcomm.api.StoreException;
import io.jcomm.api.launch.LaunchInfo;
import io.jcomm.cpu.store.internal.Wire;
import java.time.Duration;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Objects;

/**
 * Makes the job's rendezvous store the torchrun way: one process (rank 0 unless told otherwise)
 * hosts a {@link TcpStoreServer} in-process on {@code MASTER_ADDR:MASTER_PORT}, and every process,
 * the host included, connects a {@link TcpStore} client to it. The job token, when
 * {@link DistributedConfig#tokenFile()} names one, is demanded by the server and presented by the
 * clients. Closing the host's store also stops its server. When a launcher hosts the store
 * ({@link DistributedConfig#launcherStore()}, as under {@code commrun}) no rank hosts one.
 *
 * <p>The server binds the address {@code MASTER_ADDR} names (loopback by default), so that the
 * configuration explicitly decides which interface is exposed.
 *
 * <p>Every client declares itself a member of the job ({@link TcpStoreConfig#member()}: rank
 * {@link DistributedConfig#rank()} of job {@link DistributedConfig#jobId()}), so that when a rank's
 * process dies the others' store waits fail within moments with a
 * {@link io.jcomm.api.PeerFailureException} naming it, instead of at their timeout. Close the store
 * before a rank exits: an exit without {@link TcpStore#close()} counts as a death.
 * {@link Options.Builder#declareMember(boolean)} turns this off.
 *
 * <pre>{@code
 * try (TcpStore store = TcpRendezvous.connect(DistributedConfig.fromEnvironment())) { ... }
 * }</pre>
 */
public final class TcpRendezvous {

    private TcpRendezvous() {
    }

    /** With default {@link Options}: rank 0 hosts, no worker counting, torch 1.13 dialect. */
    public static TcpStore connect(DistributedConfig config) {
        return connect(config, Options.defaults());
    }

    /**
     * Hosts (when this process is the host) and connects.
     *
     * @throws StoreException when the server cannot bind or the store cannot be reached
     * @throws CommTimeoutException        when worker counting does not reach the world size in time
     */
    public static TcpStore connect(DistributedConfig config, Options options) {
        Objects.requireNonNull(config, "config");
        Objects.requireNonNull(options, "options");
        boolean host = options.hostServer == null ? config.rank() == 0 && !config.launcherStore() : options.hostServer;
        TcpStoreServer server = null;
        if (host) {
            awaitResolvable(config);
            TcpStoreServerConfig.Builder sb = options.serverConfig.toBuilder()
                    .host(config.masterAddr()).port(config.masterPort()).token(null)
                    .expectedClients(config.worldSize());
            config.tokenFile().ifPresent(sb::tokenFile);
            try {
                server = TcpStoreServer.start(sb.build());
            } catch (StoreException e) {
                String port = config.launch().map(l -> l.source(LaunchInfo.Field.MASTER_PORT))
                        .orElse(null);
                throw new StoreException(OpContext.of("store", config.rank(), "rendezvous"), e.getMessage()
                        + " (rank 0 hosts the job's store on MASTER_ADDR:MASTER_PORT"
                        + (port != null ? ", the port from " + port : "")
                        + "; another job may hold the port: set MASTER_PORT to a free one)", e);
            }
        }
        TcpStoreConfig.Builder cb = TcpStoreConfig.builder(config).dialect(options.dialect);
        if (options.declareMember) {
            cb.member(config.jobId(), config.rank());
        }
        if (server != null) {
            cb.port(server.port());
        }
        TcpStore store;
        try {
            store = TcpStore.connect(cb.build(), server);
        } catch (RuntimeException e) {
            if (server != null) {
                server.close();
            }
            throw e;
        }
        if (options.waitForWorkers) {
            try {
                countWorkers(store, config, host);
            } catch (RuntimeException e) {
                store.close();
                throw e;
            }
        }
        return store;
    }

    /**
     * Waits until rank 0's own address resolves: a Kubernetes pod's DNS name appears only once the pod runs, so
     * the rank that hosts the store may look itself up before its record exists. Gives up at the config's
     * timeout.
     */
    private static void awaitResolvable(DistributedConfig config) {
        Deadline d = Deadline.after(config.timeout());
        Backoff pause = Backoff.doubling(Duration.ofMillis(50), Duration.ofSeconds(1));
        while (true) {
            try {
                InetAddress.getByName(config.masterAddr());
                return;
            } catch (UnknownHostException e) {
                if (d.isExpired()) {
                    throw new StoreException(OpContext.of("store", config.rank(), "rendezvous"),
                            "cannot resolve MASTER_ADDR " + config.masterAddr() + " to host the job's store within "
                                    + config.timeout().toMillis() + " ms", e);
                }
                pause.pause(d);
            }
        }
    }

    /** torch's {@code world_size} rendezvous: everyone ADDs 1 to {@code init/}; the host waits for all. */
    private static void countWorkers(TcpStore store, DistributedConfig config, boolean host) {
        long n = store.addUnprefixed(Wire.INIT_KEY, 1);
        if (!host) {
            return;
        }
        Deadline d = Deadline.after(config.timeout());
        Backoff pause = Backoff.doubling(Duration.ofMillis(1), Duration.ofMillis(10));
        while (n < config.worldSize()) {
            if (d.isExpired()) {
                throw new CommTimeoutException(OpContext.of("store", config.rank(), "rendezvous"),
                        "only " + n + " of " + config.worldSize() + " workers joined the store within "
                                + config.timeout().toMillis() + " ms");
            }
            pause.pause(d);
            n = store.addUnprefixed(Wire.INIT_KEY, 0);
        }
    }

    /** Immutable options of {@link #connect(DistributedConfig, Options)}. */
    public static final class Options {
        private final Boolean hostServer;
        private final boolean waitForWorkers;
        private final TcpStoreDialect dialect;
        private final TcpStoreServerConfig serverConfig;
        private final boolean declareMember;

        private Options(Builder b) {
            this.hostServer = b.hostServer;
            this.declareMember = b.declareMember;
            this.waitForWorkers = b.waitForWorkers;
            this.dialect = Objects.requireNonNull(b.dialect, "dialect");
            this.serverConfig = Objects.requireNonNull(b.serverConfig, "serverConfig");
        }

        public static Options defaults() {
            return builder().build();
        }

        public static Builder builder() {
            return new Builder();
        }

        /** A builder initialised with these options. */
        public Builder toBuilder() {
            return builder().hostServer(hostServer).waitForWorkers(waitForWorkers).dialect(dialect)
                    .serverConfig(serverConfig).declareMember(declareMember);
        }

        /** Mutable builder. */
        public static final class Builder {
            private Boolean hostServer;
            private boolean waitForWorkers;
            private TcpStoreDialect dialect = TcpStoreDialect.TORCH_1_13;
            private TcpStoreServerConfig serverConfig = TcpStoreServerConfig.defaults();
            private boolean declareMember = true;

            private Builder() {
            }

            /** Host the server in this process ({@code null}: when rank is 0 and no launcher hosts it). */
            public Builder hostServer(Boolean v) { this.hostServer = v; return this; }
            /** Count workers on {@code init/} like torch's {@code world_size} (the host waits for all). */
            public Builder waitForWorkers(boolean v) { this.waitForWorkers = v; return this; }
            public Builder dialect(TcpStoreDialect v) { this.dialect = v; return this; }
            /** Limits and transport of the hosted server; its host, port and token come from the config. */
            public Builder serverConfig(TcpStoreServerConfig v) { this.serverConfig = v; return this; }
            /**
             * Declare this rank a member of the job (default true): its death fails the other ranks'
             * waits at once (see the class documentation).
             */
            public Builder declareMember(boolean v) { this.declareMember = v; return this; }

            public Options build() {
                return new Options(this);
            }
        }
    }
}
