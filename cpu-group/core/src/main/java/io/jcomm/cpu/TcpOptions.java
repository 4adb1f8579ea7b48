package io.jcomm.cpu;

import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * Typed, validated options of the {@code tcp} backend, and the one declaration of its option keys
 * (other modules use these constants, not string copies). Give them to a group with
 * {@link CpuGroupOptions.Builder#options(BackendOptions)}:
 * <pre>{@code
 * CpuGroupOptions.builder()...
 *         .options(TcpOptions.builder().shm(TcpOptions.Shm.OFF).sendBudgetBytes(8 << 20).build())
 * }</pre>
 * or, as text (environment, command line, files), with {@link CpuGroupOptions.Builder#option(String, String)};
 * the backend reads either through {@link #fromMap(Map)}, so both meet the same rules. Options left unset
 * take the defaults below (and are absent from {@link #asMap()}). A key under {@code tcp.} that is not listed
 * here is rejected when a tcp group is made.
 *
 * <table>
 *   <caption>Options</caption>
 *   <tr><th>key</th><th>meaning</th><th>range</th><th>default</th></tr>
 *   <tr><td>{@value #TRANSPORT}</td><td>{@code auto} (epoll when available, else NIO), {@code epoll}, {@code nio}
 *       ({@link Transport})</td><td></td><td>auto</td></tr>
 *   <tr><td>{@value #SPIN_MICROS}</td><td>how long a waiting call polls before it blocks in epoll/select</td>
 *       <td>0 - 1000000</td><td>5 (adaptive below that; longer polls measured slower on a 2-core machine)</td></tr>
 *   <tr><td>{@value #SEGMENT_BYTES}</td><td>pipelining unit of large messages</td><td>4 KiB - 1 GiB</td><td>1 MiB</td></tr>
 *   <tr><td>{@value #SMALL_BYTES}</td><td>up to this size collectives use direct (one-round) algorithms,
 *       above it ring/chain algorithms</td><td>0 - 1 GiB</td><td>64 KiB</td></tr>
 *   <tr><td>{@value #MAX_UNEXPECTED_BYTES}</td><td>memory for messages that arrive before their receive is
 *       posted</td><td>&ge; 0</td><td>256 MiB</td></tr>
 *   <tr><td>{@value #SEND_BUDGET_BYTES}</td><td>per peer: bytes of data messages (headers, and payloads that
 *       go by socket) sent to the peer and not yet consumed by a receive there. A send that would exceed it
 *       waits for the peer's credit, bounded by its deadline (a message larger than the budget goes alone).
 *       Bounds what a rank buffers for a slower peer, and how far it runs ahead of it</td>
 *       <td>40 (one frame header) - 1 GiB</td><td>4 MiB</td></tr>
 *   <tr><td>{@value #SEND_BUDGET_MESSAGES}</td><td>per peer: data messages sent and not yet consumed (the same
 *       credit, counted in messages: bounds how far a pipeline of small messages runs ahead, in steps)</td>
 *       <td>1 - 2<sup>20</sup></td><td>64</td></tr>
 *   <tr><td>{@value #SOCKET_BUFFER_BYTES}</td><td>SO_SNDBUF/SO_RCVBUF (0: the OS default)</td><td>0 - 1 GiB</td>
 *       <td>0</td></tr>
 *   <tr><td>{@value #SHM}</td><td>{@code auto}/{@code true}: peers on the same host move large payloads
 *       through a shared-memory ring; {@code false}: sockets only ({@link Shm})</td><td></td><td>auto</td></tr>
 *   <tr><td>{@value #SHM_THRESHOLD_BYTES}</td><td>payloads from this size go through shared memory</td>
 *       <td>&ge; 0</td><td>64 KiB</td></tr>
 *   <tr><td>{@value #SHM_RING_BYTES}</td><td>ring capacity per directed pair (the sender creates it with its
 *       first payload of at least the threshold to that peer)</td><td>power of two, 64 KiB - 1 GiB</td>
 *       <td>4 MiB</td></tr>
 *   <tr><td>{@value #SHM_STAGING_BYTES}</td><td>shared staging region per rank, for collectives of groups
 *       whose ranks all share one host: two slots of input and result areas, made by the first collective
 *       that uses them (0: off; rings only; rounded down to a multiple of 16 KiB)</td><td>0 - 1 GiB</td>
 *       <td>16 MiB</td></tr>
 *   <tr><td>{@value #SHM_COLLECTIVE_MIN_BYTES}</td><td>from this size such groups run all-reduce,
 *       reduce-scatter, all-gather and broadcast through the staging regions</td><td>&ge; 0</td><td>256 KiB</td></tr>
 *   <tr><td>{@value #SHM_FAST_BYTES}</td><td>fast path of groups whose ranks all share one host: up to this size
 *       barrier, all-reduce, reduce-scatter, all-gather, broadcast and the object all-gather and broadcast run
 *       through a small shared region per rank (made when the group is created: two slots of this size), without
 *       a socket (0: off; rounded down to a multiple of 64)</td><td>0 - 16 MiB</td><td>64 KiB</td></tr>
 *   <tr><td>{@value #SHM_DIR}</td><td>directory of the ring files</td><td>a path</td><td>/dev/shm</td></tr>
 *   <tr><td>{@value #SHM_NATIVE_COPY}</td><td>{@code true}: copies of at least 1 KiB into and out of shared
 *       memory use the CPU's string copy ({@code libjcommcopy.so}, bundled for linux-x86_64; Java's copy where it
 *       is not loaded); {@code false}: Java's copy always. Java's stores into cache lines that the peer's core
 *       read are several times slower (docs/PERFORMANCE.md)</td><td>true, false</td><td>true</td></tr>
 *   <tr><td>{@value #SHM_CROSS_MEMORY}</td><td>{@code true}: an all-to-all on one host whose input exceeds the fast
 *       path's region reads each peer's part straight from the peer's input into its output with one kernel copy
 *       ({@code process_vm_readv}, through {@code libjcommcopy.so}) instead of through the rings (a copy in and a
 *       copy out); where the kernel refuses (ptrace restricted, a seccomp filter) every rank of the group falls
 *       back to the rings for good; {@code false}: always the rings</td><td>true, false</td><td>true</td></tr>
 *   <tr><td>{@value #FRESH_NAMESPACE}</td><td>{@code true}: the caller guarantees that the group's store
 *       namespace is used by this incarnation of the group only (as {@code ParallelState} does), so creation
 *       skips the per-rank incarnation counter: one store round trip fewer</td><td>true, false</td>
 *       <td>false</td></tr>
 *   <tr><td>{@value #CONNECT_AT_CREATION}</td><td>{@code true}: a group of at most 16 ranks across hosts
 *       connects every peer when it is made, as gloo does, so that a firewall or a wrong address fails creation;
 *       {@code false}: it connects each peer when an operation first needs it. Larger groups across hosts always
 *       connect on first use, and groups on one host at creation</td><td>true, false</td><td>false</td></tr>
 *   <tr><td>{@value #HOST_ID}</td><td>identity of this host (ranks with equal ids try shared memory)</td>
 *       <td></td><td>{@link io.jcomm.api.HostIdentity#local()}: {@code JCOMM_HOST_ID}, else boot id + host
 *       name</td></tr>
 * </table>
 *
 * <p>Immutable; equal when the same options are set to the same values.
 */
public final class TcpOptions implements BackendOptions {

    public static final String TRANSPORT = "tcp.transport";
    public static final String SPIN_MICROS = "tcp.spinMicros";
    public static final String SEGMENT_BYTES = "tcp.segmentBytes";
    public static final String SMALL_BYTES = "tcp.smallBytes";
    public static final String MAX_UNEXPECTED_BYTES = "tcp.maxUnexpectedBytes";
    public static final String SEND_BUDGET_BYTES = "tcp.sendBudgetBytes";
    public static final String SEND_BUDGET_MESSAGES = "tcp.sendBudgetMessages";
    public static final String SOCKET_BUFFER_BYTES = "tcp.socketBufferBytes";
    public static final String SHM = "tcp.shm";
    public static final String SHM_THRESHOLD_BYTES = "tcp.shm.thresholdBytes";
    public static final String SHM_RING_BYTES = "tcp.shm.ringBytes";
    public static final String SHM_DIR = "tcp.shm.dir";
    public static final String SHM_STAGING_BYTES = "tcp.shm.stagingBytes";
    public static final String SHM_COLLECTIVE_MIN_BYTES = "tcp.shm.collectiveMinBytes";
    public static final String SHM_FAST_BYTES = "tcp.shm.fastBytes";
    public static final String SHM_NATIVE_COPY = "tcp.shm.nativeCopy";
    public static final String SHM_CROSS_MEMORY = "tcp.shm.crossMemory";
    public static final String HOST_ID = "tcp.hostId";
    public static final String FRESH_NAMESPACE = "tcp.freshNamespace";
    public static final String CONNECT_AT_CREATION = "tcp.connectAtCreation";

    /** Every key above. */
    public static final Set<String> KEYS = Set.of(TRANSPORT, SPIN_MICROS, SEGMENT_BYTES, SMALL_BYTES,
            MAX_UNEXPECTED_BYTES, SEND_BUDGET_BYTES, SEND_BUDGET_MESSAGES, SOCKET_BUFFER_BYTES, SHM,
            SHM_THRESHOLD_BYTES, SHM_RING_BYTES, SHM_DIR, SHM_STAGING_BYTES, SHM_COLLECTIVE_MIN_BYTES, SHM_FAST_BYTES,
            SHM_NATIVE_COPY, SHM_CROSS_MEMORY, HOST_ID, FRESH_NAMESPACE, CONNECT_AT_CREATION);

    private static final String BACKEND = "tcp";
    private static final String PREFIX = BACKEND + ".";

    /** Size of the tcp backend's frame header: the smallest send budget (one header). */
    private static final int FRAME_HEADER_BYTES = 40;

    /** The range of each numeric key (the one place of these rules). */
    private static final Map<String, Range> RANGES = Map.ofEntries(
            Map.entry(SPIN_MICROS, new Range(0, 1_000_000)),
            Map.entry(SEGMENT_BYTES, new Range(4096, 1 << 30)),
            Map.entry(SMALL_BYTES, new Range(0, 1 << 30)),
            Map.entry(MAX_UNEXPECTED_BYTES, new Range(0, Long.MAX_VALUE)),
            Map.entry(SEND_BUDGET_BYTES, new Range(FRAME_HEADER_BYTES, 1L << 30)),
            Map.entry(SEND_BUDGET_MESSAGES, new Range(1, 1 << 20)),
            Map.entry(SOCKET_BUFFER_BYTES, new Range(0, 1 << 30)),
            Map.entry(SHM_THRESHOLD_BYTES, new Range(0, Integer.MAX_VALUE)),
            Map.entry(SHM_RING_BYTES, new Range(64 << 10, 1 << 30)),
            Map.entry(SHM_STAGING_BYTES, new Range(0, 1 << 30)),
            Map.entry(SHM_COLLECTIVE_MIN_BYTES, new Range(0, Integer.MAX_VALUE)),
            Map.entry(SHM_FAST_BYTES, new Range(0, 16 << 20)));

    private static final int SPIN_MICROS_DEFAULT = 5;
    private static final int SEGMENT_BYTES_DEFAULT = 1 << 20;
    private static final int SMALL_BYTES_DEFAULT = 64 << 10;
    private static final long MAX_UNEXPECTED_BYTES_DEFAULT = 256L << 20;
    private static final long SEND_BUDGET_BYTES_DEFAULT = 4L << 20;
    private static final int SEND_BUDGET_MESSAGES_DEFAULT = 64;
    private static final int SOCKET_BUFFER_BYTES_DEFAULT = 0;
    private static final int SHM_THRESHOLD_BYTES_DEFAULT = 64 << 10;
    private static final int SHM_RING_BYTES_DEFAULT = 4 << 20;
    private static final String SHM_DIR_DEFAULT = "/dev/shm";
    private static final int SHM_STAGING_BYTES_DEFAULT = 16 << 20;
    private static final int SHM_COLLECTIVE_MIN_BYTES_DEFAULT = 256 << 10;
    private static final int SHM_FAST_BYTES_DEFAULT = 64 << 10;

    /** Values of {@value #TRANSPORT}. */
    public enum Transport {
        /** epoll when available, else NIO. */
        AUTO,
        /** Netty's epoll transport (fails where it is unavailable). */
        EPOLL,
        /** Java NIO. */
        NIO;

        /** The option's text: {@code auto}, {@code epoll}, {@code nio}. */
        public String value() {
            return name().toLowerCase(Locale.ROOT);
        }
    }

    /** Values of {@value #SHM}. */
    public enum Shm {
        /** {@code auto}: peers on the same host use shared memory. */
        AUTO("auto"),
        /** {@code true}: the same as {@link #AUTO}. */
        ON("true"),
        /** {@code false}: sockets only. */
        OFF("false");

        private final String value;

        Shm(String value) {
            this.value = value;
        }

        /** The option's text: {@code auto}, {@code true}, {@code false}. */
        public String value() {
            return value;
        }
    }

    private record Range(long min, long max) {
    }

    private final Transport transport;
    private final Integer spinMicros;
    private final Integer segmentBytes;
    private final Integer smallBytes;
    private final Long maxUnexpectedBytes;
    private final Long sendBudgetBytes;
    private final Integer sendBudgetMessages;
    private final Integer socketBufferBytes;
    private final Shm shm;
    private final Integer shmThresholdBytes;
    private final Integer shmRingBytes;
    private final Path shmDir;
    private final Integer shmStagingBytes;
    private final Integer shmCollectiveMinBytes;
    private final Integer shmFastBytes;
    private final Boolean shmNativeCopy;
    private final Boolean shmCrossMemory;
    private final String hostId;
    private final Boolean freshNamespace;
    private final Boolean connectAtCreation;
    private final Map<String, String> map;

    private TcpOptions(Builder b) {
        transport = b.transport;
        spinMicros = checkRange(SPIN_MICROS, b.spinMicros);
        segmentBytes = checkRange(SEGMENT_BYTES, b.segmentBytes);
        smallBytes = checkRange(SMALL_BYTES, b.smallBytes);
        maxUnexpectedBytes = checkRange(MAX_UNEXPECTED_BYTES, b.maxUnexpectedBytes);
        sendBudgetBytes = checkRange(SEND_BUDGET_BYTES, b.sendBudgetBytes);
        sendBudgetMessages = checkRange(SEND_BUDGET_MESSAGES, b.sendBudgetMessages);
        socketBufferBytes = checkRange(SOCKET_BUFFER_BYTES, b.socketBufferBytes);
        shm = b.shm;
        shmThresholdBytes = checkRange(SHM_THRESHOLD_BYTES, b.shmThresholdBytes);
        shmRingBytes = checkRange(SHM_RING_BYTES, b.shmRingBytes);
        if (shmRingBytes != null && Integer.bitCount(shmRingBytes) != 1) {
            throw new IllegalArgumentException(SHM_RING_BYTES + " must be a power of two, got " + shmRingBytes);
        }
        shmDir = b.shmDir;
        shmStagingBytes = checkRange(SHM_STAGING_BYTES, b.shmStagingBytes);
        shmCollectiveMinBytes = checkRange(SHM_COLLECTIVE_MIN_BYTES, b.shmCollectiveMinBytes);
        shmFastBytes = checkRange(SHM_FAST_BYTES, b.shmFastBytes);
        shmNativeCopy = b.shmNativeCopy;
        shmCrossMemory = b.shmCrossMemory;
        hostId = b.hostId;
        freshNamespace = b.freshNamespace;
        connectAtCreation = b.connectAtCreation;

        Map<String, String> m = new LinkedHashMap<>();
        put(m, TRANSPORT, transport == null ? null : transport.value());
        put(m, SPIN_MICROS, spinMicros);
        put(m, SEGMENT_BYTES, segmentBytes);
        put(m, SMALL_BYTES, smallBytes);
        put(m, MAX_UNEXPECTED_BYTES, maxUnexpectedBytes);
        put(m, SEND_BUDGET_BYTES, sendBudgetBytes);
        put(m, SEND_BUDGET_MESSAGES, sendBudgetMessages);
        put(m, SOCKET_BUFFER_BYTES, socketBufferBytes);
        put(m, SHM, shm == null ? null : shm.value());
        put(m, SHM_THRESHOLD_BYTES, shmThresholdBytes);
        put(m, SHM_RING_BYTES, shmRingBytes);
        put(m, SHM_DIR, shmDir);
        put(m, SHM_STAGING_BYTES, shmStagingBytes);
        put(m, SHM_COLLECTIVE_MIN_BYTES, shmCollectiveMinBytes);
        put(m, SHM_FAST_BYTES, shmFastBytes);
        put(m, SHM_NATIVE_COPY, shmNativeCopy);
        put(m, SHM_CROSS_MEMORY, shmCrossMemory);
        put(m, HOST_ID, hostId);
        put(m, FRESH_NAMESPACE, freshNamespace);
        put(m, CONNECT_AT_CREATION, connectAtCreation);
        map = Collections.unmodifiableMap(m);
    }

    /** A builder with nothing set (every option at its default). */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Parses and validates the {@code tcp.*} options of {@code options} (text, as given to
     * {@link CpuGroupOptions.Builder#option(String, String)}: numbers in decimal, surrounding blanks and the
     * case of {@code auto}/{@code true}/... ignored). Keys outside {@code tcp.} (other backends' options,
     * group options) are left alone, as are {@code null} values.
     *
     * @throws IllegalArgumentException naming the key, if a value is malformed or out of range, or if a key
     *                                  under {@code tcp.} is unknown (the message lists the known ones)
     */
    public static TcpOptions fromMap(Map<String, String> options) {
        Builder b = builder();
        for (Map.Entry<String, String> e : options.entrySet()) {
            String key = e.getKey();
            String v = e.getValue();
            if (!key.toLowerCase(Locale.ROOT).startsWith(PREFIX) || v == null) {
                continue;
            }
            switch (key) {
                case TRANSPORT -> b.transport(parseTransport(v));
                case SPIN_MICROS -> b.spinMicros(parseInt(key, v));
                case SEGMENT_BYTES -> b.segmentBytes(parseInt(key, v));
                case SMALL_BYTES -> b.smallBytes(parseInt(key, v));
                case MAX_UNEXPECTED_BYTES -> b.maxUnexpectedBytes(parseLong(key, v));
                case SEND_BUDGET_BYTES -> b.sendBudgetBytes(parseLong(key, v));
                case SEND_BUDGET_MESSAGES -> b.sendBudgetMessages(parseInt(key, v));
                case SOCKET_BUFFER_BYTES -> b.socketBufferBytes(parseInt(key, v));
                case SHM -> b.shm(parseShm(v));
                case SHM_THRESHOLD_BYTES -> b.shmThresholdBytes(parseInt(key, v));
                case SHM_RING_BYTES -> b.shmRingBytes(parseInt(key, v));
                case SHM_DIR -> b.shmDir(parsePath(key, v));
                case SHM_STAGING_BYTES -> b.shmStagingBytes(parseInt(key, v));
                case SHM_COLLECTIVE_MIN_BYTES -> b.shmCollectiveMinBytes(parseInt(key, v));
                case SHM_FAST_BYTES -> b.shmFastBytes(parseInt(key, v));
                case SHM_NATIVE_COPY -> b.shmNativeCopy(parseBoolean(key, v));
                case SHM_CROSS_MEMORY -> b.shmCrossMemory(parseBoolean(key, v));
                case HOST_ID -> b.hostId(v);
                case FRESH_NAMESPACE -> b.freshNamespace(parseBoolean(key, v));
                case CONNECT_AT_CREATION -> b.connectAtCreation(parseBoolean(key, v));
                default -> throw new IllegalArgumentException("unknown option '" + key + "' of CPU backend " + BACKEND
                        + "; known: " + new TreeSet<>(KEYS));
            }
        }
        return b.build();
    }

    /** {@code tcp}. */
    @Override
    public String backend() {
        return BACKEND;
    }

    /** The options that were set, in the order of the keys above (unmodifiable). */
    @Override
    public Map<String, String> asMap() {
        return map;
    }

    /** A builder with these options set. */
    public Builder toBuilder() {
        Builder b = new Builder();
        b.transport = transport;
        b.spinMicros = spinMicros;
        b.segmentBytes = segmentBytes;
        b.smallBytes = smallBytes;
        b.maxUnexpectedBytes = maxUnexpectedBytes;
        b.sendBudgetBytes = sendBudgetBytes;
        b.sendBudgetMessages = sendBudgetMessages;
        b.socketBufferBytes = socketBufferBytes;
        b.shm = shm;
        b.shmThresholdBytes = shmThresholdBytes;
        b.shmRingBytes = shmRingBytes;
        b.shmDir = shmDir;
        b.shmStagingBytes = shmStagingBytes;
        b.shmCollectiveMinBytes = shmCollectiveMinBytes;
        b.shmFastBytes = shmFastBytes;
        b.shmNativeCopy = shmNativeCopy;
        b.shmCrossMemory = shmCrossMemory;
        b.hostId = hostId;
        b.freshNamespace = freshNamespace;
        b.connectAtCreation = connectAtCreation;
        return b;
    }

    /** {@value #TRANSPORT}. */
    public Transport transport() {
        return transport != null ? transport : Transport.AUTO;
    }

    /** {@value #SPIN_MICROS}. */
    public int spinMicros() {
        return spinMicros != null ? spinMicros : SPIN_MICROS_DEFAULT;
    }

    /** {@value #SEGMENT_BYTES}. */
    public int segmentBytes() {
        return segmentBytes != null ? segmentBytes : SEGMENT_BYTES_DEFAULT;
    }

    /** {@value #SMALL_BYTES}. */
    public int smallBytes() {
        return smallBytes != null ? smallBytes : SMALL_BYTES_DEFAULT;
    }

    /** {@value #MAX_UNEXPECTED_BYTES}. */
    public long maxUnexpectedBytes() {
        return maxUnexpectedBytes != null ? maxUnexpectedBytes : MAX_UNEXPECTED_BYTES_DEFAULT;
    }

    /** {@value #SEND_BUDGET_BYTES}. */
    public long sendBudgetBytes() {
        return sendBudgetBytes != null ? sendBudgetBytes : SEND_BUDGET_BYTES_DEFAULT;
    }

    /** {@value #SEND_BUDGET_MESSAGES}. */
    public int sendBudgetMessages() {
        return sendBudgetMessages != null ? sendBudgetMessages : SEND_BUDGET_MESSAGES_DEFAULT;
    }

    /** {@value #SOCKET_BUFFER_BYTES}. */
    public int socketBufferBytes() {
        return socketBufferBytes != null ? socketBufferBytes : SOCKET_BUFFER_BYTES_DEFAULT;
    }

    /** {@value #SHM}. */
    public Shm shm() {
        return shm != null ? shm : Shm.AUTO;
    }

    /** {@value #SHM_THRESHOLD_BYTES}. */
    public int shmThresholdBytes() {
        return shmThresholdBytes != null ? shmThresholdBytes : SHM_THRESHOLD_BYTES_DEFAULT;
    }

    /** {@value #SHM_RING_BYTES}. */
    public int shmRingBytes() {
        return shmRingBytes != null ? shmRingBytes : SHM_RING_BYTES_DEFAULT;
    }

    /** {@value #SHM_DIR}. */
    public Path shmDir() {
        return shmDir != null ? shmDir : Path.of(SHM_DIR_DEFAULT);
    }

    /** {@value #SHM_STAGING_BYTES}, as set (the backend rounds it down to a multiple of 16 KiB). */
    public int shmStagingBytes() {
        return shmStagingBytes != null ? shmStagingBytes : SHM_STAGING_BYTES_DEFAULT;
    }

    /** {@value #SHM_COLLECTIVE_MIN_BYTES}. */
    public int shmCollectiveMinBytes() {
        return shmCollectiveMinBytes != null ? shmCollectiveMinBytes : SHM_COLLECTIVE_MIN_BYTES_DEFAULT;
    }

    /** {@value #SHM_FAST_BYTES}. */
    public int shmFastBytes() {
        return shmFastBytes != null ? shmFastBytes : SHM_FAST_BYTES_DEFAULT;
    }

    /** {@value #SHM_NATIVE_COPY}. */
    public boolean shmNativeCopy() {
        return shmNativeCopy == null || shmNativeCopy;
    }

    /** {@value #SHM_CROSS_MEMORY}. */
    public boolean shmCrossMemory() {
        return shmCrossMemory == null || shmCrossMemory;
    }

    /** {@value #HOST_ID}; empty: the backend uses {@link io.jcomm.api.HostIdentity#local()}. */
    public Optional<String> hostId() {
        return Optional.ofNullable(hostId);
    }

    /** {@value #FRESH_NAMESPACE}. */
    public boolean freshNamespace() {
        return freshNamespace != null && freshNamespace;
    }

    /** {@value #CONNECT_AT_CREATION}. */
    public boolean connectAtCreation() {
        return connectAtCreation != null && connectAtCreation;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof TcpOptions other && map.equals(other.map);
    }

    @Override
    public int hashCode() {
        return map.hashCode();
    }

    @Override
    public String toString() {
        return "TcpOptions" + map;
    }

    private static void put(Map<String, String> m, String key, Object value) {
        if (value != null) {
            m.put(key, value.toString());
        }
    }

    private static <N extends Number> N checkRange(String key, N value) {
        if (value != null) {
            Range r = RANGES.get(key);
            long n = value.longValue();
            if (n < r.min() || n > r.max()) {
                throw new IllegalArgumentException(key + " = " + n + " not in [" + r.min() + ", " + r.max() + "]");
            }
        }
        return value;
    }

    private static long parseLong(String key, String v) {
        try {
            return Long.parseLong(v.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(key + " is not an integer: " + v, e);
        }
    }

    private static int parseInt(String key, String v) {
        // range-checked before narrowing, so that a value beyond int reads as out of range
        return checkRange(key, parseLong(key, v)).intValue();
    }

    private static Transport parseTransport(String v) {
        String s = v.trim().toLowerCase(Locale.ROOT);
        for (Transport t : Transport.values()) {
            if (t.value().equals(s)) {
                return t;
            }
        }
        throw new IllegalArgumentException(TRANSPORT + " must be auto, epoll or nio, got " + s);
    }

    private static Shm parseShm(String v) {
        String s = v.trim().toLowerCase(Locale.ROOT);
        for (Shm t : Shm.values()) {
            if (t.value().equals(s)) {
                return t;
            }
        }
        throw new IllegalArgumentException(SHM + " must be auto, true or false, got " + s);
    }

    private static boolean parseBoolean(String key, String v) {
        String s = v.trim().toLowerCase(Locale.ROOT);
        if (!s.equals("true") && !s.equals("false")) {
            throw new IllegalArgumentException(key + " must be true or false, got " + s);
        }
        return s.equals("true");
    }

    private static Path parsePath(String key, String v) {
        try {
            return Path.of(v);
        } catch (InvalidPathException e) {
            throw new IllegalArgumentException(key + " is not a path: " + v, e);
        }
    }

    /**
     * Mutable builder; {@link #build()} validates (with the rules in the table of {@link TcpOptions}) and
     * returns immutable options. Every option starts unset (its default).
     */
    public static final class Builder {
        private Transport transport;
        private Integer spinMicros;
        private Integer segmentBytes;
        private Integer smallBytes;
        private Long maxUnexpectedBytes;
        private Long sendBudgetBytes;
        private Integer sendBudgetMessages;
        private Integer socketBufferBytes;
        private Shm shm;
        private Integer shmThresholdBytes;
        private Integer shmRingBytes;
        private Path shmDir;
        private Integer shmStagingBytes;
        private Integer shmCollectiveMinBytes;
        private Integer shmFastBytes;
        private Boolean shmNativeCopy;
        private Boolean shmCrossMemory;
        private String hostId;
        private Boolean freshNamespace;
        private Boolean connectAtCreation;

        private Builder() {
        }

        /** {@value TcpOptions#TRANSPORT}; {@code null}: unset. */
        public Builder transport(Transport v) { this.transport = v; return this; }
        /** {@value TcpOptions#SPIN_MICROS}. */
        public Builder spinMicros(int v) { this.spinMicros = v; return this; }
        /** {@value TcpOptions#SEGMENT_BYTES}. */
        public Builder segmentBytes(int v) { this.segmentBytes = v; return this; }
        /** {@value TcpOptions#SMALL_BYTES}. */
        public Builder smallBytes(int v) { this.smallBytes = v; return this; }
        /** {@value TcpOptions#MAX_UNEXPECTED_BYTES}. */
        public Builder maxUnexpectedBytes(long v) { this.maxUnexpectedBytes = v; return this; }
        /** {@value TcpOptions#SEND_BUDGET_BYTES}. */
        public Builder sendBudgetBytes(long v) { this.sendBudgetBytes = v; return this; }
        /** {@value TcpOptions#SEND_BUDGET_MESSAGES}. */
        public Builder sendBudgetMessages(int v) { this.sendBudgetMessages = v; return this; }
        /** {@value TcpOptions#SOCKET_BUFFER_BYTES}. */
        public Builder socketBufferBytes(int v) { this.socketBufferBytes = v; return this; }
        /** {@value TcpOptions#SHM}; {@code null}: unset. */
        public Builder shm(Shm v) { this.shm = v; return this; }
        /** {@value TcpOptions#SHM_THRESHOLD_BYTES}. */
        public Builder shmThresholdBytes(int v) { this.shmThresholdBytes = v; return this; }
        /** {@value TcpOptions#SHM_RING_BYTES}. */
        public Builder shmRingBytes(int v) { this.shmRingBytes = v; return this; }
        /** {@value TcpOptions#SHM_DIR}; {@code null}: unset. */
        public Builder shmDir(Path v) { this.shmDir = v; return this; }
        /** {@value TcpOptions#SHM_STAGING_BYTES}. */
        public Builder shmStagingBytes(int v) { this.shmStagingBytes = v; return this; }
        /** {@value TcpOptions#SHM_COLLECTIVE_MIN_BYTES}. */
        public Builder shmCollectiveMinBytes(int v) { this.shmCollectiveMinBytes = v; return this; }
        /** {@value TcpOptions#SHM_FAST_BYTES}. */
        public Builder shmFastBytes(int v) { this.shmFastBytes = v; return this; }
        /** {@value TcpOptions#SHM_NATIVE_COPY}. */
        public Builder shmNativeCopy(boolean v) { this.shmNativeCopy = v; return this; }
        /** {@value TcpOptions#SHM_CROSS_MEMORY}. */
        public Builder shmCrossMemory(boolean v) { this.shmCrossMemory = v; return this; }
        /** {@value TcpOptions#HOST_ID}; {@code null}: unset. */
        public Builder hostId(String v) { this.hostId = v; return this; }
        /** {@value TcpOptions#FRESH_NAMESPACE}. */
        public Builder freshNamespace(boolean v) { this.freshNamespace = v; return this; }

        /** {@value TcpOptions#CONNECT_AT_CREATION}. */
        public Builder connectAtCreation(boolean v) { this.connectAtCreation = v; return this; }

        /**
         * Validated options.
         *
         * @throws IllegalArgumentException naming the key, if a value is out of range
         */
        public TcpOptions build() {
            return new TcpOptions(this);
        }
    }
}
