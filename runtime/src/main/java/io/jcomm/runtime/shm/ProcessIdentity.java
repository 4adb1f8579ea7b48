package io.jcomm.runtime.shm;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A process as another process on the same host can check it: its pid and the time it started (clock
 * ticks since boot, from {@code /proc/<pid>/stat}), so that a recycled pid is not mistaken for the
 * process. The one dead-owner check of every shared-memory file and peer watch in jcomm (tcp rings
 * and staging, the message queue's media directories and its readers and writers, the node-local
 * channel).
 *
 * <p>Where {@code /proc} cannot be read (another OS), the start time is {@code -1} and only
 * {@link ProcessHandle} answers. A process that is not visible from here (another pid namespace)
 * reads as not alive: callers that may meet one check it once while it is known to live, and watch
 * it only if it was alive then.
 *
 * @param pid        the process id
 * @param startTicks start time in clock ticks since boot, or {@code -1} when unknown
 */
public record ProcessIdentity(long pid, long startTicks) {

    /** This process (computed once: it never changes). */
    private static final class Self {
        static final ProcessIdentity SELF = new ProcessIdentity(ProcessHandle.current().pid(),
                startTicksOf(ProcessHandle.current().pid()));

        private Self() {
        }
    }

    /** This process. */
    public static ProcessIdentity self() {
        return Self.SELF;
    }

    /** The process with {@code pid} as it is now (start time {@code -1} when it cannot be read). */
    public static ProcessIdentity of(long pid) {
        return new ProcessIdentity(pid, startTicksOf(pid));
    }

    /**
     * The process with {@code pid} if it can be seen from here now, to watch for its exit; null when
     * it cannot (gone, or in another pid namespace): such a process is not watched, never reported dead.
     */
    public static ProcessIdentity watchable(long pid) {
        ProcessIdentity p = of(pid);
        return p.alive() ? p : null;
    }

    /** Start time of {@code pid} in clock ticks since boot, or -1 when unknown. */
    public static long startTicksOf(long pid) {
        String[] f = statFields(pid);
        if (f == null || f.length < 20) {
            return -1;
        }
        try {
            return Long.parseLong(f[19]); // field 22 of stat = index 19 after "pid (comm) "
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    /** The fields after {@code "pid (comm) "}: [0] state, [1] ppid, ... or null. */
    private static String[] statFields(long pid) {
        try {
            String s = Files.readString(Path.of("/proc", Long.toString(pid), "stat"), StandardCharsets.US_ASCII);
            int close = s.lastIndexOf(')');
            if (close < 0 || close + 2 > s.length()) {
                return null;
            }
            return s.substring(close + 2).trim().split(" ");
        } catch (IOException | RuntimeException e) {
            return null;
        }
    }

    /**
     * False when the process is gone, a zombie, or its pid now belongs to another process (the start
     * time differs); true for this process.
     */
    public boolean alive() {
        if (pid <= 0) {
            return false;
        }
        if (pid == self().pid) {
            return startTicks < 0 || self().startTicks < 0 || startTicks == self().startTicks;
        }
        if (startTicks < 0) {
            return ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false);
        }
        String[] f = statFields(pid);
        if (f == null) {
            return false;
        }
        String state = f[0];
        if (state.equals("Z") || state.equals("X") || state.equals("x")) {
            return false;
        }
        try {
            return f.length >= 20 && Long.parseLong(f[19]) == startTicks;
        } catch (NumberFormatException e) {
            return true;
        }
    }

    /** {@code "<pid> <startTicks>"}: the owner marker's text. */
    public String marker() {
        return pid + " " + startTicks;
    }

    /** Parses {@link #marker()}; null when malformed. */
    public static ProcessIdentity parseMarker(String text) {
        String[] p = text.trim().split(" ");
        if (p.length != 2) {
            return null;
        }
        try {
            return new ProcessIdentity(Long.parseLong(p[0]), Long.parseLong(p[1]));
        } catch (NumberFormatException e) {
            return null;
        }
    }
}
