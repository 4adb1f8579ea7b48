package io.jcomm.cpu.store.internal;

import java.lang.management.ManagementFactory;
import java.lang.management.OperatingSystemMXBean;

/**
 * This process's file descriptors: its limit and how many are open, as the JVM reports them (on
 * Linux the JVM raises the soft limit to the hard one at start, unless {@code -XX:-MaxFDLimit}).
 * Unknown values are -1 (a platform without the Unix management bean).
 */
public final class Descriptors {

    private Descriptors() {
    }

    /** The soft descriptor limit of this process, or -1. */
    public static long limit() {
        OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        return os instanceof com.sun.management.UnixOperatingSystemMXBean u ? u.getMaxFileDescriptorCount() : -1;
    }

    /** Descriptors open now, or -1 (costs a listing of /proc/self/fd: not for a hot path). */
    public static long open() {
        OperatingSystemMXBean os = ManagementFactory.getOperatingSystemMXBean();
        return os instanceof com.sun.management.UnixOperatingSystemMXBean u ? u.getOpenFileDescriptorCount() : -1;
    }

    /** What a server may spend on connections: {@code limit - open - max(64, limit / 16)}, at least 16. */
    public static int connectionBudget(long limit, long open) {
        if (limit <= 0 || open < 0) {
            return 1 << 16;
        }
        long reserve = Math.max(64, limit / 16);
        return (int) Math.max(16, Math.min(Integer.MAX_VALUE, limit - open - reserve));
    }
}
