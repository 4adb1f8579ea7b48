package io.jcomm.cpu.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.store.PrefixStore;
import io.jcomm.api.store.Store;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Conformance kit of {@link Store}: every implementation re-runs it by providing fresh, empty stores
 * that share one backing state ({@link #newStore()} may be called several times per test; all
 * handles see the same keys).
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
public abstract class StoreContractTest {

    protected final List<Store> opened = new ArrayList<>();
    protected ExecutorService pool;

    /** Prepares a fresh, empty backing store for one test. */
    protected abstract void setUpBacking() throws Exception;

    /** A new handle on the backing store of this test. */
    protected abstract Store newStore();

    protected void tearDownBacking() throws Exception {
    }

    @BeforeEach
    void setUpContract() throws Exception {
        pool = Executors.newCachedThreadPool();
        setUpBacking();
    }

    @AfterEach
    void tearDownContract() throws Exception {
        for (Store s : opened) {
            s.close();
        }
        pool.shutdownNow();
        assertTrue(pool.awaitTermination(10, TimeUnit.SECONDS), "store calls still blocked after close");
        tearDownBacking();
    }

    protected Store store() {
        Store s = newStore();
        opened.add(s);
        return s;
    }

    private static byte[] b(String s) {
        return s.getBytes(UTF_8);
    }

    @Test
    void setGetOverwriteAndBinaryValues() {
        Store s = store();
        s.set("a", b("1"));
        assertArrayEquals(b("1"), s.get("a"));
        s.set("a", b("two"));
        assertArrayEquals(b("two"), s.get("a"));
        byte[] bin = new byte[1000];
        for (int i = 0; i < bin.length; i++) {
            bin[i] = (byte) i;
        }
        s.set("bin", bin);
        assertArrayEquals(bin, s.get("bin"));
        s.set("empty", new byte[0]);
        assertArrayEquals(new byte[0], s.get("empty"));
        s.set("ünïcode/κλειδί", b("u"));
        assertArrayEquals(b("u"), s.get("ünïcode/κλειδί"));
        assertEquals(4, s.numKeys());
    }

    @Test
    void largeValueRoundTrip() {
        Store s = store();
        byte[] big = new byte[3 * 1024 * 1024 + 7];
        new java.util.Random(1).nextBytes(big);
        s.set("big", big);
        assertArrayEquals(big, s.get("big"));
        assertArrayEquals(big, s.multiGet(List.of("big")).get(0));
    }

    @Test
    void addCountsAndStoresDecimal() {
        Store s = store();
        assertEquals(5, s.add("n", 5));
        assertEquals(3, s.add("n", -2));
        assertArrayEquals(b("3"), s.get("n"));
        assertEquals(-7, s.add("neg", -7));
        assertArrayEquals(b("-7"), s.get("neg"));
        assertEquals(0, s.add("zero", 0));
        assertEquals(Long.MAX_VALUE, s.add("max", Long.MAX_VALUE));
        s.set("preset", b("40"));
        assertEquals(42, s.add("preset", 2));
    }

    @Test
    void compareSetFollowsTorchSemantics() {
        Store s = store();
        // missing key, empty expected: sets
        assertArrayEquals(b("v1"), s.compareSet("k", new byte[0], b("v1")));
        assertArrayEquals(b("v1"), s.get("k"));
        // matching expected: swaps
        assertArrayEquals(b("v2"), s.compareSet("k", b("v1"), b("v2")));
        // wrong expected: current value, unchanged
        assertArrayEquals(b("v2"), s.compareSet("k", b("nope"), b("v3")));
        assertArrayEquals(b("v2"), s.get("k"));
        // missing key, non-empty expected: returns expected, sets nothing
        assertArrayEquals(b("x"), s.compareSet("missing", b("x"), b("y")));
        assertFalse(s.check(List.of("missing")));
    }

    @Test
    void checkDeleteAndNumKeys() {
        Store s = store();
        assertEquals(0, s.numKeys());
        assertFalse(s.check(List.of("a")));
        s.set("a", b("1"));
        s.set("b", b("2"));
        assertTrue(s.check(List.of("a", "b")));
        assertFalse(s.check(List.of("a", "c")));
        assertTrue(s.check(List.of()));
        assertEquals(2, s.numKeys());
        assertTrue(s.deleteKey("a"));
        assertFalse(s.deleteKey("a"));
        assertFalse(s.check(List.of("a")));
        assertEquals(1, s.numKeys());
    }

    @Test
    void multiSetMultiGetAndAppend() {
        Store s = store();
        s.multiSet(List.of("m1", "m2", "m3"), List.of(b("a"), b("bb"), b("")));
        List<byte[]> got = s.multiGet(List.of("m3", "m1", "m2"));
        assertEquals(3, got.size());
        assertArrayEquals(b(""), got.get(0));
        assertArrayEquals(b("a"), got.get(1));
        assertArrayEquals(b("bb"), got.get(2));
        assertEquals(0, s.multiGet(List.of()).size());
        s.append("log", b("x"));
        s.append("log", b("y"));
        s.append("log", b("z"));
        assertArrayEquals(b("xyz"), s.get("log"));
        s.set("same", b("x"));
        s.append("same", b("x"));
        assertArrayEquals(b("xx"), s.get("same"));
        assertThrows(IllegalArgumentException.class, () -> s.multiSet(List.of("a"), List.of()));
    }

    @Test
    void concurrentAppendsAndAddsAreNotLost() throws Exception {
        int threads = 4;
        int each = 25;
        List<Future<?>> fs = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            Store s = store();
            String tag = Character.toString((char) ('a' + t));
            fs.add(pool.submit(() -> {
                for (int i = 0; i < each; i++) {
                    s.append("log", b(tag));
                    s.add("count", 1);
                }
                return null;
            }));
        }
        for (Future<?> f : fs) {
            f.get(30, TimeUnit.SECONDS);
        }
        Store s = store();
        assertEquals(threads * each, s.add("count", 0));
        String log = new String(s.get("log"), UTF_8);
        assertEquals(threads * each, log.length());
        for (int t = 0; t < threads; t++) {
            char c = (char) ('a' + t);
            assertEquals(each, log.chars().filter(x -> x == c).count(), log);
        }
    }

    @Test
    void waitIsWokenBySetAddAndMultiSet() throws Exception {
        Store waiter1 = store();
        Store waiter2 = store();
        Store waiter3 = store();
        Store writer = store();
        CountDownLatch started = new CountDownLatch(3);
        CompletableFuture<byte[]> get = CompletableFuture.supplyAsync(() -> {
            started.countDown();
            return waiter1.get("late", Duration.ofSeconds(20));
        }, pool);
        CompletableFuture<Void> waitAdd = CompletableFuture.runAsync(() -> {
            started.countDown();
            waiter2.wait(List.of("counter"), Duration.ofSeconds(20));
        }, pool);
        CompletableFuture<List<byte[]>> multi = CompletableFuture.supplyAsync(() -> {
            started.countDown();
            return waiter3.multiGet(List.of("x", "y"), Duration.ofSeconds(20));
        }, pool);
        assertTrue(started.await(10, TimeUnit.SECONDS));
        Thread.sleep(100);
        assertFalse(get.isDone());
        assertFalse(waitAdd.isDone());
        assertFalse(multi.isDone());
        writer.set("late", b("here"));
        writer.add("counter", 1);
        writer.set("x", b("1"));
        Thread.sleep(50);
        assertFalse(multi.isDone(), "multiGet returned before all keys existed");
        writer.multiSet(List.of("y", "z"), List.of(b("2"), b("3")));
        assertArrayEquals(b("here"), get.get(10, TimeUnit.SECONDS));
        waitAdd.get(10, TimeUnit.SECONDS);
        List<byte[]> m = multi.get(10, TimeUnit.SECONDS);
        assertArrayEquals(b("1"), m.get(0));
        assertArrayEquals(b("2"), m.get(1));
    }

    @Test
    void waitTimesOutNamingTheKeysAndTheStoreStaysUsable() {
        Store s = store();
        s.set("present", b("p"));
        long t0 = System.nanoTime();
        CommTimeoutException e = assertThrows(CommTimeoutException.class,
                () -> s.wait(List.of("present", "absent1", "absent2"), Duration.ofMillis(200)));
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertTrue(ms >= 150, "returned after " + ms + " ms");
        assertTrue(e.getMessage().contains("absent1") && e.getMessage().contains("absent2"), e.getMessage());
        assertEquals("wait", e.operation());
        CommTimeoutException g = assertThrows(CommTimeoutException.class, () -> s.get("nothing", Duration.ofMillis(100)));
        assertTrue(g.getMessage().contains("nothing"), g.getMessage());
        // the handle keeps working and replies are not shifted by the abandoned waits
        Store other = store();
        other.set("absent1", b("1"));
        other.set("absent2", b("2"));
        other.set("nothing", b("n"));
        assertEquals(7, s.add("after", 7));
        assertArrayEquals(b("p"), s.get("present"));
        assertArrayEquals(b("n"), s.get("nothing"));
        s.wait(List.of("absent1", "absent2"), Duration.ofSeconds(5));
        assertTrue(s.check(List.of("absent1")));
        assertEquals(8, s.add("after", 1));
    }

    @Test
    void prefixStoreViewsShareTheStore() {
        Store s = store();
        Store p = new PrefixStore("grp", s);
        p.set("k", b("v"));
        assertArrayEquals(b("v"), s.get("grp/k"));
        assertEquals(1, p.add("n", 1));
        p.close();
        assertArrayEquals(b("v"), s.get("grp/k"));
    }

    @Test
    void invalidKeysAreRejectedBeforeSending() {
        Store s = store();
        assertThrows(IllegalArgumentException.class, () -> s.set("", b("x")));
        s.set("ok", b("1"));
        assertArrayEquals(b("1"), s.get("ok"));
    }

    @Test
    void closeFailsBlockedAndLaterCalls() throws Exception {
        Store s = store();
        CountDownLatch started = new CountDownLatch(1);
        CompletableFuture<byte[]> blocked = CompletableFuture.supplyAsync(() -> {
            started.countDown();
            return s.get("never", Duration.ofSeconds(30));
        }, pool);
        assertTrue(started.await(10, TimeUnit.SECONDS));
        Thread.sleep(100);
        long t0 = System.nanoTime();
        s.close();
        s.close(); // idempotent
        java.util.concurrent.ExecutionException ee = assertThrows(java.util.concurrent.ExecutionException.class,
                () -> blocked.get(10, TimeUnit.SECONDS));
        assertTrue(ee.getCause() instanceof CommClosedException, String.valueOf(ee.getCause()));
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(5));
        assertThrows(CommClosedException.class, () -> s.set("a", b("b")));
        // other handles are unaffected
        Store other = store();
        other.set("still", b("ok"));
        assertArrayEquals(b("ok"), other.get("still"));
    }
}
