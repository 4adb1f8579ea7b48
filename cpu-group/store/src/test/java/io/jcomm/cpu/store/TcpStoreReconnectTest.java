package io.jcomm.cpu.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.StoreException;
import io.jcomm.testkit.FreePorts;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Connection life cycle: late server, restarted server, no server, close. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpStoreReconnectTest {

    private static TcpStoreServerConfig serverOn(int port) {
        return TcpStoreServerConfig.builder().port(port).name("reconnect-test").build();
    }

    private static TcpStoreConfig client(int port, Duration timeout) {
        return TcpStoreConfig.builder().port(port).timeout(timeout).build();
    }

    @Test
    void clientWaitsForAServerThatStartsLate() throws Exception {
        int port = FreePorts.find();
        CompletableFuture<TcpStore> c = CompletableFuture.supplyAsync(() -> TcpStore.connect(client(port, Duration.ofSeconds(20))));
        Thread.sleep(300);
        long t0;
        try (TcpStoreServer server = TcpStoreServer.start(serverOn(port))) {
            assertEquals(port, server.port());
            t0 = System.nanoTime();
            try (TcpStore s = c.get(20, TimeUnit.SECONDS)) {
                // back-off is capped at 50 ms: the client is connected promptly after the server starts
                // (typically within 100 ms; the bound leaves room for a loaded machine, far below the 20 s timeout)
                assertTrue(System.nanoTime() - t0 < TimeUnit.MILLISECONDS.toNanos(3000), "slow reconnect");
                s.set("k", "v".getBytes(UTF_8));
                assertArrayEquals("v".getBytes(UTF_8), s.get("k"));
                assertTrue(s.isJcommServer());
            }
        }
    }

    @Test
    void aConcurrentClientIsItsOwnConnectionThatDoesNotWaitBehindABlockedWait() throws Exception {
        int port = FreePorts.find();
        try (TcpStoreServer server = TcpStoreServer.start(serverOn(port));
             TcpStore s = TcpStore.connect(client(port, Duration.ofSeconds(10)))) {
            assertEquals(port, server.port());
            assertTrue(s.supportsConcurrentClients());
            CompletableFuture<Void> blocked = CompletableFuture.runAsync(() -> s.wait(List.of("later")));
            try (io.jcomm.api.store.Store other = s.concurrentClient()) {
                assertTrue(other != s && other instanceof TcpStore, String.valueOf(other));
                other.set("later", "x".getBytes(UTF_8)); // would deadlock if it shared s's connection
            }
            blocked.get(10, TimeUnit.SECONDS);
        }
    }

    @Test
    void clientRidesOverAServerRestartIncludingAPendingWait() throws Exception {
        int port = FreePorts.find();
        TcpStoreServer server = TcpStoreServer.start(serverOn(port));
        try (TcpStore s = TcpStore.connect(client(port, Duration.ofSeconds(20)));
             TcpStore waiter = TcpStore.connect(client(port, Duration.ofSeconds(20)))) {
            assertEquals(1, s.add("n", 1));
            CompletableFuture<byte[]> pending = CompletableFuture.supplyAsync(() -> waiter.get("after-restart",
                    Duration.ofSeconds(20)));
            Thread.sleep(200);
            server.close();
            Thread.sleep(200);
            server = TcpStoreServer.start(serverOn(port));
            // a non-idempotent call after the restart: the dead idle connection is noticed before sending
            assertEquals(1, s.add("n", 1), "the restarted server has a fresh store");
            s.set("after-restart", "x".getBytes(UTF_8));
            assertArrayEquals("x".getBytes(UTF_8), pending.get(20, TimeUnit.SECONDS));
            assertEquals(2, server.stats().connectionsOpen());
        } finally {
            server.close();
        }
    }

    @Test
    void noServerFailsWithinTheConnectTimeout() {
        int port = FreePorts.find();
        long t0 = System.nanoTime();
        StoreException e = assertThrows(StoreException.class, () -> TcpStore.connect(TcpStoreConfig.builder().port(port)
                .connectTimeout(Duration.ofMillis(300)).build()));
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue(ms >= 250 && ms < 3000, "took " + ms + " ms");
        assertTrue(e.getMessage().contains("cannot reach") && e.getMessage().contains(":" + port), e.getMessage());
        assertEquals("connect", e.operation());
    }

    @Test
    void serverGoneForGoodFailsCallsWithinTheirTimeout() {
        TcpStoreServer server = TcpStoreServer.start(serverOn(0));
        try (TcpStore s = TcpStore.connect(TcpStoreConfig.builder().port(server.port()).timeout(Duration.ofMillis(400))
                .group("g0").rank(3).build())) {
            s.set("a", new byte[] {1});
            server.close();
            long t0 = System.nanoTime();
            StoreException e = assertThrows(StoreException.class, () -> s.add("a2", 1));
            assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(3));
            assertEquals("g0", e.group());
            assertEquals(3, e.rank());
            assertEquals("add", e.operation());
        } finally {
            server.close();
        }
    }

    @Test
    void closingTheServerFailsAClientBlockedInAWaitOnlyAtItsDeadline() throws Exception {
        TcpStoreServer server = TcpStoreServer.start(serverOn(0));
        try (TcpStore s = TcpStore.connect(client(server.port(), Duration.ofSeconds(5)))) {
            CompletableFuture<Void> w = CompletableFuture.runAsync(() -> s.wait(List.of("never"), Duration.ofMillis(800)));
            Thread.sleep(100);
            server.close();
            java.util.concurrent.ExecutionException e = assertThrows(java.util.concurrent.ExecutionException.class,
                    () -> w.get(10, TimeUnit.SECONDS));
            assertTrue(e.getCause() instanceof StoreException
                    || e.getCause() instanceof io.jcomm.api.CommTimeoutException, String.valueOf(e.getCause()));
        }
    }

    @Test
    void aPortInUseIsATypedError() {
        try (TcpStoreServer first = TcpStoreServer.start(serverOn(0))) {
            StoreException e = assertThrows(StoreException.class, () -> TcpStoreServer.start(serverOn(first.port())));
            assertTrue(e.getMessage().contains("cannot bind") && e.getMessage().contains(":" + first.port()),
                    e.getMessage());
        }
    }

    @Test
    void closeIsIdempotentAndTyped() {
        try (TcpStoreServer server = TcpStoreServer.start(serverOn(0))) {
            TcpStore s = TcpStore.connect(client(server.port(), Duration.ofSeconds(5)));
            s.close();
            s.close();
            assertThrows(CommClosedException.class, () -> s.get("x"));
            assertThrows(CommClosedException.class, s::numKeys);
        }
    }
}
