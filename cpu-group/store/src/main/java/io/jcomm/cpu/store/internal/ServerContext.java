package io.jcomm.cpu.store.internal;

import java.security.SecureRandom;
import java.util.concurrent.ThreadLocalRandom;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What every connection of one server shares: limits, token, the engine, statistics. Used only on
 * the server's event-loop thread, except the statistics (read from anywhere).
 */
public final class ServerContext {

    static final Logger LOG = LoggerFactory.getLogger("io.jcomm.cpu.store.TcpStoreServer");

    private static final int WARNINGS_PER_SECOND = 10;

    final String name;
    final byte[] token;
    final int maxKeyBytes;
    final int maxValueBytes;
    final int maxKeysPerRequest;
    final long maxRequestBytes;
    final int maxConnections;
    final int maxPendingConnections;
    final int maxOpenConnections;
    final long handshakeTimeoutNanos;
    final long incompleteRequestTimeoutNanos;
    final LegacyPolicy legacyPolicy;
    final boolean logConnections;
    final StoreEngine engine;
    final Key probe;
    final SecureRandom random;
    final ServerStats stats = new ServerStats();
    final Members members = new Members();
    /** Set when the server closes: connections that end now are not member deaths. */
    volatile boolean shuttingDown;
    /** Connections that completed a first request (bounded by {@link #maxConnections}). */
    int established;
    /** Connections open now, of every kind (bounded by {@link #maxOpenConnections}). */
    int open;
    /**
     * Pending connections (no complete request yet), oldest first, in two intrusive lists: those that
     * sent part of a request (bounded by {@link #maxPendingConnections}), and silent ones (a torch
     * 1.13/2.0 client's idle callback connection looks like that for the client's whole life, and such
     * a client spins a core once that connection is closed: silent ones are closed only under
     * descriptor pressure, and last).
     */
    private final PendingList partial = new PendingList();
    private final PendingList silent = new PendingList();

    /** An intrusive doubly linked list of connections, oldest first. */
    static final class PendingList {
        ServerConnection head;
        ServerConnection tail;
        int count;

        void add(ServerConnection c) {
            c.pendingPrev = tail;
            c.pendingNext = null;
            if (tail == null) {
                head = c;
            } else {
                tail.pendingNext = c;
            }
            tail = c;
            c.pendingList = this;
            count++;
        }

        void remove(ServerConnection c) {
            if (c.pendingPrev == null) {
                head = c.pendingNext;
            } else {
                c.pendingPrev.pendingNext = c.pendingNext;
            }
            if (c.pendingNext == null) {
                tail = c.pendingPrev;
            } else {
                c.pendingNext.pendingPrev = c.pendingPrev;
            }
            c.pendingPrev = null;
            c.pendingNext = null;
            c.pendingList = null;
            count--;
        }
    }
    private long nextId;
    private long warnWindowStart;
    private int warnsInWindow;
    private long suppressed;

    /** How to number a connection that did not send VALIDATE. */
    public enum LegacyPolicy {
        AUTO, TORCH_1_13, TORCH_2_1
    }

    public ServerContext(String name, byte[] token, int maxKeyBytes, int maxValueBytes, int maxKeysPerRequest,
                         long maxRequestBytes, long maxStoreBytes, int maxConnections, int maxPendingConnections,
                         int maxOpenConnections, long handshakeTimeoutNanos, long incompleteRequestTimeoutNanos, LegacyPolicy legacyPolicy,
                         boolean logConnections) {
        this.name = name;
        this.token = token == null ? null : token.clone();
        this.maxKeyBytes = maxKeyBytes;
        this.maxValueBytes = maxValueBytes;
        this.maxKeysPerRequest = maxKeysPerRequest;
        this.maxRequestBytes = maxRequestBytes;
        this.maxConnections = maxConnections;
        this.maxPendingConnections = maxPendingConnections;
        this.maxOpenConnections = maxOpenConnections;
        this.handshakeTimeoutNanos = handshakeTimeoutNanos;
        this.incompleteRequestTimeoutNanos = incompleteRequestTimeoutNanos;
        this.legacyPolicy = legacyPolicy;
        this.logConnections = logConnections;
        this.engine = new StoreEngine(maxStoreBytes);
        this.probe = Key.probe(ThreadLocalRandom.current().nextInt(), 256);
        this.random = token == null ? null : new SecureRandom();
    }

    public ServerStats stats() {
        return stats;
    }

    public StoreEngine engine() {
        return engine;
    }

    /** Makes the store durable in {@code dir} and loads its keys (before the server serves). */
    public void openLog(java.nio.file.Path dir, long maxDataBytes, boolean fsync) {
        engine.openLog(dir, maxDataBytes, fsync, probe);
    }

    long nextConnectionId() {
        return ++nextId;
    }

    /** Marks the server as closing (any thread): connections that end from now on are no deaths. */
    public void shutDown() {
        shuttingDown = true;
    }

    /** The declared members (event loop only). */
    public Members members() {
        return members;
    }

    /** Pending connections now (event loop only). */
    public int pendingConnections() {
        return partial.count + silent.count;
    }

    /**
     * Admits a new connection as a silent pending one. At {@link #maxOpenConnections} (descriptor
     * pressure) it first closes the oldest pending connection that sent part of a request, else the
     * oldest silent one (through {@link ServerConnection#evict}); when every open connection is
     * established, nothing can give way and {@code false} tells the caller to close the newcomer.
     */
    boolean admit(ServerConnection c) {
        while (open >= maxOpenConnections) {
            boolean fromSilent = partial.head == null;
            ServerConnection oldest = fromSilent ? silent.head : partial.head;
            if (oldest == null) {
                return false;
            }
            unlinkPending(oldest);
            oldest.evict("maxOpenConnections " + maxOpenConnections + " connections were open", fromSilent);
        }
        open++;
        silent.add(c);
        return true;
    }

    /** A connection admitted by {@link #admit} closed. */
    void closed(ServerConnection c) {
        unlinkPending(c);
        open--;
    }

    /**
     * A silent pending connection sent its first bytes: it moves to the partial list, first closing the
     * oldest partial one when {@link #maxPendingConnections} hold part of a request already.
     */
    void pendingSpoke(ServerConnection c) {
        if (c.pendingList == silent) {
            silent.remove(c);
            while (partial.count >= maxPendingConnections) {
                ServerConnection oldest = partial.head;
                unlinkPending(oldest);
                oldest.evict("maxPendingConnections " + maxPendingConnections + " connections held part of a request",
                        false);
            }
            partial.add(c);
        }
    }

    /**
     * The process ran out of descriptors although {@link #maxOpenConnections} was not reached (the rest
     * of the process took more than its reserve): closes the oldest pending connection, partial first,
     * so that the listener can accept again. Returns whether one was closed.
     */
    boolean relieveDescriptorPressure() {
        boolean fromSilent = partial.head == null;
        ServerConnection oldest = fromSilent ? silent.head : partial.head;
        if (oldest == null) {
            return false;
        }
        unlinkPending(oldest);
        oldest.evict("the process ran out of file descriptors", fromSilent);
        return true;
    }

    /** Removes {@code c} from the pending connections; idempotent. */
    void unlinkPending(ServerConnection c) {
        if (c.pendingList != null) {
            c.pendingList.remove(c);
        }
    }

    /** Logs a dropped connection at WARN, at most {@value #WARNINGS_PER_SECOND} a second. */
    void warnRateLimited(String msg) {
        long now = System.nanoTime();
        if (now - warnWindowStart > 1_000_000_000L) {
            if (suppressed > 0) {
                LOG.warn("{}: {} more dropped connections not logged in the last second", name, suppressed);
            }
            warnWindowStart = now;
            warnsInWindow = 0;
            suppressed = 0;
        }
        if (warnsInWindow < WARNINGS_PER_SECOND) {
            warnsInWindow++;
            LOG.warn(msg);
        } else {
            suppressed++;
            LOG.debug(msg);
        }
    }

    void info(String msg) {
        if (logConnections) {
            LOG.info(msg);
        } else {
            LOG.debug(msg);
        }
    }
}
