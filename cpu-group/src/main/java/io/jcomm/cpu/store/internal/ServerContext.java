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
    final long handshakeTimeoutNanos;
    final LegacyPolicy legacyPolicy;
    final boolean logConnections;
    final StoreEngine engine;
    final Key probe;
    final SecureRandom random;
    final ServerStats stats = new ServerStats();
    private long nextId;
    private long warnWindowStart;
    private int warnsInWindow;
    private long suppressed;

    /** How to number a connection that did not send VALIDATE. */
    public enum LegacyPolicy {
        AUTO, TORCH_1_13, TORCH_2_1
    }

    public ServerContext(String name, byte[] token, int maxKeyBytes, int maxValueBytes, int maxKeysPerRequest,
                         long maxRequestBytes, long maxStoreBytes, int maxConnections, long handshakeTimeoutNanos,
                         LegacyPolicy legacyPolicy, boolean logConnections) {
        this.name = name;
        this.token = token == null ? null : token.clone();
        this.maxKeyBytes = maxKeyBytes;
        this.maxValueBytes = maxValueBytes;
        this.maxKeysPerRequest = maxKeysPerRequest;
        this.maxRequestBytes = maxRequestBytes;
        this.maxConnections = maxConnections;
        this.handshakeTimeoutNanos = handshakeTimeoutNanos;
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

    long nextConnectionId() {
        return ++nextId;
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
