package io.jcomm.api;

import io.jcomm.api.config.Settings;
import java.util.Optional;
import java.io.IOException;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * The one definition of "this host" for same-host detection (shared memory, the node-local channel,
 * the message queue's IPC path): ranks with equal identities are taken to share memory, and every
 * shared-memory set-up still verifies that the peer's file is really visible before using it
 * (containers on one machine may not share {@code /dev/shm}).
 */
public final class HostIdentity {

    /** The environment variable that overrides the identity (e.g. distinct ids to simulate hosts). */

    /** Computed on first use only: with {@code JCOMM_HOST_ID} set, nothing here is read. */
    private static final class Machine {
        static final String ID = computeMachine();
    }

    private HostIdentity() {
    }

    /**
     * {@code JCOMM_HOST_ID} when set (trimmed), else {@code <kernel boot id>@<host name>}: equal for the
     * processes of one kernel, different between machines even when their host names are equal
     * ({@code noboot@<host name>} without procfs).
     */
    public static String local() {
        return Settings.HOST_ID.fromProcess().orElse(Machine.ID);
    }

    /**
     * This host as messages name it: {@code JCOMM_HOST_ID} when set, else the host name (the identity without its
     * boot id).
     */
    public static String displayName() {
        Optional<String> env = Settings.HOST_ID.fromProcess();
        if (env.isPresent()) {
            return env.get();
        }
        String machine = Machine.ID;
        int at = machine.indexOf('@');
        return at >= 0 ? machine.substring(at + 1) : machine;
    }

    private static String computeMachine() {
        String boot = "noboot";
        try {
            boot = Files.readString(Path.of("/proc/sys/kernel/random/boot_id"), StandardCharsets.US_ASCII).trim();
        } catch (IOException | RuntimeException e) {
            // not Linux, or no procfs: the host name alone
        }
        return (boot + "@" + hostName()).replace(' ', '_');
    }

    /**
     * The kernel's host name ({@code gethostname}, from procfs), as {@code InetAddress.getLocalHost()}
     * names it too; that call also resolves the name to an address (and, where nothing resolves it,
     * gives up as "localhost"), which costs a fresh JVM the name service's set-up on the path to ready.
     */
    private static String hostName() {
        try {
            String name = Files.readString(Path.of("/proc/sys/kernel/hostname"), StandardCharsets.US_ASCII).trim();
            if (!name.isEmpty()) {
                return name;
            }
        } catch (IOException | RuntimeException e) {
            // not Linux: the JDK's view below
        }
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            return "localhost";
        }
    }
}
