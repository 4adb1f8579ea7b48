package io.jcomm.cpu;

import java.util.Set;

/**
 * The option keys of the {@code tcp} backend, for {@link CpuGroupOptions.Builder#option(String, String)}
 * (one declaration of each key: other modules use these constants, not string copies). What each one
 * means, its range and its default: the tcp backend's documentation (README, "tcp options"). A key
 * under {@code tcp.} that is not listed here is rejected when a tcp group is made.
 */
public final class TcpOptions {

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
    public static final String HOST_ID = "tcp.hostId";
    public static final String FRESH_NAMESPACE = "tcp.freshNamespace";

    /** Every key above. */
    public static final Set<String> KEYS = Set.of(TRANSPORT, SPIN_MICROS, SEGMENT_BYTES, SMALL_BYTES,
            MAX_UNEXPECTED_BYTES, SEND_BUDGET_BYTES, SEND_BUDGET_MESSAGES, SOCKET_BUFFER_BYTES, SHM,
            SHM_THRESHOLD_BYTES, SHM_RING_BYTES, SHM_DIR, SHM_STAGING_BYTES, SHM_COLLECTIVE_MIN_BYTES, HOST_ID,
            FRESH_NAMESPACE);

    private TcpOptions() {
    }
}
