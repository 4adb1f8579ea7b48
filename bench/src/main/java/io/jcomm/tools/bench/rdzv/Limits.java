package io.jcomm.tools.bench.rdzv;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** The kernel and process limits a crowd of connections runs into, read from /proc (Linux). */
final class Limits {

    private Limits() {
    }

    /** Soft and hard {@code Max open files} of this process ({@code Long.MAX_VALUE} for unlimited, -1 unknown). */
    static long[] openFiles() {
        String line = openFiles(Path.of("/proc/self/limits"));
        String[] f = line.trim().split("\\s+");
        if (f.length < 2) {
            return new long[] {-1, -1};
        }
        return new long[] {parse(f[0]), parse(f[1])};
    }

    /** "soft hard" of the {@code Max open files} line of a limits file, or "?" when unreadable. */
    static String openFiles(Path limits) {
        try {
            for (String l : Files.readAllLines(limits)) {
                if (l.startsWith("Max open files")) {
                    String[] f = l.substring("Max open files".length()).trim().split("\\s+");
                    return f[0] + " " + f[1];
                }
            }
        } catch (IOException | RuntimeException e) {
            // not Linux, or the process is gone
        }
        return "?";
    }

    /** A sysctl under /proc/sys, e.g. {@code net/core/somaxconn}, as text ("?" when unreadable). */
    static String sysctl(String name) {
        try {
            return String.join(" ", Files.readAllLines(Path.of("/proc/sys", name))).trim().replaceAll("\\s+", " ");
        } catch (IOException | RuntimeException e) {
            return "?";
        }
    }

    /** Ports of {@code net.ipv4.ip_local_port_range} (28,232 when unreadable, the Linux default). */
    static int ephemeralPorts() {
        String[] f = sysctl("net/ipv4/ip_local_port_range").split(" ");
        try {
            return Integer.parseInt(f[1]) - Integer.parseInt(f[0]) + 1;
        } catch (RuntimeException e) {
            return 28_232;
        }
    }

    private static long parse(String s) {
        if (s.equals("unlimited")) {
            return Long.MAX_VALUE;
        }
        try {
            return Long.parseLong(s);
        } catch (NumberFormatException e) {
            return -1;
        }
    }
}
