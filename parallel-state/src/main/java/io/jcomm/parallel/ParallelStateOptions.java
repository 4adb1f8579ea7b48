package io.jcomm.parallel;

import io.jcomm.api.Device;
import io.jcomm.api.ObjectCodec;
import io.jcomm.api.ray.TensorAllocator;
import io.jcomm.cpu.codec.ForyCodec;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.device.DeviceCommunicators;
import io.jcomm.mq.MessageQueueOptions;
import java.time.Duration;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * Immutable settings of a {@link ParallelState}: what every group of the job is built from. Values
 * that the job's {@link io.jcomm.api.DistributedConfig} already carries (timeout, CPU backend,
 * device communicator, host id) are taken from there unless set here.
 *
 * <table>
 *   <caption>Settings</caption>
 *   <tr><th>setting</th><th>meaning</th><th>default</th></tr>
 *   <tr><td>{@code codec}</td><td>codec of every object collective and of the broadcaster; build it once
 *       per process (making a Fory codec costs tens of milliseconds)</td><td>{@link #defaultCodec()}</td></tr>
 *   <tr><td>{@code timeout}</td><td>default deadline of every blocking call and of group creation</td><td>the config's</td></tr>
 *   <tr><td>{@code cpuBackend}</td><td>CPU backend name ({@code auto}, {@code tcp}, {@code gloo})</td><td>the config's</td></tr>
 *   <tr><td>{@code cpuOption(k, v)}</td><td>backend options for every CPU group (e.g. {@code tcp.shm.ringBytes})</td><td>none; when the
 *       device is not the host, {@code tcp.shm.ringBytes=65536}: the CPU groups then carry only control messages,
 *       and small rings are set up in a fraction of the time of the default 4 MiB ones</td></tr>
 *   <tr><td>{@code deviceCommunicator}</td><td>provider name or {@code auto}</td><td>the config's</td></tr>
 *   <tr><td>{@code device}</td><td>this rank's device; {@code null}: {@code cuda:LOCAL_RANK} when an
 *       available provider moves CUDA tensors, else {@code cpu}</td><td>{@code null}</td></tr>
 *   <tr><td>{@code deviceCommunicators}</td><td>the provider registry</td><td>{@link #defaultDeviceCommunicators()}</td></tr>
 *   <tr><td>{@code deviceAllocator}</td><td>allocates device tensors for received data (needed for device tensors only)</td><td>none</td></tr>
 *   <tr><td>{@code tpMessageQueue}</td><td>give TP groups a shared-memory broadcaster (writer = group rank 0), as vLLM does</td><td>true</td></tr>
 *   <tr><td>{@code messageQueueAcrossHostsOnly}</td><td>only TP groups that span hosts get one: a one-host group's
 *       small-object broadcast already goes through the node-local channel, and making a broadcaster is the
 *       most expensive step of group creation</td><td>false</td></tr>
 *   <tr><td>{@code broadcasterInBackground}</td><td>make the broadcasters after the groups, on a background thread
 *       through the store: the groups are ready without waiting for the media driver and the Aeron handshakes,
 *       and the writer's broadcasts go over the CPU side until every rank has its queue, then through it
 *       ({@link GroupCoordinator#awaitMessageQueue}); {@code false} makes them during creation, as vLLM does.
 *       Needs a TCP or in-memory store (else the broadcasters are made during creation)</td><td>true</td></tr>
 *   <tr><td>{@code rollCallGrace}</td><td>how long the roll call of a recovery ({@link ParallelState#shrink},
 *       {@link ParallelState#replace}) waits for a rank that neither answers nor is known dead (its process may be
 *       cut off, or stopped) before counting it lost: its replica leaves, or its place is taken</td><td>3 s</td></tr>
 *   <tr><td>{@code messageQueueOptions}</td><td>broadcaster settings (host id, codec, timeout are filled in)</td><td>256 KiB
 *       terms, 32 KiB frames (messages of any size up to 64 MiB are cut into frames)</td></tr>
 *   <tr><td>{@code concurrentGroupCreation}</td><td>create the TP/PP/DP/EP groups of this rank in parallel</td><td>true</td></tr>
 *   <tr><td>{@code storePrefix}</td><td>namespace of this job's keys in a shared store</td><td>{@code jcomm}</td></tr>
 *   <tr><td>{@code rendezvous}</td><td>how {@link ParallelState#initialize} makes the store</td><td>{@link TcpRendezvous.Options#defaults()}</td></tr>
 *   <tr><td>{@code listener}</td><td>told when groups are created and destroyed</td><td>none</td></tr>
 *   <tr><td>{@code all2allBackend}</td><td>the {@link All2AllManager} of {@link GroupCoordinator#dispatch} and
 *       {@link GroupCoordinator#combine} (MoE), by provider name: {@code allgather-reducescatter} or {@code alltoall}
 *       built in; unset: {@code JCOMM_ALL2ALL_BACKEND}, else {@code allgather-reducescatter}</td><td>{@code null}</td></tr>
 *   <tr><td>{@code debugChecks}</td><td>compare every device collective's fingerprint across the group over its CPU
 *       group before running it (a mismatch is a {@link io.jcomm.api.CollectiveMismatchException} on every member),
 *       and give every CPU group the option {@code debug=detail} (gloo's argument check forced on)</td><td>{@code null}:
 *       the config's {@link io.jcomm.api.DistributedConfig#debug()} ({@code JCOMM_DEBUG=detail}), else off</td></tr>
 * </table>
 */
public final class ParallelStateOptions {

    /** Default term of the TP broadcaster's streams: 256 KiB (768 KiB of /dev/shm per stream, cheap to create). */
    public static final int MQ_TERM_LENGTH_DEFAULT = 256 << 10;
    /** Default IPC frame of the TP broadcaster: 32 KiB (at most term / 8). */
    public static final int MQ_MTU_DEFAULT = 32 << 10;

    private final ObjectCodec codec;
    private final Duration timeout;
    private final String cpuBackend;
    private final Map<String, String> cpuOptions;
    private final String deviceCommunicator;
    private final Device device;
    private final DeviceCommunicators deviceCommunicators;
    private final TensorAllocator deviceAllocator;
    private final boolean tpMessageQueue;
    private final boolean messageQueueAcrossHostsOnly;
    private final boolean broadcasterInBackground;
    private final Duration rollCallGrace;
    private final MessageQueueOptions messageQueueOptions;
    private final boolean concurrentGroupCreation;
    private final String storePrefix;
    private final TcpRendezvous.Options rendezvous;
    private final GroupListener listener;
    private final String all2allBackend;
    private final Boolean debugChecks;

    private ParallelStateOptions(Builder b) {
        this.codec = b.codec;
        this.timeout = b.timeout;
        this.cpuBackend = b.cpuBackend;
        this.cpuOptions = Collections.unmodifiableMap(new LinkedHashMap<>(b.cpuOptions));
        this.deviceCommunicator = b.deviceCommunicator;
        this.device = b.device;
        this.deviceCommunicators = b.deviceCommunicators;
        this.deviceAllocator = b.deviceAllocator;
        this.tpMessageQueue = b.tpMessageQueue;
        this.messageQueueAcrossHostsOnly = b.messageQueueAcrossHostsOnly;
        this.broadcasterInBackground = b.broadcasterInBackground;
        this.rollCallGrace = Objects.requireNonNull(b.rollCallGrace, "rollCallGrace");
        if (rollCallGrace.isNegative() || rollCallGrace.isZero()) {
            throw new IllegalArgumentException("rollCallGrace must be positive, got " + rollCallGrace);
        }
        this.messageQueueOptions = Objects.requireNonNull(b.messageQueueOptions, "messageQueueOptions");
        this.concurrentGroupCreation = b.concurrentGroupCreation;
        this.storePrefix = Objects.requireNonNull(b.storePrefix, "storePrefix");
        this.rendezvous = Objects.requireNonNull(b.rendezvous, "rendezvous");
        this.listener = b.listener != null ? b.listener : GroupListener.NONE;
        this.all2allBackend = b.all2allBackend;
        this.debugChecks = b.debugChecks;
        if (timeout != null && (timeout.isNegative() || timeout.isZero())) {
            throw new IllegalArgumentException("timeout must be positive, got " + timeout);
        }
        if (storePrefix.isEmpty() || storePrefix.contains("/")) {
            throw new IllegalArgumentException("storePrefix must be non-empty and contain no '/': '" + storePrefix + "'");
        }
    }

    public static Builder builder() {
        return new Builder();
    }

    public static ParallelStateOptions defaults() {
        return builder().build();
    }

    /** The codec, or {@code null} for {@link #defaultCodec()}. */
    public ObjectCodec codec() { return codec; }

    /**
     * The codec used when none is set: {@link ForyCodec#defaults()} (built-in types only), made
     * once per JVM on first use. It is immutable and thread safe, so sharing it is sharing a
     * constant, not state.
     */
    public static ObjectCodec defaultCodec() {
        return DefaultCodec.INSTANCE;
    }

    private static final class DefaultCodec {
        static final ObjectCodec INSTANCE = ForyCodec.defaults();
    }

    /**
     * The provider registry used when none is set: {@link DeviceCommunicators#load()} of this
     * library's class loader, made once per JVM on first use (an immutable snapshot; providers
     * cache their own availability probes).
     */
    public static DeviceCommunicators defaultDeviceCommunicators() {
        return DefaultRegistry.INSTANCE;
    }

    private static final class DefaultRegistry {
        static final DeviceCommunicators INSTANCE = DeviceCommunicators.load(ParallelStateOptions.class.getClassLoader());
    }
    /** The timeout, or {@code null} for the config's. */
    public Duration timeout() { return timeout; }
    /** The CPU backend, or {@code null} for the config's. */
    public String cpuBackend() { return cpuBackend; }
    public Map<String, String> cpuOptions() { return cpuOptions; }
    /** The device communicator provider, or {@code null} for the config's. */
    public String deviceCommunicator() { return deviceCommunicator; }
    /** The device, or {@code null} for automatic choice. */
    public Device device() { return device; }
    /** The provider registry, or {@code null} for {@link #defaultDeviceCommunicators()}. */
    public DeviceCommunicators deviceCommunicators() { return deviceCommunicators; }
    /** The device tensor allocator, or {@code null}. */
    public TensorAllocator deviceAllocator() { return deviceAllocator; }
    public boolean tpMessageQueue() { return tpMessageQueue; }
    public boolean messageQueueAcrossHostsOnly() { return messageQueueAcrossHostsOnly; }
    public boolean broadcasterInBackground() { return broadcasterInBackground; }
    /** How long a recovery's roll call waits for a rank neither answering nor known dead before counting it lost. */
    public Duration rollCallGrace() { return rollCallGrace; }
    public MessageQueueOptions messageQueueOptions() { return messageQueueOptions; }
    public boolean concurrentGroupCreation() { return concurrentGroupCreation; }
    public String storePrefix() { return storePrefix; }
    public TcpRendezvous.Options rendezvous() { return rendezvous; }
    public GroupListener listener() { return listener; }
    /**
     * Name of the MoE dispatch/combine manager ({@link All2AllManagers}), or {@code null} for
     * {@code JCOMM_ALL2ALL_BACKEND}, else {@link All2AllManagers#ALLGATHER_REDUCESCATTER}. An unknown
     * name fails {@link ParallelState} creation with an {@link IllegalArgumentException} listing the known ones.
     */
    public String all2allBackend() { return all2allBackend; }
    /**
     * Whether device collectives are compared across members before they run and CPU backends run
     * every argument check ({@link GroupCoordinator}'s "Mismatch detection"), or {@code null} for the
     * config's {@link io.jcomm.api.DistributedConfig#debug()} ({@code JCOMM_DEBUG}; on for {@code detail}).
     */
    public Boolean debugChecks() { return debugChecks; }

    public Builder toBuilder() {
        Builder b = builder().codec(codec).timeout(timeout).cpuBackend(cpuBackend).deviceCommunicator(deviceCommunicator)
                .device(device).deviceCommunicators(deviceCommunicators).deviceAllocator(deviceAllocator)
                .tpMessageQueue(tpMessageQueue).messageQueueAcrossHostsOnly(messageQueueAcrossHostsOnly)
                .broadcasterInBackground(broadcasterInBackground).rollCallGrace(rollCallGrace)
                .messageQueueOptions(messageQueueOptions).concurrentGroupCreation(concurrentGroupCreation)
                .storePrefix(storePrefix).rendezvous(rendezvous).listener(listener).all2allBackend(all2allBackend)
                .debugChecks(debugChecks);
        cpuOptions.forEach(b::cpuOption);
        return b;
    }

    @Override
    public String toString() {
        return "ParallelStateOptions{timeout=" + timeout + ", cpu=" + cpuBackend + " " + cpuOptions + ", device="
                + device + " via " + deviceCommunicator + ", tpMessageQueue=" + tpMessageQueue + (messageQueueAcrossHostsOnly ? " (across hosts only)" : "")
                + (broadcasterInBackground ? " (in the background)" : "") + ", concurrent="
                + concurrentGroupCreation + ", prefix=" + storePrefix
                + (all2allBackend != null ? ", all2all=" + all2allBackend : "")
                + (debugChecks != null ? ", debugChecks=" + debugChecks : "") + "}";
    }

    /** Mutable builder; {@link #build()} validates. */
    public static final class Builder {
        private ObjectCodec codec;
        private Duration timeout;
        private String cpuBackend;
        private final Map<String, String> cpuOptions = new LinkedHashMap<>();
        private String deviceCommunicator;
        private Device device;
        private DeviceCommunicators deviceCommunicators;
        private TensorAllocator deviceAllocator;
        private boolean tpMessageQueue = true;
        private boolean messageQueueAcrossHostsOnly;
        private boolean broadcasterInBackground = true;
        private Duration rollCallGrace = Duration.ofSeconds(3);
        private MessageQueueOptions messageQueueOptions = MessageQueueOptions.builder()
                .ipcTermLength(MQ_TERM_LENGTH_DEFAULT).ipcMtu(MQ_MTU_DEFAULT).udpTermLength(MQ_TERM_LENGTH_DEFAULT).build();
        private boolean concurrentGroupCreation = true;
        private String storePrefix = "jcomm";
        private TcpRendezvous.Options rendezvous = TcpRendezvous.Options.defaults();
        private GroupListener listener;
        private String all2allBackend;
        private Boolean debugChecks;

        private Builder() {
        }

        public Builder codec(ObjectCodec v) { this.codec = v; return this; }
        public Builder timeout(Duration v) { this.timeout = v; return this; }
        public Builder cpuBackend(String v) { this.cpuBackend = v; return this; }

        /** A backend option for every CPU group; {@code null} removes it. */
        public Builder cpuOption(String key, String value) {
            Objects.requireNonNull(key, "key");
            if (value == null) {
                cpuOptions.remove(key);
            } else {
                cpuOptions.put(key, value);
            }
            return this;
        }

        public Builder deviceCommunicator(String v) { this.deviceCommunicator = v; return this; }
        public Builder device(Device v) { this.device = v; return this; }
        public Builder deviceCommunicators(DeviceCommunicators v) { this.deviceCommunicators = v; return this; }
        public Builder deviceAllocator(TensorAllocator v) { this.deviceAllocator = v; return this; }
        public Builder tpMessageQueue(boolean v) { this.tpMessageQueue = v; return this; }
        public Builder messageQueueAcrossHostsOnly(boolean v) { this.messageQueueAcrossHostsOnly = v; return this; }
        public Builder broadcasterInBackground(boolean v) { this.broadcasterInBackground = v; return this; }
        /** See {@link ParallelStateOptions#rollCallGrace()}. */
        public Builder rollCallGrace(Duration v) { this.rollCallGrace = v; return this; }
        public Builder messageQueueOptions(MessageQueueOptions v) { this.messageQueueOptions = v; return this; }
        public Builder concurrentGroupCreation(boolean v) { this.concurrentGroupCreation = v; return this; }
        public Builder storePrefix(String v) { this.storePrefix = v; return this; }
        public Builder rendezvous(TcpRendezvous.Options v) { this.rendezvous = v; return this; }
        public Builder listener(GroupListener v) { this.listener = v; return this; }
        /** See {@link ParallelStateOptions#all2allBackend()}; {@code null} for the environment's or the default. */
        public Builder all2allBackend(String v) { this.all2allBackend = v; return this; }
        /** See {@link ParallelStateOptions#debugChecks()}; {@code null} for the config's debug level. */
        public Builder debugChecks(Boolean v) { this.debugChecks = v; return this; }

        public ParallelStateOptions build() {
            return new ParallelStateOptions(this);
        }
    }
}
