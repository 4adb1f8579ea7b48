package io.jcomm.testkit;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Finds free TCP ports for tests' servers. A port is taken below the kernel's ephemeral range
 * ({@code /proc/sys/net/ipv4/ip_local_port_range}), where no client socket of another test gets it as its
 * source port between this check and the server's bind (a server that binds every address, as torch's
 * does, fails on such a port); it is checked free on every address. Falls back to an ephemeral port.
 */
public final class FreePorts {

    private static final int LOWEST = 10_000;

    private FreePorts() {
    }

    /** A port that was free a moment ago on every address. */
    public static int find() {
        int low = ephemeralLow();
        ThreadLocalRandom rnd = ThreadLocalRandom.current();
        for (int attempt = 0; low > LOWEST + 1000 && attempt < 100; attempt++) {
            int port = LOWEST + rnd.nextInt(low - LOWEST);
            try (ServerSocket s = new ServerSocket()) {
                s.bind(new InetSocketAddress(port), 1);
                return port;
            } catch (IOException taken) {
                // another one
            }
        }
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            s.setReuseAddress(true);
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static int ephemeralLow() {
        try {
            String[] f = Files.readString(Path.of("/proc/sys/net/ipv4/ip_local_port_range")).trim().split("\\s+");
            return Integer.parseInt(f[0]);
        } catch (IOException | RuntimeException e) {
            return 0;
        }
    }
}
