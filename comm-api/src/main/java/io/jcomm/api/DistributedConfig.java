package io.jcomm.api;

import io.jcomm.api.config.Settings;
import io.jcomm.api.launch.LaunchInfo;
import io.jcomm.api.launch.Launchers;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import org.slf4j.LoggerFactory;

/**
 * Immutable description of this process's place in a job: where the rendezvous store is, this
 * process's rank, and the job-wide choices. Built in code with {@link #builder()} or read once from
 * the environment ({@link #fromEnvironment()}): torchrun's variables, or what Slurm, an MPI runtime or a
 * Kubernetes controller sets ({@link Launchers}: the order, the precedence, and the port rule).
 *
 * <p>Where several launchers' variables are present (commrun inside a Slurm step, {@code RANK} set by hand
 * beside {@code SLURM_PROCID}), the one with the most tasks describes this process and the others must
 * agree with it: a contradiction is an {@link IllegalArgumentException} naming both variables.
 * {@code JCOMM_LAUNCHER} ({@code auto}, {@code torchrun}, {@code slurm}, {@code mpi}, {@code k8s},
 * {@code lws}) forces one.
 *
 * <p>The variables it reads, their defaults and meanings are declared in {@link Settings} (the table of
 * {@code docs/CONFIGURATION.md} is generated from it).
 */
public final class DistributedConfig {

    /**
     * Key (not under any prefix) that a launcher hosting the store sets once every worker of the job has
     * exited: a spare still waiting for a vacancy then stops waiting.
     */
    public static final String LAUNCHER_DONE_KEY = "jcomm/launcher/workers-done";

    public static final String MASTER_ADDR_DEFAULT = "127.0.0.1";
    public static final int MASTER_PORT_DEFAULT = 29500;
    public static final Duration TIMEOUT_DEFAULT = Duration.ofSeconds(60);
    public static final String JOB_ID_DEFAULT = "jcomm-job";
    /** Longest job id, in bytes of UTF-8. */
    public static final int MAX_JOB_ID_BYTES = 256;

    private final String masterAddr;
    private final int masterPort;
    private final int rank;
    private final int worldSize;
    private final int localRank;
    private final int localWorldSize;
    private final Duration timeout;
    private final String hostId;
    private final String hostname;
    private final String cpuBackend;
    private final String deviceCommunicator;
    private final Path tokenFile;
    private final boolean launcherStore;
    private final String jobId;
    private final DebugLevel debug;
    private final Role role;
    private final RecoveryPolicy recovery;
    private final LaunchInfo launch;

    /** What this process is in its job ({@code JCOMM_ROLE}). */
    public enum Role {
        /** A rank started with the job. */
        WORKER,
        /** Started again by its launcher to take the place of its rank, which was lost. */
        RESTARTED,
        /** Started ahead, waiting to take the place of the first rank lost; its configured rank is a placeholder. */
        SPARE
    }

    /** What the survivors of a rank loss do ({@code JCOMM_RECOVERY}). */
    public enum RecoveryPolicy {
        /** The data-parallel replicas that lost a rank leave; the others go on among themselves. */
        SHRINK,
        /** A restarted or spare process takes each lost rank's place; the layout stays as it was. */
        REPLACE
    }

    private DistributedConfig(Builder b) {
        this.masterAddr = Objects.requireNonNull(b.masterAddr, "masterAddr");
        this.masterPort = b.masterPort;
        this.rank = b.rank;
        this.worldSize = b.worldSize;
        this.localRank = b.localRank < 0 ? b.rank : b.localRank;
        this.localWorldSize = b.localWorldSize < 0 ? b.worldSize : b.localWorldSize;
        this.timeout = Objects.requireNonNull(b.timeout, "timeout");
        this.hostId = b.hostId != null ? b.hostId : defaultHostId();
        this.hostname = b.hostname;
        this.cpuBackend = Objects.requireNonNull(b.cpuBackend, "cpuBackend");
        this.deviceCommunicator = Objects.requireNonNull(b.deviceCommunicator, "deviceCommunicator");
        this.tokenFile = b.tokenFile;
        this.launcherStore = b.launcherStore;
        this.jobId = Objects.requireNonNull(b.jobId, "jobId");
        this.debug = Objects.requireNonNull(b.debug, "debug");
        this.role = Objects.requireNonNull(b.role, "role");
        this.recovery = Objects.requireNonNull(b.recovery, "recovery");
        this.launch = b.launch;
        if (masterPort < 0 || masterPort > 65535) {
            throw new IllegalArgumentException(Settings.MASTER_PORT.name() + " out of range: " + masterPort);
        }
        if (worldSize < 1) {
            throw new IllegalArgumentException(Settings.WORLD_SIZE.name() + " must be >= 1, got " + worldSize);
        }
        if (rank < 0 || rank >= worldSize) {
            throw new IllegalArgumentException(Settings.RANK.name() + " " + rank + " not in [0, " + worldSize + ")");
        }
        if (localWorldSize < 1 || localWorldSize > worldSize) {
            throw new IllegalArgumentException(Settings.LOCAL_WORLD_SIZE.name() + " " + localWorldSize + " not in [1, " + worldSize + "]");
        }
        if (localRank < 0 || localRank >= localWorldSize) {
            throw new IllegalArgumentException(Settings.LOCAL_RANK.name() + " " + localRank + " not in [0, " + localWorldSize + ")");
        }
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive, got " + timeout);
        }
        int jobIdBytes = jobId.getBytes(StandardCharsets.UTF_8).length;
        if (jobId.isEmpty() || jobIdBytes > MAX_JOB_ID_BYTES) {
            throw new IllegalArgumentException(Settings.JOB_ID.name() + " must be 1 to " + MAX_JOB_ID_BYTES + " bytes of UTF-8, got "
                    + jobIdBytes);
        }
    }

    private static String defaultHostId() {
        return HostIdentity.local();
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Reads {@link System#getenv()} once, and logs one line saying which launcher was found and from which
     * variables each value came: at INFO on rank 0, at DEBUG on the others (a job of a thousand ranks prints it
     * once), at WARN on every rank when the process looks misplaced (a Slurm job's batch script outside a step).
     */
    public static DistributedConfig fromEnvironment() {
        DistributedConfig c = fromEnvironment(System.getenv());
        LaunchInfo l = c.launch;
        org.slf4j.Logger log = LoggerFactory.getLogger(DistributedConfig.class);
        if (l.launcher().equals("none") && l.context() != null) {
            log.warn("jcomm launcher: {}", l.describe());
        } else if (c.rank == 0) {
            log.info("jcomm launcher: {}", l.describe());
        } else {
            log.debug("jcomm launcher: {}", l.describe());
        }
        return c;
    }

    /**
     * Reads the variables listed in the class documentation from {@code env}: the launcher's through
     * {@link Launchers#resolve(Map)}, the SDK's own ({@code JCOMM_*}) here.
     *
     * @throws IllegalArgumentException naming the variable when a value is malformed, or naming both when
     *                                  two launchers' variables contradict each other
     */
    public static DistributedConfig fromEnvironment(Map<String, String> env) {
        Builder b = builder();
        LaunchInfo launch = Launchers.resolve(env);
        b.launch(launch).masterAddr(launch.masterAddr()).masterPort(launch.masterPort()).rank(launch.rank())
                .worldSize(launch.worldSize());
        if (launch.localRank() != LaunchInfo.UNKNOWN) {
            b.localRank(launch.localRank());
        }
        if (launch.localWorldSize() != LaunchInfo.UNKNOWN) {
            b.localWorldSize(launch.localWorldSize());
        }
        if (launch.jobId() != null) {
            b.jobId(launch.jobId());
        }
        Settings.TIMEOUT_MS.intValue(env).ifPresent(ms -> b.timeout(Duration.ofMillis(ms)));
        Settings.HOST_ID.value(env).ifPresent(b::hostId);
        Settings.HOSTNAME.value(env).ifPresent(b::hostname);
        Settings.CPU_BACKEND.value(env).ifPresent(b::cpuBackend);
        Settings.DEVICE_COMM.value(env).ifPresent(b::deviceCommunicator);
        Settings.TOKEN_FILE.value(env).ifPresent(f -> b.tokenFile(Path.of(f)));
        Settings.LAUNCHER_STORE.flag(env).ifPresent(b::launcherStore);
        Settings.JOB_ID.value(env).ifPresent(b::jobId);
        Settings.DEBUG.value(env).ifPresent(d -> {
            try {
                b.debug(DebugLevel.parse(d));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(Settings.DEBUG.name() + " is " + e.getMessage(), e);
            }
        });
        Settings.ROLE.enumValue(env, Role.class).ifPresent(b::role);
        Settings.RECOVERY.enumValue(env, RecoveryPolicy.class).ifPresent(b::recovery);
        return b.build();
    }

    public String masterAddr() {
        return masterAddr;
    }

    public int masterPort() {
        return masterPort;
    }

    public int rank() {
        return rank;
    }

    public int worldSize() {
        return worldSize;
    }

    public int localRank() {
        return localRank;
    }

    public int localWorldSize() {
        return localWorldSize;
    }

    public Duration timeout() {
        return timeout;
    }

    /** Identity of this host for same-host detection; ranks with equal ids share memory. */
    public String hostId() {
        return hostId;
    }

    /**
     * The address other ranks use to reach this process: {@code JCOMM_HOSTNAME} when set; else
     * {@code 127.0.0.1} when {@code MASTER_ADDR} is a loopback address (a one-host job); else the
     * local address of this host's route to {@code MASTER_ADDR} (found without sending anything),
     * which is the interface the other nodes reach too in the usual one-network cluster.
     */
    public String hostname() {
        if (hostname != null) {
            return hostname;
        }
        try {
            InetAddress master = InetAddress.getByName(masterAddr);
            if (master.isLoopbackAddress()) {
                return "127.0.0.1";
            }
            try (java.net.DatagramSocket probe = new java.net.DatagramSocket()) {
                probe.connect(master, masterPort == 0 ? MASTER_PORT_DEFAULT : masterPort);
                InetAddress local = probe.getLocalAddress();
                if (local != null && !local.isAnyLocalAddress()) {
                    return local.getHostAddress();
                }
            }
            return InetAddress.getLocalHost().getHostAddress();
        } catch (java.io.IOException | SecurityException e) {
            return "127.0.0.1";
        }
    }

    public String cpuBackend() {
        return cpuBackend;
    }

    public String deviceCommunicator() {
        return deviceCommunicator;
    }

    public Optional<Path> tokenFile() {
        return Optional.ofNullable(tokenFile);
    }

    /**
     * Whether a launcher (e.g. {@code commrun}) hosts the store, so that no rank of the job hosts one
     * ({@code JCOMM_LAUNCHER_STORE}).
     */
    public boolean launcherStore() {
        return launcherStore;
    }

    /**
     * The job's identity ({@code JCOMM_JOB_ID}, else {@code TORCHELASTIC_RUN_ID}, else
     * {@value #JOB_ID_DEFAULT}): ranks declare themselves to the store under it, and the store tells
     * the ranks of one job when one of them dies.
     */
    public String jobId() {
        return jobId;
    }

    /** The debug level ({@code JCOMM_DEBUG}): {@link DebugLevel#OFF} unless asked for. */
    public DebugLevel debug() {
        return debug;
    }

    /** What this process is in its job ({@code JCOMM_ROLE}): {@link Role#WORKER} unless a launcher says otherwise. */
    public Role role() {
        return role;
    }

    /** What the survivors of a rank loss do ({@code JCOMM_RECOVERY}): {@link RecoveryPolicy#SHRINK} by default. */
    public RecoveryPolicy recovery() {
        return recovery;
    }

    /**
     * What the launcher said when this configuration was read from the environment (which launcher, and
     * which variable each value came from); empty for a configuration built in code.
     */
    public Optional<LaunchInfo> launch() {
        return Optional.ofNullable(launch);
    }

    /** A builder initialised with this configuration's values. */
    public Builder toBuilder() {
        return builder().masterAddr(masterAddr).masterPort(masterPort).rank(rank).worldSize(worldSize)
                .localRank(localRank).localWorldSize(localWorldSize).timeout(timeout).hostId(hostId).hostname(hostname)
                .cpuBackend(cpuBackend).deviceCommunicator(deviceCommunicator).tokenFile(tokenFile)
                .launcherStore(launcherStore).jobId(jobId).debug(debug).role(role).recovery(recovery).launch(launch);
    }

    @Override
    public String toString() {
        return "DistributedConfig{master=" + masterAddr + ":" + masterPort + ", rank=" + rank + "/" + worldSize
                + ", local=" + localRank + "/" + localWorldSize + ", host=" + hostId + ", timeout=" + timeout
                + ", cpu=" + cpuBackend + ", device=" + deviceCommunicator
                + (tokenFile != null ? ", token=" + tokenFile : "") + (launcherStore ? ", launcher store" : "") + ", job=" + jobId
                + (debug != DebugLevel.OFF ? ", debug=" + debug.name().toLowerCase(Locale.ROOT) : "")
                + (role != Role.WORKER ? ", role=" + role.name().toLowerCase(Locale.ROOT) : "")
                + (recovery != RecoveryPolicy.SHRINK ? ", recovery=" + recovery.name().toLowerCase(Locale.ROOT) : "") + "}";
    }

    /** Mutable builder; {@link #build()} validates and returns an immutable config. */
    public static final class Builder {
        private String masterAddr = MASTER_ADDR_DEFAULT;
        private int masterPort = MASTER_PORT_DEFAULT;
        private int rank = 0;
        private int worldSize = 1;
        private int localRank = -1;
        private int localWorldSize = -1;
        private Duration timeout = TIMEOUT_DEFAULT;
        private String hostId;
        private String hostname;
        private String cpuBackend = "auto";
        private String deviceCommunicator = "auto";
        private Path tokenFile;
        private boolean launcherStore;
        private String jobId = JOB_ID_DEFAULT;
        private DebugLevel debug = DebugLevel.OFF;
        private Role role = Role.WORKER;
        private RecoveryPolicy recovery = RecoveryPolicy.SHRINK;
        private LaunchInfo launch;

        private Builder() {
        }

        public Builder masterAddr(String v) { this.masterAddr = v; return this; }
        public Builder masterPort(int v) { this.masterPort = v; return this; }
        public Builder rank(int v) { this.rank = v; return this; }
        public Builder worldSize(int v) { this.worldSize = v; return this; }
        public Builder localRank(int v) { this.localRank = v; return this; }
        public Builder localWorldSize(int v) { this.localWorldSize = v; return this; }
        public Builder timeout(Duration v) { this.timeout = v; return this; }
        public Builder hostId(String v) { this.hostId = v; return this; }
        /** Address other ranks use to reach this process; {@code null}: derived (see {@link DistributedConfig#hostname()}). */
        public Builder hostname(String v) { this.hostname = v; return this; }
        public Builder cpuBackend(String v) { this.cpuBackend = v; return this; }
        public Builder deviceCommunicator(String v) { this.deviceCommunicator = v; return this; }
        public Builder tokenFile(Path v) { this.tokenFile = v; return this; }
        /** A launcher hosts the store; no rank hosts one. */
        public Builder launcherStore(boolean v) { this.launcherStore = v; return this; }
        /** The job's identity (1 to {@value DistributedConfig#MAX_JOB_ID_BYTES} bytes of UTF-8). */
        public Builder jobId(String v) { this.jobId = v; return this; }
        /** The debug level ({@code JCOMM_DEBUG}). */
        public Builder debug(DebugLevel v) { this.debug = v; return this; }
        /** What this process is in its job ({@code JCOMM_ROLE}). */
        public Builder role(Role v) { this.role = v; return this; }
        /** What the survivors of a rank loss do ({@code JCOMM_RECOVERY}). */
        public Builder recovery(RecoveryPolicy v) { this.recovery = v; return this; }
        /** What the launcher said ({@link DistributedConfig#launch()}); {@code null}: built in code. */
        public Builder launch(LaunchInfo v) { this.launch = v; return this; }

        public DistributedConfig build() {
            return new DistributedConfig(this);
        }
    }
}
