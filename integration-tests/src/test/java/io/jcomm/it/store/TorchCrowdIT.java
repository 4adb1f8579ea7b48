package io.jcomm.it.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.cpu.store.internal.Descriptors;
import io.jcomm.testkit.Requirements;
import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A crowd of real torch 1.13 clients ({@code scripts/torch_store_crowd.py}: two connections each, the
 * second silent for the client's life, every first connection silent until all clients are connected)
 * against {@code commstore} in its own JVM, with attackers' connections beside them: half-sent frames
 * and silent holders. Neither the crowd nor the defence may give way.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class TorchCrowdIT {

    private static final Path SCRIPT = Path.of("..").toAbsolutePath().normalize().resolve("scripts/torch_store_crowd.py");

    /** Enough descriptors here for the crowd, the attackers and the server (children inherit the limit). */
    private static void assumeDescriptors(int needed) {
        long limit = Descriptors.limit();
        Requirements.assume("descriptors", limit >= needed,
                "the descriptor limit is " + limit + ", this test needs " + needed + " (ulimit -n)");
    }

    private static List<Socket> open(int port, int n, byte[] firstBytes) throws IOException {
        List<Socket> out = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            Socket s = new Socket(InetAddress.getLoopbackAddress(), port);
            if (firstBytes != null) {
                s.getOutputStream().write(firstBytes);
            }
            out.add(s);
        }
        return out;
    }

    /** Whether the server closed {@code s} (EOF or reset), looking for at most {@code ms}. */
    private static boolean closedByServer(Socket s, int ms) throws IOException {
        s.setSoTimeout(ms);
        try {
            return s.getInputStream().read() < 0;
        } catch (SocketTimeoutException e) {
            return false;
        } catch (IOException reset) {
            return true;
        }
    }

    private static void closeAll(List<Socket> sockets) {
        for (Socket s : sockets) {
            try {
                s.close();
            } catch (IOException ignored) {
                // already gone
            }
        }
    }

    private static String crowd(int port, int clients, String prefix) throws Exception {
        try (TorchProcess p = TorchProcess.startScript(SCRIPT, "crowd", "crowd", "--port", Integer.toString(port),
                "--clients", Integer.toString(clients), "--prefix", prefix, "--timeout-s", "60")) {
            String line = p.awaitLine("CROWD ", Duration.ofSeconds(180));
            assertEquals(0, p.waitFor(Duration.ofSeconds(30)), p.output());
            assertTrue(line.contains("clients=" + clients + " ok=" + clients + " errors=0 "), line);
            return line;
        }
    }

    @Test
    void aThousandTorchClientsRendezvousWhileHalfFramesAndSilentHoldersArePresent() throws Exception {
        TorchProcess.assumeTorch();
        assumeDescriptors(2 * (2 * 1000 + 1000) + 512);
        // the default bounds: 256 connections may hold part of a request, silent ones only meet the
        // descriptor bound (thousands here)
        try (StoreServerProcess server = StoreServerProcess.start("--quiet")) {
            // 500 half frames (a SET announcing a 4,000-byte key, nothing more) and 500 silent holders
            byte[] halfSet = ByteBuffer.allocate(9).order(ByteOrder.LITTLE_ENDIAN).put((byte) 0).putLong(4000).array();
            List<Socket> half = open(server.port, 500, halfSet);
            List<Socket> silent = open(server.port, 500, null);
            try {
                long start = System.nanoTime();
                String line = crowd(server.port, 1000, "a");
                long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                System.out.println("torch crowd of 1000 with 1000 hostile connections: " + line + " (" + ms + " ms with "
                        + "the interpreter's start)");
                // the half frames beyond the cap gave way, oldest first; the newest are still held
                int halfClosed = 0;
                for (Socket s : half) {
                    halfClosed += closedByServer(s, 20) ? 1 : 0;
                }
                assertTrue(halfClosed >= 500 - 256, halfClosed + " of 500 half frames were closed");
                assertTrue(!closedByServer(half.get(half.size() - 1), 50), "the newest half frame was closed");
                // silent connections are not closed below the descriptor bound: a torch client's silent
                // connection is indistinguishable from them
                for (Socket s : silent) {
                    assertTrue(!closedByServer(s, 1), "a silent connection was closed without descriptor pressure");
                }
            } finally {
                closeAll(half);
                closeAll(silent);
            }
        }
    }

    @Test
    void atTheConnectionBoundSilentHoldersGiveWayToTheCrowd() throws Exception {
        TorchProcess.assumeTorch();
        assumeDescriptors(2 * (1000 + 2 * 500) + 512);
        // a bound of 1,200 connections: 1,000 silent holders take most of it before a crowd of 500 torch
        // clients (1,000 connections) arrives; the oldest holders give way, none of the crowd's
        try (StoreServerProcess server = StoreServerProcess.start("--quiet", "--max-open-connections", "1200")) {
            List<Socket> silent = open(server.port, 1000, null);
            try {
                crowd(server.port, 500, "b");
                int closed = 0;
                for (Socket s : silent) {
                    closed += closedByServer(s, 5) ? 1 : 0;
                }
                assertTrue(closed >= 1000 + 1000 - 1200, closed + " of 1000 holders were closed");
                assertTrue(closedByServer(silent.get(0), 1000), "the oldest holder was not the first to go");
                assertTrue(!closedByServer(silent.get(silent.size() - 1), 50), "the newest holder was closed");
                // a second crowd finds room again: its arrivals close more of the old holders
                crowd(server.port, 300, "c");
            } finally {
                closeAll(silent);
            }
        }
    }
}
