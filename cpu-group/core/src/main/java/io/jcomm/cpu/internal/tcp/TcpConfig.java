package io.jcomm.cpu.internal.tcp;

import io.jcomm.cpu.TcpOptions;
import io.jcomm.cpu.spi.CpuBackendContext;
import java.util.Locale;

/**
 * The tcp backend's options (from {@link CpuBackendContext#options()}), read once and validated.
 *
 * <table>
 *   <caption>Options</caption>
 *   <tr><th>key</th><th>meaning</th><th>default</th></tr>
 *   <tr><td>{@value TcpOptions#TRANSPORT}</td><td>{@code auto} (epoll when available, else NIO), {@code epoll}, {@code nio}</td><td>auto</td></tr>
 *   <tr><td>{@value TcpOptions#SPIN_MICROS}</td><td>how long a waiting call polls before it blocks in epoll/select</td>
 *       <td>5 (adaptive below that; longer polls measured slower on this 2-core machine)</td></tr>
 *   <tr><td>{@value TcpOptions#SEGMENT_BYTES}</td><td>pipelining unit of large messages</td><td>1 MiB</td></tr>
 *   <tr><td>{@value TcpOptions#SMALL_BYTES}</td><td>up to this size collectives use direct (one-round) algorithms,
 *       above it ring/chain algorithms</td><td>64 KiB</td></tr>
 *   <tr><td>{@value TcpOptions#MAX_UNEXPECTED_BYTES}</td><td>memory for messages that arrive before their receive is posted</td><td>256 MiB</td></tr>
 *   <tr><td>{@value TcpOptions#SEND_BUDGET_BYTES}</td><td>per peer: bytes of data messages (headers, and payloads that
 *       go by socket) sent to the peer and not yet consumed by a receive there. A send that would exceed it
 *       waits for the peer's credit, bounded by its deadline (a message larger than the budget goes alone).
 *       Bounds what a rank buffers for a slower peer, and how far it runs ahead of it</td><td>4 MiB</td></tr>
 *   <tr><td>{@value TcpOptions#SEND_BUDGET_MESSAGES}</td><td>per peer: data messages sent and not yet consumed (the same
 *       credit, counted in messages: bounds how far a pipeline of small messages runs ahead, in steps)</td>
 *       <td>64</td></tr>
 *   <tr><td>{@value TcpOptions#SOCKET_BUFFER_BYTES}</td><td>SO_SNDBUF/SO_RCVBUF (0: the OS default)</td><td>0</td></tr>
 *   <tr><td>{@value TcpOptions#SHM}</td><td>{@code auto}/{@code true}: peers on the same host move large payloads
 *       through a shared-memory ring; {@code false}: sockets only</td><td>auto</td></tr>
 *   <tr><td>{@value TcpOptions#SHM_THRESHOLD_BYTES}</td><td>payloads from this size go through shared memory</td><td>64 KiB</td></tr>
 *   <tr><td>{@value TcpOptions#SHM_RING_BYTES}</td><td>ring capacity per directed pair (power of two; the
 *       sender creates it with its first payload of at least the threshold to that peer)</td><td>4 MiB</td></tr>
 *   <tr><td>{@value TcpOptions#SHM_STAGING_BYTES}</td><td>shared staging region per rank, for collectives of groups
 *       whose ranks all share one host: two slots of input and result areas, made by the first collective
 *       that uses them (0: off; rings only)</td>
 *       <td>16 MiB</td></tr>
 *   <tr><td>{@value TcpOptions#SHM_COLLECTIVE_MIN_BYTES}</td><td>from this size such groups run all-reduce,
 *       reduce-scatter, all-gather and broadcast through the staging regions</td><td>256 KiB</td></tr>
 *   <tr><td>{@value TcpOptions#SHM_DIR}</td><td>directory of the ring files</td><td>/dev/shm</td></tr>
 *   <tr><td>{@value TcpOptions#FRESH_NAMESPACE}</td><td>{@code true}: the caller guarantees that the group's store
 *       namespace is used by this incarnation of the group only (as {@code ParallelState} does), so creation
 *       skips the per-rank incarnation counter: one store round trip fewer</td><td>false</td></tr>
 *   <tr><td>{@value TcpOptions#HOST_ID}</td><td>identity of this host (ranks with equal ids try shared memory)</td><td>{@link io.jcomm.api.HostIdentity#local()}: {@code JCOMM_HOST_ID}, else boot id + host name</td></tr>
 * </table>
 */
final class TcpConfig {


    final String transport;
    final long spinNanos;
    final int segmentBytes;
    final int smallBytes;
    final long maxUnexpectedBytes;
    final long sendBudgetBytes;
    final int sendBudgetMessages;
    final int socketBufferBytes;
    final boolean shm;
    final int shmThresholdBytes;
    final int shmRingBytes;
    final String shmDir;
    final int shmStagingBytes;
    final int shmCollectiveMinBytes;
    final String hostId;
    final boolean freshNamespace;

    TcpConfig(CpuBackendContext ctx) {
        transport = ctx.option(TcpOptions.TRANSPORT, "auto").trim().toLowerCase(Locale.ROOT);
        if (!transport.equals("auto") && !transport.equals("epoll") && !transport.equals("nio")) {
            throw new IllegalArgumentException(TcpOptions.TRANSPORT + " must be auto, epoll or nio, got " + transport);
        }
        spinNanos = 1000L * intOption(ctx, TcpOptions.SPIN_MICROS, 5, 0, 1_000_000);
        segmentBytes = intOption(ctx, TcpOptions.SEGMENT_BYTES, 1 << 20, 4096, 1 << 30);
        smallBytes = intOption(ctx, TcpOptions.SMALL_BYTES, 64 << 10, 0, 1 << 30);
        maxUnexpectedBytes = longOption(ctx, TcpOptions.MAX_UNEXPECTED_BYTES, 256L << 20, 0, Long.MAX_VALUE);
        sendBudgetBytes = longOption(ctx, TcpOptions.SEND_BUDGET_BYTES, 4L << 20, Frame.SIZE, 1L << 30);
        sendBudgetMessages = intOption(ctx, TcpOptions.SEND_BUDGET_MESSAGES, 64, 1, 1 << 20);
        socketBufferBytes = intOption(ctx, TcpOptions.SOCKET_BUFFER_BYTES, 0, 0, 1 << 30);
        String s = ctx.option(TcpOptions.SHM, "auto").trim().toLowerCase(Locale.ROOT);
        if (!s.equals("auto") && !s.equals("true") && !s.equals("false")) {
            throw new IllegalArgumentException(TcpOptions.SHM + " must be auto, true or false, got " + s);
        }
        shm = !s.equals("false");
        shmThresholdBytes = intOption(ctx, TcpOptions.SHM_THRESHOLD_BYTES, 64 << 10, 0, Integer.MAX_VALUE);
        shmRingBytes = intOption(ctx, TcpOptions.SHM_RING_BYTES, 4 << 20, 64 << 10, 1 << 30);
        if (Integer.bitCount(shmRingBytes) != 1) {
            throw new IllegalArgumentException(TcpOptions.SHM_RING_BYTES + " must be a power of two, got " + shmRingBytes);
        }
        shmDir = ctx.option(TcpOptions.SHM_DIR, "/dev/shm");
        shmStagingBytes = intOption(ctx, TcpOptions.SHM_STAGING_BYTES, 16 << 20, 0, 1 << 30) & ~16383;
        shmCollectiveMinBytes = intOption(ctx, TcpOptions.SHM_COLLECTIVE_MIN_BYTES, 256 << 10, 0, Integer.MAX_VALUE);
        hostId = ctx.option(TcpOptions.HOST_ID, null);
        String fresh = ctx.option(TcpOptions.FRESH_NAMESPACE, "false").trim().toLowerCase(Locale.ROOT);
        if (!fresh.equals("true") && !fresh.equals("false")) {
            throw new IllegalArgumentException(TcpOptions.FRESH_NAMESPACE + " must be true or false, got " + fresh);
        }
        freshNamespace = fresh.equals("true");
    }

    private static int intOption(CpuBackendContext ctx, String key, int def, int min, int max) {
        long v = longOption(ctx, key, def, min, max);
        return (int) v;
    }

    private static long longOption(CpuBackendContext ctx, String key, long def, long min, long max) {
        String v = ctx.option(key, null);
        if (v == null) {
            return def;
        }
        long n;
        try {
            n = Long.parseLong(v.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(key + " is not an integer: " + v, e);
        }
        if (n < min || n > max) {
            throw new IllegalArgumentException(key + " = " + n + " not in [" + min + ", " + max + "]");
        }
        return n;
    }
}
