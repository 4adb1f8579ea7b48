package io.jcomm.device.internal.nccl;

import io.jcomm.api.device.DeviceCommunicatorContext;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;

/**
 * Immutable settings of one NCCL communicator, read once from
 * {@link DeviceCommunicatorContext#options()} (keys below) with the context's timeout as default.
 *
 * @param initTimeout      bound of the bootstrap (id exchange, {@code ncclCommInitRank}, warm-up)
 * @param opTimeout        how long an enqueued operation may take before the watchdog aborts the
 *                         communicator; also the bound of {@code synchronize}
 * @param abortTimeout     how long {@code ncclCommAbort} may take before it is abandoned
 * @param watchdogInterval how often the watchdog polls {@code ncclCommGetAsyncError} and the
 *                         completion events of operations in flight
 * @param trackOps         record a completion event after every operation so that the watchdog can
 *                         enforce {@code opTimeout} (skipped while the stream is being captured)
 * @param maxTrackedOps    size of the event pool; operations beyond it are not tracked (older
 *                         ones still are)
 * @param localWorldOfOne  with world size 1, do collectives as local copies without calling NCCL
 *                         (the SPI's contract; {@code false} makes a one-GPU check exercise NCCL)
 */
public record NcclSettings(Duration initTimeout, Duration opTimeout, Duration abortTimeout, Duration watchdogInterval,
                           boolean trackOps, int maxTrackedOps, boolean localWorldOfOne) {

    public static final String OP_TIMEOUT_MS = "nccl.opTimeoutMs";
    public static final String ABORT_TIMEOUT_MS = "nccl.abortTimeoutMs";
    public static final String WATCHDOG_INTERVAL_MS = "nccl.watchdogIntervalMs";
    public static final String TRACK_OPS = "nccl.trackOps";
    public static final String MAX_TRACKED_OPS = "nccl.maxTrackedOps";
    public static final String LOCAL_WORLD_OF_ONE = "nccl.localWorldOfOne";

    public static final Duration ABORT_TIMEOUT_DEFAULT = Duration.ofSeconds(10);
    public static final Duration WATCHDOG_INTERVAL_DEFAULT = Duration.ofMillis(100);
    public static final int MAX_TRACKED_OPS_DEFAULT = 64;

    public NcclSettings {
        Objects.requireNonNull(initTimeout, "initTimeout");
        Objects.requireNonNull(opTimeout, "opTimeout");
        Objects.requireNonNull(abortTimeout, "abortTimeout");
        Objects.requireNonNull(watchdogInterval, "watchdogInterval");
        if (watchdogInterval.isZero() || watchdogInterval.isNegative() || opTimeout.isNegative()
                || abortTimeout.isNegative() || maxTrackedOps < 1) {
            throw new IllegalArgumentException("bad NCCL settings " + NcclSettings.this);
        }
    }

    /** Settings from the context's options, defaults from its timeout. */
    public static NcclSettings from(DeviceCommunicatorContext context) {
        Map<String, String> o = context.options();
        Duration t = context.timeout();
        return new NcclSettings(t,
                millis(o, OP_TIMEOUT_MS, t),
                millis(o, ABORT_TIMEOUT_MS, ABORT_TIMEOUT_DEFAULT),
                millis(o, WATCHDOG_INTERVAL_MS, WATCHDOG_INTERVAL_DEFAULT),
                bool(o, TRACK_OPS, true),
                integer(o, MAX_TRACKED_OPS, MAX_TRACKED_OPS_DEFAULT),
                bool(o, LOCAL_WORLD_OF_ONE, true));
    }

    private static Duration millis(Map<String, String> o, String key, Duration def) {
        String v = o.get(key);
        return v == null ? def : Duration.ofMillis(integer(o, key, 0));
    }

    private static int integer(Map<String, String> o, String key, int def) {
        String v = o.get(key);
        if (v == null) {
            return def;
        }
        try {
            int n = Integer.parseInt(v.trim());
            if (n < 0) {
                throw new NumberFormatException("negative");
            }
            return n;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("option " + key + "=" + v + " is not a non-negative integer", e);
        }
    }

    private static boolean bool(Map<String, String> o, String key, boolean def) {
        String v = o.get(key);
        if (v == null) {
            return def;
        }
        switch (v.trim().toLowerCase(java.util.Locale.ROOT)) {
            case "true": return true;
            case "false": return false;
            default: throw new IllegalArgumentException("option " + key + "=" + v + " is not true or false");
        }
    }
}
