package io.jcomm.cpu;

import io.jcomm.api.DebugLevel;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ObjectCodec;
import io.jcomm.api.store.Store;
import io.jcomm.cpu.codec.ForyCodec;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * Immutable configuration of one CPU group (the control plane of one parallel dimension).
 *
 * <table>
 *   <caption>Settings</caption>
 *   <tr><th>setting</th><th>meaning</th><th>default</th></tr>
 *   <tr><td>{@code store}</td><td>rendezvous store; the group works under
 *       {@code new PrefixStore(groupName, store)}</td><td>required</td></tr>
 *   <tr><td>{@code groupName}</td><td>unique name, e.g. {@code tp:0}</td><td>{@value #GROUP_NAME_DEFAULT}</td></tr>
 *   <tr><td>{@code rank}, {@code size}</td><td>this process's rank in the group, the group size</td><td>0, 1</td></tr>
 *   <tr><td>{@code globalRanks}</td><td>global rank of each group rank</td><td>{@code 0..size-1}</td></tr>
 *   <tr><td>{@code backend}</td><td>{@code auto}, {@code tcp}, {@code gloo} or another provider's name;
 *       {@code auto} picks the available provider with the highest priority</td><td>{@value #BACKEND_DEFAULT}</td></tr>
 *   <tr><td>{@code timeout}</td><td>default deadline of every call, and of connection set-up</td><td>60 s</td></tr>
 *   <tr><td>{@code codec}</td><td>codec of the object collectives</td><td>{@link ForyCodec#defaults()}</td></tr>
 *   <tr><td>{@code hostname}</td><td>address peers use to reach this process</td><td>{@value #HOSTNAME_DEFAULT}</td></tr>
 *   <tr><td>{@code option(k, v)}, {@code options(BackendOptions)}</td><td>backend-specific options (see each
 *       backend; typed: {@link TcpOptions}), and
 *       {@value #MAX_OBJECT_BYTES_OPTION} (bound on received object sizes, default 256 MiB), and
 *       {@value #DEBUG_OPTION} ({@code off} or {@code detail}: the job's {@link io.jcomm.api.DebugLevel}; with
 *       {@code detail} a backend runs its cross-rank argument checks even where its own options turned them
 *       off, e.g. gloo's {@code gloo.checkArgs}), and {@value #FAULT_OPTION} (faults to inject into this group,
 *       in {@link FaultPlan}'s grammar; {@link Builder#fault(FaultPlan)})</td><td>none</td></tr>
 * </table>
 */
public final class CpuGroupOptions {

    public static final String GROUP_NAME_DEFAULT = "world";
    public static final String BACKEND_DEFAULT = "auto";
    public static final String HOSTNAME_DEFAULT = "127.0.0.1";
    public static final Duration TIMEOUT_DEFAULT = Duration.ofSeconds(60);

    /** Option: largest encoded object (bytes) a rank accepts from a peer. */
    public static final String MAX_OBJECT_BYTES_OPTION = "object.maxBytes";
    /**
     * Option: the job's debug level ({@code off} or {@code detail}, {@link DebugLevel}); set by
     * {@link #fromConfig} and by {@code ParallelState} from {@link DistributedConfig#debug()}.
     */
    public static final String DEBUG_OPTION = "debug";
    /**
     * Option: faults to inject, in {@link FaultPlan}'s grammar ({@link Builder#fault(FaultPlan)}); when it is
     * set, the process's {@code JCOMM_FAULT} does not apply to this group (an empty value: no fault).
     */
    public static final String FAULT_OPTION = "fault";
    /** Default of {@link #MAX_OBJECT_BYTES_OPTION}: 256 MiB. */
    public static final long MAX_OBJECT_BYTES_DEFAULT = 256L << 20;

    private final Store store;
    private final String groupName;
    private final int rank;
    private final int size;
    private final List<Integer> globalRanks;
    private final String backend;
    private final Duration timeout;
    private final ObjectCodec codec;
    private final String hostname;
    private final Map<String, String> options;
    private final FaultPlan fault;

    private CpuGroupOptions(Builder b) {
        this.store = Objects.requireNonNull(b.store, "store is required");
        this.groupName = Objects.requireNonNull(b.groupName, "groupName");
        this.rank = b.rank;
        this.size = b.size;
        this.backend = Objects.requireNonNull(b.backend, "backend").trim();
        this.timeout = Objects.requireNonNull(b.timeout, "timeout");
        this.codec = b.codec != null ? b.codec : ForyCodec.defaults();
        this.hostname = Objects.requireNonNull(b.hostname, "hostname");
        this.options = Collections.unmodifiableMap(new LinkedHashMap<>(b.options));
        if (groupName.isEmpty()) {
            throw new IllegalArgumentException("groupName must be non-empty");
        }
        if (size < 1) {
            throw new IllegalArgumentException("size must be >= 1, got " + size);
        }
        if (rank < 0 || rank >= size) {
            throw new IllegalArgumentException("rank " + rank + " not in [0, " + size + ")");
        }
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("timeout must be positive, got " + timeout);
        }
        if (backend.isEmpty()) {
            throw new IllegalArgumentException("backend must be non-empty (use \"auto\")");
        }
        List<Integer> ranks;
        if (b.globalRanks == null) {
            ranks = new ArrayList<>(size);
            for (int i = 0; i < size; i++) {
                ranks.add(i);
            }
        } else {
            ranks = List.copyOf(b.globalRanks);
            if (ranks.size() != size) {
                throw new IllegalArgumentException("globalRanks has " + ranks.size() + " entries for size " + size);
            }
            if (ranks.stream().distinct().count() != size || ranks.stream().anyMatch(r -> r < 0)) {
                throw new IllegalArgumentException("globalRanks must be distinct and non-negative: " + ranks);
            }
        }
        this.globalRanks = List.copyOf(ranks);
        maxObjectBytes(); // validates the option early
        debug(); // and this one
        String f = options.get(FAULT_OPTION);
        try {
            this.fault = f != null ? FaultPlan.parse(f) : FaultPlan.process();
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException((f != null ? FAULT_OPTION + " option: " : "") + e.getMessage(), e);
        }
    }

    public static Builder builder() {
        return new Builder();
    }

    /**
     * Options of the world group for this process: rank, size, timeout and backend from
     * {@code config}, group name {@value #GROUP_NAME_DEFAULT}; {@value #DEBUG_OPTION} when the
     * config's debug level is not {@link DebugLevel#OFF}.
     */
    public static CpuGroupOptions fromConfig(DistributedConfig config, Store store) {
        Builder b = builder().store(store).groupName(GROUP_NAME_DEFAULT).rank(config.rank()).size(config.worldSize())
                .timeout(config.timeout()).backend(config.cpuBackend());
        if (config.debug() != DebugLevel.OFF) {
            b.option(DEBUG_OPTION, debugValue(config.debug()));
        }
        return b.build();
    }

    /** The text of {@code level} as the value of {@value #DEBUG_OPTION}. */
    public static String debugValue(DebugLevel level) {
        return level.name().toLowerCase(Locale.ROOT);
    }

    /**
     * The debug level of this group ({@value #DEBUG_OPTION}); {@link DebugLevel#OFF} when unset.
     *
     * @throws IllegalArgumentException if the option is not {@code off} or {@code detail}
     */
    public DebugLevel debug() {
        String v = options.get(DEBUG_OPTION);
        if (v == null || v.isBlank()) {
            return DebugLevel.OFF;
        }
        try {
            return DebugLevel.parse(v);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(DEBUG_OPTION + " is " + e.getMessage(), e);
        }
    }

    /**
     * The faults to inject into this group: the {@value #FAULT_OPTION} option when set, else the process's
     * ({@link FaultPlan#process()}: {@code -Djcomm.fault} or {@code JCOMM_FAULT}); {@link FaultPlan#NONE}
     * normally. Only the faults whose rank and group match this group on this rank fire.
     */
    public FaultPlan fault() {
        return fault;
    }

    public Store store() {
        return store;
    }

    public String groupName() {
        return groupName;
    }

    public int rank() {
        return rank;
    }

    public int size() {
        return size;
    }

    public List<Integer> globalRanks() {
        return globalRanks;
    }

    public String backend() {
        return backend;
    }

    public Duration timeout() {
        return timeout;
    }

    public ObjectCodec codec() {
        return codec;
    }

    public String hostname() {
        return hostname;
    }

    /** Backend-specific options (unmodifiable). */
    public Map<String, String> options() {
        return options;
    }

    /** An option's value or {@code def}. */
    public String option(String key, String def) {
        return options.getOrDefault(key, def);
    }

    /** The bound on encoded objects received from peers ({@value #MAX_OBJECT_BYTES_OPTION}). */
    public long maxObjectBytes() {
        String v = options.get(MAX_OBJECT_BYTES_OPTION);
        if (v == null) {
            return MAX_OBJECT_BYTES_DEFAULT;
        }
        try {
            long n = Long.parseLong(v.trim());
            if (n < 1 || n > Integer.MAX_VALUE - 64) {
                throw new IllegalArgumentException(MAX_OBJECT_BYTES_OPTION + " out of range: " + v);
            }
            return n;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(MAX_OBJECT_BYTES_OPTION + " is not an integer: " + v, e);
        }
    }

    /** A builder initialised with these options. */
    public Builder toBuilder() {
        Builder b = builder().store(store).groupName(groupName).rank(rank).size(size).globalRanks(globalRanks)
                .backend(backend).timeout(timeout).codec(codec).hostname(hostname);
        options.forEach(b::option);
        return b;
    }

    @Override
    public String toString() {
        return "CpuGroupOptions{group=" + groupName + ", rank=" + rank + "/" + size + ", ranks=" + globalRanks
                + ", backend=" + backend + ", timeout=" + timeout + ", host=" + hostname + ", options=" + options + "}";
    }

    /** Mutable builder; {@link #build()} validates and returns immutable options. */
    public static final class Builder {
        private Store store;
        private String groupName = GROUP_NAME_DEFAULT;
        private int rank = 0;
        private int size = 1;
        private List<Integer> globalRanks;
        private String backend = BACKEND_DEFAULT;
        private Duration timeout = TIMEOUT_DEFAULT;
        private ObjectCodec codec;
        private String hostname = HOSTNAME_DEFAULT;
        private final Map<String, String> options = new LinkedHashMap<>();

        private Builder() {
        }

        /** Rendezvous store (required). */
        public Builder store(Store v) { this.store = v; return this; }
        public Builder groupName(String v) { this.groupName = v; return this; }
        public Builder rank(int v) { this.rank = v; return this; }
        public Builder size(int v) { this.size = v; return this; }
        public Builder globalRanks(List<Integer> v) { this.globalRanks = v == null ? null : new ArrayList<>(v); return this; }
        public Builder backend(String v) { this.backend = v; return this; }
        public Builder timeout(Duration v) { this.timeout = v; return this; }
        public Builder codec(ObjectCodec v) { this.codec = v; return this; }
        public Builder hostname(String v) { this.hostname = v; return this; }

        /** Sets a backend-specific option; {@code null} removes it. */
        public Builder option(String key, String value) {
            Objects.requireNonNull(key, "key");
            if (value == null) {
                options.remove(key);
            } else {
                options.put(key, value);
            }
            return this;
        }

        /**
         * Faults to inject into this group ({@value #FAULT_OPTION}), instead of the process's
         * {@code JCOMM_FAULT}; {@link FaultPlan#NONE} turns them off for this group; {@code null} removes the
         * option (the process's apply).
         */
        public Builder fault(FaultPlan plan) {
            return option(FAULT_OPTION, plan == null ? null : plan.toString());
        }

        /**
         * Adds every option of {@code backendOptions}, the typed options of one backend (e.g.
         * {@code TcpOptions.builder().shm(TcpOptions.Shm.OFF).build()}), replacing earlier values of the same
         * keys; options it leaves unset keep the backend's defaults. {@link #option(String, String)} stays the
         * way to pass options read as text (environment, command line, files).
         *
         * @throws IllegalArgumentException if a key is not under {@code backendOptions.backend() + "."}
         */
        public Builder options(BackendOptions backendOptions) {
            Objects.requireNonNull(backendOptions, "backendOptions");
            String prefix = backendOptions.backend() + ".";
            Map<String, String> entries = backendOptions.asMap();
            for (String key : entries.keySet()) {
                if (!key.startsWith(prefix)) {
                    throw new IllegalArgumentException("option '" + key + "' of " + backendOptions.getClass().getSimpleName()
                            + " is not under '" + prefix + "'");
                }
            }
            entries.forEach(this::option);
            return this;
        }

        public CpuGroupOptions build() {
            return new CpuGroupOptions(this);
        }
    }
}
