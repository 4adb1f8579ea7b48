package io.jcomm.cpu.store.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Waiters of a key: one pass wakes them all; a waiter that leaves is removed without a scan. */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class StoreEngineWaitersTest {

    private static Key key(String s) {
        return Key.probe(42, 64).load(s.getBytes(StandardCharsets.US_ASCII)).copy();
    }

    /** A waiter that counts its wake-ups. */
    private static final class Waiter implements StoreEngine.WaitListener {
        int woken;

        @Override
        public void waitCompleted(StoreEngine.WaitRecord record) {
            woken++;
        }
    }

    private static StoreEngine.WaitRecord register(StoreEngine e, Waiter w, Key... keys) {
        StoreEngine.WaitRecord r = e.beginWait(w);
        for (Key k : keys) {
            e.waitFor(r, k);
        }
        assertFalse(e.endWaitRegistration(r));
        return r;
    }

    @Test
    void cancelledWaitersInAnyOrderAreNotWokenAndTheRestAreWokenOnce() {
        StoreEngine e = new StoreEngine(1 << 20);
        Key a = key("a");
        Key b = key("b");
        int n = 500;
        List<Waiter> ws = new ArrayList<>();
        List<StoreEngine.WaitRecord> rs = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Waiter w = new Waiter();
            ws.add(w);
            // every third waits for both keys, every fifth names "a" twice
            rs.add(i % 3 == 0 ? register(e, w, a, b) : i % 5 == 0 ? register(e, w, a, a) : register(e, w, a));
        }
        List<Integer> order = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            order.add(i);
        }
        Collections.shuffle(order, new Random(7));
        List<Integer> cancelled = order.subList(0, n / 2);
        for (int i : cancelled) {
            e.cancelWait(rs.get(i));
            e.cancelWait(rs.get(i)); // idempotent
        }
        assertEquals(n - n / 2, e.pendingWaits());
        e.set(a, new byte[] {1});
        e.set(b, new byte[] {2});
        for (int i = 0; i < n; i++) {
            assertEquals(cancelled.contains(i) ? 0 : 1, ws.get(i).woken, "waiter " + i);
        }
        assertEquals(0, e.pendingWaits());
    }

    @Test
    void aWaiterPartlyServedThenCancelledLeavesTheNextListOfItsKeyAlone() {
        StoreEngine e = new StoreEngine(1 << 20);
        Key a = key("a");
        Key b = key("b");
        Waiter w1 = new Waiter();
        StoreEngine.WaitRecord r1 = register(e, w1, a, b);
        e.set(a, new byte[] {1}); // r1 still waits for b
        e.delete(a);
        Waiter w2 = new Waiter();
        register(e, w2, a); // a new waiter list for "a", slot 0 as r1's stale one
        e.cancelWait(r1);
        e.set(a, new byte[] {1});
        assertEquals(1, w2.woken);
        e.set(b, new byte[] {1});
        assertEquals(0, w1.woken);
        assertEquals(0, e.pendingWaits());
    }

    @Test
    void aCrowdLeavingOneKeyCostsNoScan() {
        // 200,000 waiters of one key leave, last first (the worst order for a list scanned from the front):
        // a scan per cancel takes about 5 s on a 2-core machine, removal by slot about 10 ms
        StoreEngine e = new StoreEngine(1 << 20);
        Key k = key("release");
        int n = 200_000;
        StoreEngine.WaitRecord[] rs = new StoreEngine.WaitRecord[n];
        Waiter w = new Waiter();
        for (int i = 0; i < n; i++) {
            rs[i] = register(e, w, k);
        }
        long t0 = System.nanoTime();
        for (int i = n - 1; i >= 1; i--) {
            e.cancelWait(rs[i]);
        }
        long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertEquals(1, e.pendingWaits());
        e.set(k, new byte[] {1});
        assertEquals(1, w.woken);
        assertTrue(ms < 1_000, n + " cancels took " + ms + " ms (a scan per cancel takes seconds)");
    }
}
