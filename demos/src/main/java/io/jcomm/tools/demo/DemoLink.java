package io.jcomm.tools.demo;

import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.OpContext;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import io.jcomm.transfer.Notification;
import io.jcomm.transfer.TransferAgent;
import io.jcomm.transfer.TransferOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;

/**
 * One rank's side of a two-job transfer demo ({@code demo --pd}, {@code demo --weights}): the store
 * where both jobs' transfer agents meet, this rank's agent in it, and the run's keys. One job hosts
 * (its launcher store is the default meeting place, it registers memory and publishes descriptors),
 * the other names that store with {@code --store HOST:PORT}; agents are named
 * {@code <demo>-<role>-<rank>} and every key of a run lies under the demo's prefix.
 *
 * <p>Every wait has the job's deadline ({@code JCOMM_TIMEOUT_MS}): a missed one is a
 * {@link CommTimeoutException} naming what was awaited, which fails the rank.
 */
final class DemoLink {

    /** What a rank does once its agent is open: its exit status. */
    @FunctionalInterface
    interface Body {
        int run(DemoLink link);
    }

    private final String demo;
    private final String keyPrefix;
    private final String role;
    private final int rank;
    private final Duration timeout;
    private final TcpStore store;
    private final TransferAgent agent;

    private DemoLink(String demo, String keyPrefix, String role, int rank, Duration timeout, TcpStore store,
                     TransferAgent agent) {
        this.demo = demo;
        this.keyPrefix = keyPrefix;
        this.role = role;
        this.rank = rank;
        this.timeout = timeout;
        this.store = store;
        this.agent = agent;
    }

    /**
     * Connects to the store (the job's own launcher store, or {@code storeAddress}), opens this rank's
     * agent there, runs {@code body} and closes both.
     *
     * @param demo         the demo's name in messages and agent names, e.g. {@code pd}
     * @param keyPrefix    the run's store keys, e.g. {@code jcomm/pd-demo/}
     * @param role         this job's role
     * @param hostRole     the role whose own store is the default; every other role must name one
     * @param storeAddress {@code HOST:PORT}, or null for the job's own store
     * @return the body's exit status, or 2 for a usage error (printed)
     */
    static int run(String demo, String keyPrefix, String role, String hostRole, String storeAddress, Duration timeout,
                   Body body) {
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        String host = cfg.masterAddr();
        int port = cfg.masterPort();
        if (storeAddress != null) {
            int colon = storeAddress.lastIndexOf(':');
            if (colon <= 0 || !storeAddress.substring(colon + 1).matches("[0-9]{1,5}")) {
                System.err.println("demo --" + demo + ": --store is HOST:PORT, not " + storeAddress);
                return 2;
            }
            host = storeAddress.substring(0, colon);
            port = Integer.parseInt(storeAddress.substring(colon + 1));
        } else if (!role.equals(hostRole)) {
            System.err.println("demo --" + demo + " " + role + ": give --store HOST:PORT, the store where the " + hostRole
                    + " job's agents are (its commrun's --master-addr and --master-port, or a standalone commstore)");
            return 2;
        }
        TcpStoreConfig.Builder sc = TcpStoreConfig.builder().host(host).port(port).timeout(timeout);
        cfg.tokenFile().ifPresent(sc::tokenFile);
        // the address the store's host reaches this process by (JCOMM_HOSTNAME when set)
        String listen = cfg.toBuilder().masterAddr(host).build().hostname();
        TransferOptions.Builder ob = TransferOptions.builder(agentName(demo, role, cfg.rank()))
                .namespace(keyPrefix + "agents").listenHost(listen).timeout(timeout);
        cfg.tokenFile().ifPresent(ob::tokenFile);
        try (TcpStore store = TcpStore.connect(sc.build());
             TransferAgent agent = TransferAgent.open(store, ob.build())) {
            return body.run(new DemoLink(demo, keyPrefix, role, cfg.rank(), timeout, store, agent));
        }
    }

    /** The agent name of {@code rank} of the job of {@code role}. */
    static String agentName(String demo, String role, int rank) {
        return demo + "-" + role + "-" + rank;
    }

    /** The agent name of {@code rank} of the job of {@code role} in this demo. */
    String agentName(String role, int rank) {
        return agentName(demo, role, rank);
    }

    /** The store key {@code <prefix><what>/<rank>}. */
    String key(String what, int rank) {
        return keyPrefix + what + "/" + rank;
    }

    TcpStore store() {
        return store;
    }

    TransferAgent agent() {
        return agent;
    }

    int rank() {
        return rank;
    }

    Duration timeout() {
        return timeout;
    }

    /** {@code demo --<demo>: <role> rank <rank>}, the start of this rank's messages. */
    String who() {
        return "demo --" + demo + ": " + role + " rank " + rank;
    }

    /** Publishes this rank's shape of the run (what the other job must agree with) under {@code shape/<rank>}. */
    void publishShape(String shape) {
        store.set(key("shape", rank), shape.getBytes(StandardCharsets.US_ASCII));
    }

    /** The shape {@code rank} of the hosting job published, waiting for it up to the deadline. */
    String shapeOf(int rank) {
        return new String(getKey(key("shape", rank), "shape of rank " + rank), StandardCharsets.US_ASCII);
    }

    /** The value of {@code key}, waiting for it up to the deadline; {@code what} names it in the failure. */
    byte[] getKey(String key, String what) {
        try {
            return store.get(key, timeout);
        } catch (CommTimeoutException e) {
            throw new CommTimeoutException(context("store"), who() + ": no " + what + " (store key " + key + ") within "
                    + timeout, e);
        }
    }

    /** Says, under {@code <what>/<rank>}, that this rank is done with the other job's rank {@code peer}. */
    void markDone(String what, int peer) {
        store.set(key(what + "/" + peer, rank), new byte[0]);
    }

    /** Waits until rank {@code of} of the other job said it is done with this rank ({@link #markDone}). */
    void awaitDone(String what, int of) {
        getKey(key(what + "/" + rank, of), what + " of rank " + of);
    }

    /** Removes the mark {@link #awaitDone} waits for. */
    void clearDone(String what, int of) {
        store.deleteKey(key(what + "/" + rank, of));
    }

    /**
     * The next notification, up to the deadline.
     *
     * @param waitingFor what it should be, for the failure's message
     * @throws CommTimeoutException when none comes in time (e.g. the other job died)
     */
    Notification next(String waitingFor) {
        return agent.pollNotification(timeout).orElseThrow(() -> new CommTimeoutException(context("notification"),
                who() + ": no notification within " + timeout + " (waiting for " + waitingFor + ")"));
    }

    /**
     * The payload of {@code n}, checked: it comes from {@code from} with {@code bytes} bytes.
     *
     * @throws IllegalStateException otherwise
     */
    ByteBuffer payload(Notification n, String from, int bytes) {
        if (!n.from().equals(from) || n.payload().length != bytes) {
            throw new IllegalStateException(who() + ": unexpected " + n + " (expected " + bytes + " bytes from " + from + ")");
        }
        return ByteBuffer.wrap(n.payload()).order(ByteOrder.LITTLE_ENDIAN);
    }

    private OpContext context(String operation) {
        return OpContext.of("demo-" + demo + ":" + role, rank, operation);
    }

    /** Little-endian bytes of {@code values}, a notification's payload. */
    static byte[] longs(long... values) {
        ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long v : values) {
            b.putLong(v);
        }
        return b.array();
    }

    /** Microseconds since the epoch: one clock for both jobs on one host. */
    static long epochMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    /** The {@code p}-th percentile (nearest rank) of {@code sorted}, 0 when empty. */
    static long percentile(long[] sorted, int p) {
        if (sorted.length == 0) {
            return 0;
        }
        int i = (int) Math.ceil(p / 100.0 * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
    }
}
