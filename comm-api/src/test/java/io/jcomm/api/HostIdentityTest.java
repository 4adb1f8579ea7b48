package io.jcomm.api;

import io.jcomm.api.config.Settings;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;

class HostIdentityTest {

    private static String read(String file) throws IOException {
        return Files.readString(Path.of(file), StandardCharsets.US_ASCII).trim();
    }

    @Test
    void isTheBootIdAndTheKernelsHostNameWithoutTheOverride() throws IOException {
        assumeTrue(System.getenv(Settings.HOST_ID.name()) == null, Settings.HOST_ID.name() + " is set for this JVM");
        assumeTrue(Files.isReadable(Path.of("/proc/sys/kernel/hostname")), "no procfs (not Linux)");
        String host = read("/proc/sys/kernel/hostname");
        assertEquals((read("/proc/sys/kernel/random/boot_id") + "@" + host).replace(' ', '_'), HostIdentity.local());
        assertEquals(host.replace(' ', '_'), HostIdentity.displayName());
        // the name the JDK gives for this host, where it resolves, is the same one
        String jdk;
        try {
            jdk = java.net.InetAddress.getLocalHost().getHostName();
        } catch (IOException e) {
            return; // this host's name does not resolve here: nothing to compare
        }
        if (!jdk.equals("localhost")) {
            assertEquals(jdk, host);
        }
    }
}
