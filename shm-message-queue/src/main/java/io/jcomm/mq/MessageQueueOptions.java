package io.jcomm.mq;

import io.jcomm.api.ObjectCodec;
import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Collections;
import java.util.Objects;

/**
 * Immutable configuration of a {@link MessageQueue} (and of {@link QueueWriter}/{@link QueueReader}).
 * Every option has a default; build with {@link #builder()}.
 *
 * <table>
 *   <caption>Options</caption>
 *   <tr><th>option</th><th>default</th><th>meaning</th></tr>
 *   <tr><td>{@code maxMessageBytes}</td><td>64 MiB</td><td>largest message; bigger ones are refused before anything is sent</td></tr>
 *   <tr><td>{@code ipcTermLength}</td><td>4 MiB</td><td>Aeron term of the same-host stream (log = 3 terms in /dev/shm; window = term/2)</td></tr>
 *   <tr><td>{@code ipcMtu}</td><td>min(65504, ipcTermLength / 8)</td><td>largest same-host frame (one chunk of a message)</td></tr>
 *   <tr><td>{@code udpTermLength}</td><td>4 MiB</td><td>Aeron term of the remote stream</td></tr>
 *   <tr><td>{@code udpMtu}</td><td>1408</td><td>UDP frame size (keep below the network MTU)</td></tr>
 *   <tr><td>{@code idle}</td><td>automatic: {@link IdleConfig#forHost}</td><td>how a waiting writer or reader idles;
 *       by default it spins first only if the host has a core for every process waiting on the queue</td></tr>
 *   <tr><td>{@code timeout}</td><td>the group's default timeout</td><td>creation and the overloads without a timeout</td></tr>
 *   <tr><td>{@code hostId}</td><td>{@code JCOMM_HOST_ID}, else boot id and host name ({@link io.jcomm.api.HostIdentity})</td><td>same id = same host = shared memory</td></tr>
 *   <tr><td>{@code forceRemote}</td><td>false</td><td>this rank reads over UDP even on the writer's host (tests)</td></tr>
 *   <tr><td>{@code udpAddress}</td><td>first non-loopback IPv4 address, else 127.0.0.1</td><td>this host's address for UDP endpoints</td></tr>
 *   <tr><td>{@code media}</td><td>none: the queue starts its own driver per host</td><td>a shared {@link AeronMedia} of this process</td></tr>
 *   <tr><td>{@code aeronDirectory}</td><td>none</td><td>a launcher-supplied driver to attach to instead of embedding one</td></tr>
 *   <tr><td>{@code mediaOptions}</td><td>{@link AeronMedia.Options#defaults()}</td><td>driver directory, liveness, driver idle strategy</td></tr>
 *   <tr><td>{@code codec}</td><td>the group's codec</td><td>codec of {@code enqueueObject}/{@code dequeueObject}</td></tr>
 *   <tr><td>{@code ackInterval}</td><td>64</td><td>a remote reader acknowledges at least every N messages (and whenever it idles)</td></tr>
 *   <tr><td>{@code wakeups}</td><td>true</td><td>an idle local reader blocks on a loopback socket and the writer
 *       wakes it (idle CPU ~0, tens of µs to wake) instead of parking in a loop (up to 1 ms late)</td></tr>
 *   <tr><td>{@code closeLinger}</td><td>2 s</td><td>how long a closing writer waits for remote readers to acknowledge its close</td></tr>
 * </table>
 */
public final class MessageQueueOptions {

    public static final int MAX_MESSAGE_BYTES_DEFAULT = 64 << 20;
    public static final int TERM_LENGTH_DEFAULT = 4 << 20;
    public static final int IPC_MTU_DEFAULT = 65504;
    public static final int UDP_MTU_DEFAULT = 1408;

    private final int maxMessageBytes;
    private final int ipcTermLength;
    private final int ipcMtu;
    private final int udpTermLength;
    private final int udpMtu;
    private final IdleConfig idle;
    private final Duration timeout;
    private final String hostId;
    private final boolean forceRemote;
    private final String udpAddress;
    private final AeronMedia media;
    private final Path aeronDirectory;
    private final AeronMedia.Options mediaOptions;
    private final ObjectCodec codec;
    private final int ackInterval;
    private final Duration closeLinger;
    private final boolean wakeups;

    private MessageQueueOptions(Builder b) {
        this.maxMessageBytes = b.maxMessageBytes;
        this.ipcTermLength = b.ipcTermLength;
        this.ipcMtu = b.ipcMtu > 0 ? b.ipcMtu : Math.min(IPC_MTU_DEFAULT, b.ipcTermLength / 8);
        this.udpTermLength = b.udpTermLength;
        this.udpMtu = b.udpMtu;
        this.idle = b.idle;
        this.timeout = b.timeout;
        this.hostId = b.hostId;
        this.forceRemote = b.forceRemote;
        this.udpAddress = b.udpAddress;
        this.media = b.media;
        this.aeronDirectory = b.aeronDirectory;
        this.mediaOptions = Objects.requireNonNull(b.mediaOptions, "mediaOptions");
        this.codec = b.codec;
        this.ackInterval = b.ackInterval;
        this.closeLinger = Objects.requireNonNull(b.closeLinger, "closeLinger");
        this.wakeups = b.wakeups;
        if (maxMessageBytes < 0 || maxMessageBytes > QueueHandle.MAX_MESSAGE_LIMIT) {
            throw new IllegalArgumentException("maxMessageBytes " + maxMessageBytes + " not in [0, 1 GiB]");
        }
        checkTerm("ipcTermLength", ipcTermLength);
        checkTerm("udpTermLength", udpTermLength);
        if (ipcMtu < 4096 || ipcMtu > IPC_MTU_DEFAULT || ipcMtu % 32 != 0 || ipcMtu > ipcTermLength / 8) {
            throw new IllegalArgumentException("ipcMtu " + ipcMtu + " must be a multiple of 32 in [4096, 65504] and <= ipcTermLength/8");
        }
        if (udpMtu < 1024 || udpMtu > IPC_MTU_DEFAULT || udpMtu % 32 != 0 || udpMtu > udpTermLength / 8) {
            throw new IllegalArgumentException("udpMtu " + udpMtu + " must be a multiple of 32 in [1024, 65504] and <= udpTermLength/8");
        }
        if (timeout != null && (timeout.isNegative() || timeout.isZero())) {
            throw new IllegalArgumentException("timeout must be positive");
        }
        if (ackInterval < 1) {
            throw new IllegalArgumentException("ackInterval must be >= 1");
        }
        if (media != null && aeronDirectory != null) {
            throw new IllegalArgumentException("set either media or aeronDirectory, not both");
        }
    }

    private static void checkTerm(String name, int v) {
        if (Integer.bitCount(v) != 1 || v < 64 * 1024 || v > 1 << 30) {
            throw new IllegalArgumentException(name + " " + v + " must be a power of two in [64 KiB, 1 GiB]");
        }
    }

    public static Builder builder() {
        return new Builder();
    }

    public static MessageQueueOptions defaults() {
        return builder().build();
    }

    public Builder toBuilder() {
        Builder b = new Builder();
        b.maxMessageBytes = maxMessageBytes;
        b.ipcTermLength = ipcTermLength;
        b.ipcMtu = ipcMtu == Math.min(IPC_MTU_DEFAULT, ipcTermLength / 8) ? 0 : ipcMtu;
        b.udpTermLength = udpTermLength;
        b.udpMtu = udpMtu;
        b.idle = idle;
        b.timeout = timeout;
        b.hostId = hostId;
        b.forceRemote = forceRemote;
        b.udpAddress = udpAddress;
        b.media = media;
        b.aeronDirectory = aeronDirectory;
        b.mediaOptions = mediaOptions;
        b.codec = codec;
        b.ackInterval = ackInterval;
        b.closeLinger = closeLinger;
        b.wakeups = wakeups;
        return b;
    }

    public int maxMessageBytes() { return maxMessageBytes; }
    public int ipcTermLength() { return ipcTermLength; }
    public int ipcMtu() { return ipcMtu; }
    public int udpTermLength() { return udpTermLength; }
    public int udpMtu() { return udpMtu; }
    /** The configured idle strategy, or {@code null} for "automatic" ({@link #idleFor(int)}). */
    public IdleConfig idle() { return idle; }

    /**
     * The idle strategy to use when {@code participantsOnHost} processes of this queue wait on this
     * host: the configured one, else {@link IdleConfig#forHost} with this machine's core count.
     */
    public IdleConfig idleFor(int participantsOnHost) {
        return idle != null ? idle : IdleConfig.forHost(participantsOnHost, Runtime.getRuntime().availableProcessors());
    }
    /** The configured timeout, or {@code null} for "the group's default". */
    public Duration timeout() { return timeout; }
    public boolean forceRemote() { return forceRemote; }
    /** The shared media, or {@code null}. */
    public AeronMedia media() { return media; }
    /** A launcher-supplied driver directory, or {@code null}. */
    public Path aeronDirectory() { return aeronDirectory; }
    public AeronMedia.Options mediaOptions() { return mediaOptions; }
    /** The codec, or {@code null} for "the group's codec". */
    public ObjectCodec codec() { return codec; }
    public int ackInterval() { return ackInterval; }
    public Duration closeLinger() { return closeLinger; }
    public boolean wakeups() { return wakeups; }

    /** This host's id: the option, else {@link io.jcomm.api.HostIdentity#local()} ({@code JCOMM_HOST_ID}, else boot id and host name). */
    public String hostId() {
        if (hostId != null) {
            return hostId;
        }
        return io.jcomm.api.HostIdentity.local();
    }

    /** This host's address for UDP endpoints: the option, else the first up non-loopback IPv4, else 127.0.0.1. */
    public String udpAddress() {
        if (udpAddress != null) {
            return udpAddress;
        }
        try {
            for (NetworkInterface nif : Collections.list(NetworkInterface.getNetworkInterfaces())) {
                if (!nif.isUp() || nif.isLoopback() || nif.isVirtual()) {
                    continue;
                }
                for (InetAddress a : Collections.list(nif.getInetAddresses())) {
                    if (a instanceof Inet4Address && !a.isLoopbackAddress() && !a.isLinkLocalAddress()) {
                        return a.getHostAddress();
                    }
                }
            }
        } catch (SocketException e) {
            // fall back to loopback
        }
        return "127.0.0.1";
    }

    @Override
    public String toString() {
        return "MessageQueueOptions{max=" + maxMessageBytes + ", ipcTerm=" + ipcTermLength + ", ipcMtu=" + ipcMtu
                + ", udpTerm=" + udpTermLength + ", udpMtu=" + udpMtu + ", idle=" + idle + ", timeout=" + timeout
                + ", hostId=" + hostId + ", forceRemote=" + forceRemote + ", udpAddress=" + udpAddress
                + ", media=" + media + ", aeronDirectory=" + aeronDirectory + ", " + mediaOptions + "}";
    }

    /** Mutable builder of {@link MessageQueueOptions}. */
    public static final class Builder {
        private int maxMessageBytes = MAX_MESSAGE_BYTES_DEFAULT;
        private int ipcTermLength = TERM_LENGTH_DEFAULT;
        private int ipcMtu; // 0: derived from the term length
        private int udpTermLength = TERM_LENGTH_DEFAULT;
        private int udpMtu = UDP_MTU_DEFAULT;
        private IdleConfig idle;
        private Duration timeout;
        private String hostId;
        private boolean forceRemote;
        private String udpAddress;
        private AeronMedia media;
        private Path aeronDirectory;
        private AeronMedia.Options mediaOptions = AeronMedia.Options.defaults();
        private ObjectCodec codec;
        private int ackInterval = 64;
        private Duration closeLinger = Duration.ofSeconds(2);
        private boolean wakeups = true;

        private Builder() {
        }

        public Builder maxMessageBytes(int v) { this.maxMessageBytes = v; return this; }
        public Builder ipcTermLength(int v) { this.ipcTermLength = v; return this; }
        /** Largest same-host frame; 0 (default) derives it from the term length. */
        public Builder ipcMtu(int v) { this.ipcMtu = v; return this; }
        public Builder udpTermLength(int v) { this.udpTermLength = v; return this; }
        public Builder udpMtu(int v) { this.udpMtu = v; return this; }
        /** Fixed idle strategy ({@code null}: automatic, see {@link MessageQueueOptions#idleFor}). */
        public Builder idle(IdleConfig v) { this.idle = v; return this; }
        public Builder timeout(Duration v) { this.timeout = v; return this; }
        public Builder hostId(String v) { this.hostId = v; return this; }
        public Builder forceRemote(boolean v) { this.forceRemote = v; return this; }
        public Builder udpAddress(String v) { this.udpAddress = v; return this; }
        public Builder media(AeronMedia v) { this.media = v; return this; }
        public Builder aeronDirectory(Path v) { this.aeronDirectory = v; return this; }
        public Builder mediaOptions(AeronMedia.Options v) { this.mediaOptions = v; return this; }
        public Builder codec(ObjectCodec v) { this.codec = v; return this; }
        public Builder ackInterval(int v) { this.ackInterval = v; return this; }
        public Builder closeLinger(Duration v) { this.closeLinger = v; return this; }
        /** Idle local readers sleep until the writer wakes them (default true); false: they park in a loop. */
        public Builder wakeups(boolean v) { this.wakeups = v; return this; }

        public MessageQueueOptions build() {
            return new MessageQueueOptions(this);
        }
    }
}
