package io.jcomm.cpu.gloo;

import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.store.PrefixStore;
import io.jcomm.api.store.Store;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;

/**
 * A Java rank of PyTorch 1.13's default gloo process group: what
 * {@code torch.distributed.init_process_group("gloo", init_method="env://")} does on a Python rank,
 * done from Java so that Java and Python ranks form one group.
 *
 * <h2>What joining does (torch 1.13's order; another order deadlocks)</h2>
 * <ol>
 *   <li>The caller connects the store (e.g. {@code TcpRendezvous} with worker counting, which
 *       adds 1 to {@code init/} like torch's {@code TCPStore(world_size=...)}).</li>
 *   <li>A gloo full mesh per device under the key chain {@code default_pg/0/<device>/}
 *       (keys {@code rank_<r>} and {@code <r>}), see {@link GlooBackend}.</li>
 *   <li>The store-based barrier: {@code ADD default_pg/store_based_barrier_key:1 1}, then poll
 *       with {@code ADD +0} every 10 ms until it equals the world size.</li>
 *   <li>The sequence number: rank 0 sets {@code default_pg/0/SEQ_NUM_STORE_KEY} (8 bytes,
 *       little-endian); the others wait for it and read it.</li>
 * </ol>
 * The result is an ordinary {@link ProcessGroup} (made by {@link CpuGroups#create} on the
 * {@code gloo} backend, named {@code "0"} like torch's default group) whose tensor collectives and
 * point-to-point use the same tags, contexts and gloo algorithms as the Python ranks. The
 * argument check and the goodbye of {@link GlooBackend}, and the group's codec check, are off
 * (Python ranks speak none of them): as in PyTorch,
 * ranks must agree on sizes and dtypes. {@code F16} reductions run in half precision like
 * PyTorch's ({@value GlooBackend#TORCH_HALF_OPTION}); {@code BF16} and {@code BOOL} reductions and
 * {@code AVG} exist only on the Java side (torch 1.13's gloo rejects them). The object collectives
 * are not compatible with torch's (which pickle).
 *
 * <h2>Network</h2>
 * Both sides must bind the same address family: set {@value GlooBackend#IFNAME_OPTION} (like
 * {@code GLOO_SOCKET_IFNAME}) or {@value GlooBackend#HOSTNAME_OPTION} here, and
 * {@code GLOO_SOCKET_IFNAME} on the Python side. Without either, the device binds the address
 * this host's name resolves to, or loopback when it resolves to nothing usable (torch's default).
 * {@value GlooBackend#DEVICES_OPTION} must equal the number of interfaces in the Python ranks'
 * {@code GLOO_SOCKET_IFNAME} (e.g. 2 for {@code lo,lo}).
 */
public final class TorchGlooGroup implements AutoCloseable {

    /** torch's prefix of the default group's keys ({@code PrefixStore("default_pg", store)}). */
    public static final String DEFAULT_PG_PREFIX = "default_pg";
    /** The default group's name in torch 1.13 (its store prefix below {@link #DEFAULT_PG_PREFIX}). */
    public static final String DEFAULT_GROUP_NAME = "0";
    /** The key of the store-based barrier after {@code init_process_group}. */
    public static final String BARRIER_KEY = "store_based_barrier_key:1";
    /** The key of the group's sequence number. */
    public static final String SEQ_NUM_KEY = "SEQ_NUM_STORE_KEY";

    private static final long BARRIER_POLL_MILLIS = 10;

    private final ProcessGroup group;
    private final long sequenceNumber;

    private TorchGlooGroup(ProcessGroup group, long sequenceNumber) {
        this.group = group;
        this.sequenceNumber = sequenceNumber;
    }

    /**
     * Joins torch's default gloo group as {@code rank} of {@code size}, bounded by {@code timeout}
     * (which is also the group's default timeout).
     *
     * @param store   the job's store (not prefixed), already connected
     * @param options backend options ({@value GlooBackend#IFNAME_OPTION},
     *                {@value GlooBackend#HOSTNAME_OPTION}, {@value GlooBackend#DEVICES_OPTION});
     *                the options that keep the group torch-compatible cannot be overridden
     * @throws IllegalArgumentException if {@code rank} is not in {@code [0, size)} or {@code size < 2}
     * @throws CommTimeoutException     if the other ranks do not all join in time
     * @throws CommException            for any other failure
     */
    public static TorchGlooGroup joinDefaultGroup(Store store, int rank, int size, Duration timeout,
                                                  Map<String, String> options) {
        Objects.requireNonNull(store, "store");
        Objects.requireNonNull(timeout, "timeout");
        OpContext op = OpContext.of(DEFAULT_GROUP_NAME, rank, "joinDefaultGroup");
        if (size < 2 || rank < 0 || rank >= size) {
            throw op.invalidArgument("rank " + rank + " of " + size + ": a gloo group needs 2 or more ranks");
        }
        Deadline deadline = Deadline.after(timeout);
        String host = options.containsKey(GlooBackend.HOSTNAME_OPTION) || options.containsKey(GlooBackend.IFNAME_OPTION)
                ? "127.0.0.1" : defaultHostname();
        Store pg = new PrefixStore(DEFAULT_PG_PREFIX, store);
        CpuGroupOptions.Builder b = CpuGroupOptions.builder().store(pg).groupName(DEFAULT_GROUP_NAME).rank(rank)
                .size(size).backend(GlooBackend.NAME).timeout(timeout).hostname(host);
        options.forEach(b::option);
        b.options(GlooOptions.builder().checkArgs(false).goodbye(false).torchHalf(true).build())
                .option(CpuGroups.CODEC_CHECK_OPTION, "false");
        // The group works under PrefixStore("0", pg): gloo's keys are default_pg/0/<device>/...
        ProcessGroup group = CpuGroups.create(b.build());
        try {
            storeBarrier(pg, size, deadline, op);
            long seq = sequenceNumber(new PrefixStore(DEFAULT_GROUP_NAME, pg), rank, deadline, op);
            return new TorchGlooGroup(group, seq);
        } catch (RuntimeException e) {
            group.close();
            throw e;
        }
    }

    private static void storeBarrier(Store pg, int size, Deadline deadline, OpContext op) {
        long n = pg.add(BARRIER_KEY, 1);
        while (n != size) {
            if (n > size) {
                throw new ProtocolException(op, BARRIER_KEY + " reached " + n + " > world size " + size
                        + ": another group of the same store joined");
            }
            if (deadline.isExpired()) {
                throw new CommTimeoutException(op, "store-based barrier: " + n + " of " + size + " ranks arrived");
            }
            try {
                Thread.sleep(BARRIER_POLL_MILLIS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CommTimeoutException(op, "interrupted in the store-based barrier");
            }
            n = pg.add(BARRIER_KEY, 0);
        }
    }

    private static long sequenceNumber(Store group, int rank, Deadline deadline, OpContext op) {
        if (rank == 0) {
            long seq = 1 + ThreadLocalRandom.current().nextInt(Integer.MAX_VALUE);
            group.set(SEQ_NUM_KEY, littleEndian(seq));
            return seq;
        }
        group.wait(List.of(SEQ_NUM_KEY), deadline.remaining());
        byte[] v = group.get(SEQ_NUM_KEY, deadline.remaining());
        if (v.length != Long.BYTES) {
            throw new ProtocolException(op, SEQ_NUM_KEY + " holds " + v.length + " bytes, expected 8");
        }
        long seq = 0;
        for (int i = Long.BYTES - 1; i >= 0; i--) {
            seq = (seq << 8) | (v[i] & 0xff);
        }
        return seq;
    }

    private static byte[] littleEndian(long v) {
        byte[] b = new byte[Long.BYTES];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) (v >>> (8 * i));
        }
        return b;
    }

    /** torch's default device: this host's name when it resolves to a bindable address, else loopback. */
    static String defaultHostname() {
        try {
            InetAddress local = InetAddress.getLocalHost();
            try (ServerSocket s = new ServerSocket()) {
                s.bind(new InetSocketAddress(local, 0));
            }
            return local.getHostName();
        } catch (IOException | RuntimeException e) {
            return "127.0.0.1";
        }
    }

    /** The group: its tensor collectives and point-to-point are those of torch's ProcessGroupGloo. */
    public ProcessGroup group() {
        return group;
    }

    public int rank() {
        return group.rank();
    }

    public int size() {
        return group.size();
    }

    /** The group's sequence number, set by rank 0 (torch's {@code _get_sequence_number_for_group}). */
    public long sequenceNumber() {
        return sequenceNumber;
    }

    /** Closes the group (the store is the caller's). */
    @Override
    public void close() {
        group.close();
    }

    @Override
    public String toString() {
        return "TorchGlooGroup(rank=" + rank() + "/" + size() + ", seq=" + sequenceNumber + ", " + group + ")";
    }
}
