package io.jcomm.api.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommTimeoutException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 30, unit = TimeUnit.SECONDS)
class InMemoryStoreTest {

    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void setGetAddDeleteCount() {
        try (InMemoryStore s = new InMemoryStore(Duration.ofSeconds(5))) {
            s.set("a", b("1"));
            assertArrayEquals(b("1"), s.get("a"));
            assertEquals(5, s.add("n", 5));
            assertEquals(3, s.add("n", -2));
            assertArrayEquals(b("3"), s.get("n"));
            assertEquals(2, s.numKeys());
            assertTrue(s.deleteKey("a"));
            assertFalse(s.deleteKey("a"));
            assertEquals(1, s.numKeys());
            s.append("log", b("x"));
            s.append("log", b("yz"));
            assertArrayEquals(b("xyz"), s.get("log"));
        }
    }

    @Test
    void compareSetFollowsTorchSemantics() {
        try (InMemoryStore s = new InMemoryStore()) {
            assertArrayEquals(b("exp"), s.compareSet("k", b("exp"), b("new")), "missing key, non-empty expected");
            assertFalse(s.check(List.of("k")));
            assertArrayEquals(b("v1"), s.compareSet("k", new byte[0], b("v1")), "missing key, empty expected");
            assertArrayEquals(b("v1"), s.compareSet("k", b("nope"), b("v2")), "mismatch returns current");
            assertArrayEquals(b("v2"), s.compareSet("k", b("v1"), b("v2")));
            assertArrayEquals(b("v2"), s.get("k"));
        }
    }

    @Test
    void getBlocksUntilSetAndTimesOutNamingKeys() throws Exception {
        try (InMemoryStore s = new InMemoryStore(Duration.ofSeconds(5))) {
            CompletableFuture<byte[]> f = CompletableFuture.supplyAsync(() -> s.get("late"));
            Thread.sleep(50);
            assertFalse(f.isDone());
            s.set("late", b("here"));
            assertArrayEquals(b("here"), f.get(5, TimeUnit.SECONDS));
            long t0 = System.nanoTime();
            CommTimeoutException e = assertThrows(CommTimeoutException.class,
                    () -> s.wait(List.of("late", "never"), Duration.ofMillis(100)));
            assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(100));
            assertTrue(e.getMessage().contains("[never]"), e.getMessage());
        }
    }

    @Test
    void multiGetSetAndPrefix() {
        try (InMemoryStore s = new InMemoryStore()) {
            PrefixStore p = new PrefixStore("grp", s);
            p.multiSet(List.of("x", "y"), List.of(b("1"), b("2")));
            assertTrue(s.check(List.of("grp/x", "grp/y")));
            List<byte[]> v = p.multiGet(List.of("y", "x"));
            assertArrayEquals(b("2"), v.get(0));
            assertArrayEquals(b("1"), v.get(1));
            assertEquals(2, new PrefixStore("inner", p).add("c", 2));
            assertTrue(s.check(List.of("grp/inner/c")));
            p.close();
            assertArrayEquals(b("1"), s.get("grp/x"), "closing a prefix store leaves the base open");
        }
    }

    @Test
    void closeWakesWaiters() throws Exception {
        InMemoryStore s = new InMemoryStore(Duration.ofSeconds(20));
        CompletableFuture<byte[]> f = CompletableFuture.supplyAsync(() -> s.get("never"));
        Thread.sleep(50);
        s.close();
        Exception e = assertThrows(Exception.class, () -> f.get(5, TimeUnit.SECONDS));
        assertTrue(e.getCause() instanceof CommClosedException, String.valueOf(e.getCause()));
    }

    @Test
    void saysItServesConcurrentClientsAndAPrefixViewDoesNot() {
        InMemoryStore s = new InMemoryStore(Duration.ofSeconds(1));
        assertTrue(s.supportsConcurrentClients());
        assertTrue(s.concurrentClient() == s, "the in-memory store is its own concurrent client");
        PrefixStore view = new PrefixStore("p/", s);
        assertFalse(view.supportsConcurrentClients(), "a store that does not say so offers none");
        assertThrows(UnsupportedOperationException.class, view::concurrentClient);
    }
}
