package io.jcomm.cpu.internal.tcp;

import java.io.IOException;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Identity of this host for same-host detection: the kernel boot id plus the host name. Ranks with
 * equal identities may share memory; the shared-memory set-up still verifies that the peer's file
 * is really visible before using it (containers on one host may not share /dev/shm).
 */
final class HostIdentity {

    private HostIdentity() {
    }

    static String get() {
        String boot = "noboot";
        try {
            boot = Files.readString(Path.of("/proc/sys/kernel/random/boot_id"), StandardCharsets.US_ASCII).trim();
        } catch (IOException | RuntimeException e) {
            // not Linux, or no procfs: the host name alone
        }
        String host;
        try {
            host = InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            host = "localhost";
        }
        return (boot + "@" + host).replace(' ', '_');
    }
}
