package io.jcomm.cpu.store;

import static io.jcomm.cpu.store.RawConn.f;
import static io.jcomm.cpu.store.RawConn.hex;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Hostile and stuck connections over real sockets: connections that hold part of a request are
 * closed after {@code incompleteRequestTimeout}; connections without a complete request have their
 * own cap, so that they cannot lock legitimate clients out; a slow but complete WAIT is never
 * dropped.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpStoreStuckConnectionsTest {

    private static final Duration LIMIT = Duration.ofMillis(600);

    private static Socket open(int port) throws IOException {
        Socket s = new Socket(InetAddress.getLoopbackAddress(), port);
        s.setTcpNoDelay(true);
        return s;
    }

    /** Waits until the server closes {@code s}; returns when (nanoTime), or fails after {@code max}. */
    private static long awaitClosedByServer(Socket s, Duration max) throws IOException {
        s.setSoTimeout((int) max.toMillis());
        try {
            while (true) {
                int b = s.getInputStream().read();
                if (b < 0) {
                    return System.nanoTime();
                }
            }
        } catch (SocketTimeoutException e) {
            throw new AssertionError("the server did not close the connection within " + max.toMillis() + " ms");
        } catch (IOException reset) {
            return System.nanoTime();
        }
    }

    private static boolean openAfter(Socket s, int ms) throws IOException {
        s.setSoTimeout(ms);
        try {
            return s.getInputStream().read() >= 0;
        } catch (SocketTimeoutException e) {
            return true;
        } catch (IOException reset) {
            return false;
        }
    }

    @Test
    void halfFramesAreClosedAfterTheLimitWhileAWellBehavedClientKeepsWorking() throws Exception {
        TcpStoreServerConfig cfg = TcpStoreServerConfig.builder().name("stuck").incompleteRequestTimeout(LIMIT).build();
        try (LogCapture log = new LogCapture();
             TcpStoreServer server = TcpStoreServer.start(cfg);
             TcpStore good = TcpStore.connect(TcpStoreConfig.builder().port(server.port())
                     .timeout(Duration.ofSeconds(10)).build())) {
            List<Socket> stuck = new ArrayList<>();
            try {
                // pending connections stuck in the middle of their first frame (legacy, 2.2+ VALIDATE, a key)
                for (int i = 0; i < 20; i++) {
                    Socket s = open(server.port());
                    byte[] half = switch (i % 3) {
                        case 0 -> f().u8(0).u64(100).raw(new byte[10]).bytes(); // SET, key of 100 bytes, 10 sent
                        case 1 -> hex("00 CE F7"); // VALIDATE cut short
                        default -> f().u8(3).str("/n").raw(new byte[3]).bytes(); // ADD without all of its i64
                    };
                    s.getOutputStream().write(half);
                    stuck.add(s);
                }
                // established connections (a complete request first) that then stop mid-frame
                for (int i = 0; i < 10; i++) {
                    Socket s = open(server.port());
                    s.getOutputStream().write(f().u8(6).bytes()); // GETNUMKEYS
                    s.getInputStream().readNBytes(8);
                    s.getOutputStream().write(f().u8(0).str("/k" + i).u64(1000).raw(new byte[500]).bytes());
                    stuck.add(s);
                }
                long sent = System.nanoTime();
                // the well-behaved client is served all along
                AtomicBoolean stop = new AtomicBoolean();
                AtomicLong ops = new AtomicLong();
                AtomicReference<Throwable> error = new AtomicReference<>();
                Thread worker = new Thread(() -> {
                    try {
                        while (!stop.get()) {
                            long n = good.add("ops", 1);
                            good.set("v" + (n % 5), Long.toString(n).getBytes(StandardCharsets.US_ASCII));
                            ops.incrementAndGet();
                        }
                    } catch (Throwable t) {
                        error.set(t);
                    }
                });
                worker.start();
                for (Socket s : stuck) {
                    long closedAfter = TimeUnit.NANOSECONDS.toMillis(awaitClosedByServer(s, Duration.ofSeconds(10)) - sent);
                    assertTrue(closedAfter >= LIMIT.toMillis() - 50, "closed too early: " + closedAfter + " ms");
                    assertTrue(closedAfter < LIMIT.toMillis() + 3000, "closed too late: " + closedAfter + " ms");
                }
                stop.set(true);
                worker.join(10_000);
                assertEquals(null, error.get());
                assertTrue(ops.get() > 10, "the good client made " + ops.get() + " operations");
                assertEquals(ops.get(), good.add("ops", 0));
                TcpStoreServer.Stats st = server.stats();
                assertEquals(30, st.incompleteRequestsDropped(), st.toString());
                assertEquals(1, st.connectionsOpen(), st.toString());
                // the log names the remote address and the reason
                int port = stuck.get(0).getLocalPort();
                String line = log.await(l -> l.contains("close #") && l.contains(":" + port + " ")
                        && l.contains("incomplete request held for"), Duration.ofSeconds(5));
                assertNotNull(line, "no log line for /127.0.0.1:" + port);
                assertTrue(line.contains("incompleteRequestTimeout " + LIMIT.toMillis() + " ms"), line);
            } finally {
                for (Socket s : stuck) {
                    s.close();
                }
            }
        }
    }

    @Test
    void slowButCompleteWaitsAndSlowlyCompletedRequestsAreNotDropped() throws Exception {
        TcpStoreServerConfig cfg = TcpStoreServerConfig.builder().name("slow").incompleteRequestTimeout(LIMIT).build();
        try (TcpStoreServer server = TcpStoreServer.start(cfg);
             TcpStore setter = TcpStore.connect(TcpStoreConfig.builder().port(server.port())
                     .timeout(Duration.ofSeconds(10)).build());
             TcpStore waiter = TcpStore.connect(TcpStoreConfig.builder().port(server.port())
                     .timeout(Duration.ofSeconds(10)).build());
             RawConn legacy = new RawConn(server.port());
             RawConn v22 = new RawConn(server.port())) {
            // a torch-style WAIT (legacy), a 2.2+ WAIT with a command held behind it, a jcomm pipelined get
            legacy.send(f().u8(5).u64(1).str("/late"));
            v22.send(hex("00 CE F7 85 3C")).send(f().u8(6).u64(1).str("/late").u8(3).str("/late"));
            Thread getter = new Thread(() -> assertArrayEquals("v".getBytes(StandardCharsets.US_ASCII),
                    waiter.get("late", Duration.ofSeconds(10))));
            AtomicReference<Throwable> error = new AtomicReference<>();
            getter.setUncaughtExceptionHandler((t, e) -> error.set(e));
            getter.start();
            // a request trickled in pieces, each pause shorter than the limit, all of it well within it
            try (Socket s = open(server.port())) {
                byte[] add = f().u8(3).str("/trickle").u64(7).bytes();
                for (int i = 0; i < add.length; i += 6) {
                    s.getOutputStream().write(add, i, Math.min(6, add.length - i));
                    Thread.sleep(LIMIT.toMillis() / 10);
                }
                assertArrayEquals(f().u64(7).bytes(), s.getInputStream().readNBytes(8));
                // an idle established connection (nothing buffered) is not incomplete either
                Thread.sleep(3 * LIMIT.toMillis());
                s.getOutputStream().write(f().u8(3).str("/trickle").u64(1).bytes());
                assertArrayEquals(f().u64(8).bytes(), s.getInputStream().readNBytes(8));
            }
            Thread.sleep(LIMIT.toMillis()); // the waits have been pending for > 3 limits now
            setter.set("late", "v".getBytes(StandardCharsets.US_ASCII));
            legacy.expect(hex("00"));
            v22.expect(hex("00")).expect(f().str("v"));
            getter.join(10_000);
            assertEquals(null, error.get());
            assertEquals(0, server.stats().incompleteRequestsDropped(), server.stats().toString());
        }
    }

    @Test
    void halfSentRequestsBeyondTheirCapGiveWayWhileSilentConnectionsStay() throws Exception {
        // a short cap and the default (long) incomplete-request limit: only the cap can help here
        TcpStoreServerConfig cfg = TcpStoreServerConfig.builder().name("pending").maxPendingConnections(32).build();
        try (LogCapture log = new LogCapture(); TcpStoreServer server = TcpStoreServer.start(cfg)) {
            List<Socket> half = new ArrayList<>();
            List<Socket> silent = new ArrayList<>();
            try {
                for (int i = 0; i < 600; i++) {
                    Socket s = open(server.port());
                    if (i % 2 == 0) {
                        s.getOutputStream().write(f().u8(0).u64(4000).bytes()); // half a SET
                        half.add(s);
                    } else {
                        silent.add(s); // connected and silent (like a torch 1.13 client's callback connection)
                    }
                }
                long start = System.nanoTime();
                try (TcpStore late = TcpStore.connect(TcpStoreConfig.builder().port(server.port())
                        .timeout(Duration.ofSeconds(10)).build())) {
                    late.set("k", new byte[] {1});
                    assertArrayEquals(new byte[] {1}, late.get("k"));
                    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                    assertTrue(ms < 2000, "the new client took " + ms + " ms");
                }
                // the oldest half-sent requests were closed, the newest are still open
                awaitClosedByServer(half.get(0), Duration.ofSeconds(5));
                assertTrue(openAfter(half.get(half.size() - 1), 100), "the newest half-sent request was closed");
                // far below the descriptor bound, no silent connection was closed
                for (Socket s : silent) {
                    assertTrue(openAfter(s, 1), "a silent connection was closed without descriptor pressure");
                }
                TcpStoreServer.Stats st = server.stats();
                assertTrue(st.pendingEvicted() >= 300 - 32 && st.pendingEvicted() <= 300, st.toString());
                assertTrue(st.pendingConnections() <= 300 + 32, st.toString());
                String line = log.await(l -> l.contains("maxPendingConnections 32") && l.contains("close #"),
                        Duration.ofSeconds(5));
                assertNotNull(line, "no log line for an evicted connection");
            } finally {
                for (Socket s : half) {
                    s.close();
                }
                for (Socket s : silent) {
                    s.close();
                }
            }
        }
    }

    @Test
    void atTheOpenConnectionBoundTheOldestSilentConnectionsGiveWay() throws Exception {
        TcpStoreServerConfig cfg = TcpStoreServerConfig.builder().name("bound").maxOpenConnections(64).build();
        try (LogCapture log = new LogCapture(); TcpStoreServer server = TcpStoreServer.start(cfg)) {
            assertEquals(64, server.capacity().maxOpenConnections());
            List<Socket> silent = new ArrayList<>();
            try {
                for (int i = 0; i < 500; i++) {
                    silent.add(open(server.port()));
                }
                long start = System.nanoTime();
                try (TcpStore late = TcpStore.connect(TcpStoreConfig.builder().port(server.port())
                        .timeout(Duration.ofSeconds(10)).build())) {
                    assertEquals(1, late.add("n", 1));
                    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                    assertTrue(ms < 2000, "the new client took " + ms + " ms");
                    TcpStoreServer.Stats st = server.stats();
                    assertTrue(st.connectionsOpen() <= 64, st.toString());
                    assertTrue(st.pendingEvicted() >= 500 + 1 - 64, st.toString());
                }
                awaitClosedByServer(silent.get(0), Duration.ofSeconds(5));
                assertTrue(openAfter(silent.get(silent.size() - 1), 100), "the newest silent connection was closed");
                String line = log.await(l -> l.contains("maxOpenConnections 64") && l.contains("oldest silent"),
                        Duration.ofSeconds(5));
                assertNotNull(line, "no log line for an evicted connection");
            } finally {
                for (Socket s : silent) {
                    s.close();
                }
            }
        }
    }

    @Test
    void theServerSaysWhatItCanHoldAndWarnsWhenTheJobNeedsMore() throws Exception {
        try (LogCapture log = new LogCapture();
             TcpStoreServer derived = TcpStoreServer.start(TcpStoreServerConfig.builder().name("derived").build());
             TcpStoreServer small = TcpStoreServer.start(TcpStoreServerConfig.builder().name("small")
                     .maxOpenConnections(100).expectedClients(60).build())) {
            TcpStoreServer.Capacity c = derived.capacity();
            assertTrue(c.descriptorLimit() > 0 && c.descriptorsAtStart() > 0, c.toString());
            // the limit, less what was open, less the reserve (1/16 of the limit, at least 64)
            assertEquals(c.descriptorLimit() - c.descriptorsAtStart() - Math.max(64, c.descriptorLimit() / 16),
                    c.maxOpenConnections(), c.toString());
            assertTrue(c.backlog() > 0 && c.somaxconn() > 0, c.toString());
            assertNotNull(log.await(l -> l.contains("derived: listening on") && l.contains("holds "
                    + c.maxOpenConnections() + " connections"), Duration.ofSeconds(5)));
            assertTrue(!small.capacity().fitsExpectedClients());
            String warn = log.await(l -> l.contains("small: 60 clients may open 120 connections"), Duration.ofSeconds(5));
            assertNotNull(warn, "no capacity warning");
            assertTrue(warn.contains("more than the 100"), warn);
        }
    }

    @Test
    void whenEveryOpenConnectionIsEstablishedTheNewcomerIsRefused() throws Exception {
        TcpStoreServerConfig cfg = TcpStoreServerConfig.builder().name("full").maxOpenConnections(2).build();
        try (TcpStoreServer server = TcpStoreServer.start(cfg);
             RawConn a = new RawConn(server.port());
             RawConn b = new RawConn(server.port())) {
            a.send(hex("06")).expect(f().u64(0));
            b.send(hex("06")).expect(f().u64(0));
            try (Socket c = open(server.port())) {
                awaitClosedByServer(c, Duration.ofSeconds(5));
            }
            // the established ones are still served
            a.send(hex("06")).expect(f().u64(0));
            b.send(hex("06")).expect(f().u64(0));
        }
    }

    @Test
    void pendingConnectionsThatSentPartOfARequestGiveWayBeforeSilentOnes() throws Exception {
        // a torch 1.13/2.0 client keeps a silent callback connection (and spins a core if it is closed):
        // connections holding part of a request are closed first, even when they are younger
        TcpStoreServerConfig cfg = TcpStoreServerConfig.builder().name("silent-last").maxOpenConnections(8).build();
        try (TcpStoreServer server = TcpStoreServer.start(cfg)) {
            List<Socket> silent = new ArrayList<>();
            List<Socket> partial = new ArrayList<>();
            try {
                for (int i = 0; i < 4; i++) {
                    silent.add(open(server.port()));
                }
                for (int i = 0; i < 12; i++) {
                    Socket s = open(server.port());
                    s.getOutputStream().write(f().u8(0).u64(4000).bytes());
                    partial.add(s);
                    Thread.sleep(50); // let the server read it before the next one arrives
                }
                try (TcpStore late = TcpStore.connect(TcpStoreConfig.builder().port(server.port())
                        .timeout(Duration.ofSeconds(10)).build())) {
                    assertEquals(1, late.add("n", 1));
                }
                for (int i = 0; i < 9; i++) { // 4 + 12 + 1 = 17 arrivals, 8 places: the 9 oldest partial ones go
                    awaitClosedByServer(partial.get(i), Duration.ofSeconds(5));
                }
                for (Socket s : silent) {
                    assertTrue(openAfter(s, 20), "a silent connection was closed before a partial one");
                }
                assertTrue(openAfter(partial.get(11), 20));
                assertEquals(9, server.stats().pendingEvicted(), server.stats().toString());
            } finally {
                for (Socket s : silent) {
                    s.close();
                }
                for (Socket s : partial) {
                    s.close();
                }
            }
        }
    }

    @Test
    void withATokenUnauthenticatedConnectionsArePendingAndTheHandshakeTimeoutStillApplies() throws Exception {
        byte[] token = "pending-test-token-0123456789".getBytes(StandardCharsets.US_ASCII);
        TcpStoreServerConfig cfg = TcpStoreServerConfig.builder().name("pending-token").token(token)
                .maxOpenConnections(8).handshakeTimeout(Duration.ofMillis(800)).build();
        try (TcpStoreServer server = TcpStoreServer.start(cfg)) {
            List<Socket> strangers = new ArrayList<>();
            try {
                for (int i = 0; i < 40; i++) {
                    strangers.add(open(server.port()));
                }
                try (TcpStore member = TcpStore.connect(TcpStoreConfig.builder().port(server.port()).token(token)
                        .timeout(Duration.ofSeconds(10)).build())) {
                    assertEquals(1, member.add("n", 1));
                    TcpStoreServer.Stats st = server.stats();
                    assertTrue(st.pendingEvicted() >= 40 - 8, st.toString());
                    assertTrue(st.connectionsOpen() <= 8, st.toString());
                    // the unauthenticated survivors are closed by the handshake timeout
                    long start = System.nanoTime();
                    awaitClosedByServer(strangers.get(strangers.size() - 1), Duration.ofSeconds(5));
                    assertTrue(System.nanoTime() - start < TimeUnit.SECONDS.toNanos(3));
                    assertEquals(2, member.add("n", 1));
                }
            } finally {
                for (Socket s : strangers) {
                    s.close();
                }
            }
        }
    }

    @Test
    void maxConnectionsBoundsEstablishedConnectionsOnly() throws Exception {
        TcpStoreServerConfig cfg = TcpStoreServerConfig.builder().name("established").maxConnections(2)
                .maxPendingConnections(4).build();
        try (TcpStoreServer server = TcpStoreServer.start(cfg);
             RawConn b = new RawConn(server.port());
             Socket idle1 = open(server.port());
             Socket idle2 = open(server.port())) {
            RawConn a = new RawConn(server.port());
            a.send(hex("06")).expect(f().u64(0));
            b.send(hex("06")).expect(f().u64(0));
            // two established: a third connection is accepted, but closed at its first request
            try (RawConn c = new RawConn(server.port())) {
                c.send(hex("06")).expectClosed();
            }
            // the idle pending connections were never counted against maxConnections, nor closed
            assertTrue(openAfter(idle1, 50) && openAfter(idle2, 50));
            a.close();
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(5);
            while (server.stats().connectionsOpen() > 3 && System.nanoTime() < end) {
                Thread.sleep(10);
            }
            try (RawConn c = new RawConn(server.port())) {
                c.send(hex("06")).expect(f().u64(0));
            }
            b.send(hex("06")).expect(f().u64(0));
        }
    }
}
