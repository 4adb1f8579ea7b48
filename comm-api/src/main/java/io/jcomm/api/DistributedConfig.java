package io.jcomm.api;

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
 * <table>
 *   <caption>Environment variables</caption>
 *   <tr><th>variable</th><th>meaning</th><th>default</th></tr>
 *   <tr><td>{@code MASTER_ADDR}</td><td>store host</td><td>the launcher's (Slurm: first host of the step's node
 *       list), else {@code 127.0.0.1}</td></tr>
 *   <tr><td>{@code MASTER_PORT}</td><td>store port</td><td>the launcher's (Slurm, Open MPI: derived from the job
 *       id), else {@code 29500}</td></tr>
 *   <tr><td>{@code RANK}</td><td>global rank</td><td>the launcher's, else {@code 0}</td></tr>
 *   <tr><td>{@code WORLD_SIZE}</td><td>number of processes</td><td>the launcher's, else {@code 1}</td></tr>
 *   <tr><td>{@code LOCAL_RANK}</td><td>rank on this host</td><td>the launcher's, else {@code RANK}</td></tr>
 *   <tr><td>{@code LOCAL_WORLD_SIZE}</td><td>processes on this host</td><td>the launcher's, else {@code WORLD_SIZE}</td></tr>
 *   <tr><td>{@code JCOMM_LAUNCHER}</td><td>{@code auto}, or the launcher to follow ({@link Launchers})</td><td>{@code auto}</td></tr>
 *   <tr><td>{@code JCOMM_TIMEOUT_MS}</td><td>default timeout of every blocking call</td><td>{@code 60000}</td></tr>
 *   <tr><td>{@code JCOMM_HOST_ID}</td><td>identity of this host for same-host detection ({@link HostIdentity})</td><td>kernel boot id {@code @} host name</td></tr>
 *   <tr><td>{@code JCOMM_HOSTNAME}</td><td>address other ranks use to reach this process (CPU-group
 *       listeners bind to it)</td><td>{@code 127.0.0.1} when {@code MASTER_ADDR} is a loopback address,
 *       else this host's address on the route to {@code MASTER_ADDR}</td></tr>
 *   <tr><td>{@code JCOMM_CPU_BACKEND}</td><td>{@code auto}, {@code tcp} or {@code gloo}</td><td>{@code auto}</td></tr>
 *   <tr><td>{@code JCOMM_DEVICE_COMM}</td><td>device communicator provider name or {@code auto}</td><td>{@code auto}</td></tr>
 *   <tr><td>{@code JCOMM_TOKEN_FILE}</td><td>file holding the job token for the store</td><td>none</td></tr>
 *   <tr><td>{@code JCOMM_LAUNCHER_STORE}</td><td>{@code 1}: a launcher ({@code commrun}) already hosts the
 *       store at {@code MASTER_ADDR:MASTER_PORT}, so no rank hosts one (torchrun's agent store)</td><td>{@code 0}</td></tr>
 *   <tr><td>{@code JCOMM_JOB_ID}</td><td>identity of the job, under which each rank declares itself to the
 *       store so that a rank that dies is noticed by the others (at most {@value #MAX_JOB_ID_BYTES} bytes of
 *       UTF-8)</td><td>{@code TORCHELASTIC_RUN_ID} when set, else the launcher's ({@code slurm-<job>.<step>},
 *       {@code mpi-<job>}, {@code lws-<leader>}), else {@value #JOB_ID_DEFAULT}</td></tr>
 *   <tr><td>{@code JCOMM_ROLE}</td><td>{@code worker}; {@code restarted}: a launcher restarted this process to
 *       take the place of rank {@code RANK}, lost earlier; {@code spare}: a waiting process that takes the place of
 *       whichever rank is lost first ({@code RANK} is then only a placeholder)</td><td>{@code worker}</td></tr>
 *   <tr><td>{@code JCOMM_RECOVERY}</td><td>what the survivors of a rank loss do ({@code ParallelState.recover()}):
 *       {@code shrink} (the replicas that lost a rank leave) or {@code replace} (a restarted or spare process takes
 *       the lost rank's place)</td><td>{@code shrink}</td></tr>
 *   <tr><td>{@code JCOMM_DEBUG}</td><td>{@code off} or {@code detail}: ranks compare each device collective's
 *       fingerprint over the CPU group, and gloo's argument check is forced on ({@link DebugLevel#DETAIL})</td><td>{@code off}</td></tr>
 * </table>
 */
public final class DistributedConfig {

    public static final String MASTER_ADDR = "MASTER_ADDR";
    public static final String MASTER_PORT = "MASTER_PORT";
    public static final String RANK = "RANK";
    public static final String WORLD_SIZE = "WORLD_SIZE";
    public static final String LOCAL_RANK = "LOCAL_RANK";
    public static final String LOCAL_WORLD_SIZE = "LOCAL_WORLD_SIZE";
    public static final String TIMEOUT_MS = "JCOMM_TIMEOUT_MS";
    public static final String HOST_ID = HostIdentity.ENV;
    public static final String HOSTNAME = "JCOMM_HOSTNAME";
    public static final String CPU_BACKEND = "JCOMM_CPU_BACKEND";
    public static final String DEVICE_COMM = "JCOMM_DEVICE_COMM";
    public static final String TOKEN_FILE = "JCOMM_TOKEN_FILE";
    public static final String LAUNCHER_STORE = "JCOMM_LAUNCHER_STORE";
    public static final String JOB_ID = "JCOMM_JOB_ID";
    public static final String DEBUG = "JCOMM_DEBUG";
    public static final String ROLE = "JCOMM_ROLE";
    /**
     * Key (not under any prefix) that a launcher hosting the store sets once every worker of the job has
     * exited: a spare still waiting for a vacancy then stops waiting.
     */
    public static final String LAUNCHER_DONE_KEY = "jcomm/launcher/workers-done";
    public static final String RECOVERY = "JCOMM_RECOVERY";
    /** torchelastic's run id, used as the job id when {@value #JOB_ID} is not set. */
    public static final String TORCHELASTIC_RUN_ID = "TORCHELASTIC_RUN_ID";

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

    /** What this process is in its job ({@value #ROLE}). */
    public enum Role {
        /** A rank started with the job. */
        WORKER,
        /** Started again by its launcher to take the place of its rank, which was lost. */
        RESTARTED,
        /** Started ahead, waiting to take the place of the first rank lost; its configured rank is a placeholder. */
        SPARE
    }

    /** What the survivors of a rank loss do ({@value #RECOVERY}). */
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
            throw new IllegalArgumentException(MASTER_PORT + " out of range: " + masterPort);
        }
        if (worldSize < 1) {
            throw new IllegalArgumentException(WORLD_SIZE + " must be >= 1, got " + worldSize);
        }
        if (rank < 0 || rank >= worldSize) {
            throw new IllegalArgumentException(RANK + " " + rank + " not in [0, " + worldSize + ")");
        }
        if (localWorldSize < 1 || localWorldSize > worldSize) {
            throw new IllegalArgumentException(LOCAL_WORLD_SIZE + " " + localWorldSize + " not in [1, " + worldSize + "]");
        }
        if (localRank < 0 || localRank >= localWorldSize) {
            throw new IllegalArgumentException(LOCAL_RANK + " " + localRank + " not in [0, " + localWorldSize + ")");
        }
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive, got " + timeout);
        }
        int jobIdBytes = jobId.getBytes(StandardCharsets.UTF_8).length;
        if (jobId.isEmpty() || jobIdBytes > MAX_JOB_ID_BYTES) {
            throw new IllegalArgumentException(JOB_ID + " must be 1 to " + MAX_JOB_ID_BYTES + " bytes of UTF-8, got "
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
        String v;
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
        if ((v = env.get(TIMEOUT_MS)) != null && !v.isBlank()) {
            b.timeout(Duration.ofMillis(parseInt(TIMEOUT_MS, v)));
        }
        if ((v = env.get(HOST_ID)) != null && !v.isBlank()) {
            b.hostId(v.trim());
        }
        if ((v = env.get(HOSTNAME)) != null && !v.isBlank()) {
            b.hostname(v.trim());
        }
        if ((v = env.get(CPU_BACKEND)) != null && !v.isBlank()) {
            b.cpuBackend(v.trim());
        }
        if ((v = env.get(DEVICE_COMM)) != null && !v.isBlank()) {
            b.deviceCommunicator(v.trim());
        }
        if ((v = env.get(TOKEN_FILE)) != null && !v.isBlank()) {
            b.tokenFile(Path.of(v.trim()));
        }
        if ((v = env.get(LAUNCHER_STORE)) != null && !v.isBlank()) {
            b.launcherStore(parseFlag(LAUNCHER_STORE, v));
        }
        if ((v = env.get(JOB_ID)) != null && !v.isBlank()) {
            b.jobId(v.trim());
        }
        if ((v = env.get(DEBUG)) != null && !v.isBlank()) {
            try {
                b.debug(DebugLevel.parse(v));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException(DEBUG + " is " + e.getMessage(), e);
            }
        }
        if ((v = env.get(ROLE)) != null && !v.isBlank()) {
            b.role(parseEnum(Role.class, ROLE, v));
        }
        if ((v = env.get(RECOVERY)) != null && !v.isBlank()) {
            b.recovery(parseEnum(RecoveryPolicy.class, RECOVERY, v));
        }
        return b.build();
    }

    private static <E extends Enum<E>> E parseEnum(Class<E> type, String name, String value) {
        for (E e : type.getEnumConstants()) {
            if (e.name().equalsIgnoreCase(value.trim())) {
                return e;
            }
        }
        StringBuilder sb = new StringBuilder();
        for (E e : type.getEnumConstants()) {
            sb.append(sb.length() == 0 ? "" : ", ").append(e.name().toLowerCase(Locale.ROOT));
        }
        throw new IllegalArgumentException(name + " is not one of " + sb + ": '" + value + "'");
    }

    private static int parseInt(String name, String value) {
        try {
            return Integer.parseInt(value.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + " is not an integer: '" + value + "'", e);
        }
    }

    private static boolean parseFlag(String name, String value) {
        switch (value.trim().toLowerCase(Locale.ROOT)) {
            case "1": case "true": case "yes": return true;
            case "0": case "false": case "no": return false;
            default: throw new IllegalArgumentException(name + " is not 0/1/true/false: '" + value + "'");
        }
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
     * The job's identity ({@value #JOB_ID}, else {@value #TORCHELASTIC_RUN_ID}, else
     * {@value #JOB_ID_DEFAULT}): ranks declare themselves to the store under it, and the store tells
     * the ranks of one job when one of them dies.
     */
    public String jobId() {
        return jobId;
    }

    /** The debug level ({@value #DEBUG}): {@link DebugLevel#OFF} unless asked for. */
    public DebugLevel debug() {
        return debug;
    }

    /** What this process is in its job ({@value #ROLE}): {@link Role#WORKER} unless a launcher says otherwise. */
    public Role role() {
        return role;
    }

    /** What the survivors of a rank loss do ({@value #RECOVERY}): {@link RecoveryPolicy#SHRINK} by default. */
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
        /** The debug level ({@value DistributedConfig#DEBUG}). */
        public Builder debug(DebugLevel v) { this.debug = v; return this; }
        /** What this process is in its job ({@value DistributedConfig#ROLE}). */
        public Builder role(Role v) { this.role = v; return this; }
        /** What the survivors of a rank loss do ({@value DistributedConfig#RECOVERY}). */
        public Builder recovery(RecoveryPolicy v) { this.recovery = v; return this; }
        /** What the launcher said ({@link DistributedConfig#launch()}); {@code null}: built in code. */
        public Builder launch(LaunchInfo v) { this.launch = v; return this; }

        public DistributedConfig build() {
            return new DistributedConfig(this);
        }
    }
}
