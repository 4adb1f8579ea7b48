package io.jcomm.testkit;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;

/** Finds free TCP ports on loopback for tests. */
public final class FreePorts {

    private FreePorts() {
    }

    /** A port that was free a moment ago on 127.0.0.1. */
    public static int find() {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            s.setReuseAddress(true);
            return s.getLocalPort();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
