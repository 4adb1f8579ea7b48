package io.jcomm.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

class FailureLatchTest {

    @Test
    void theFirstFailureWinsAndIsReportedAsItWasOrRetyped() {
        FailureLatch l = new FailureLatch();
        assertNull(l.first());
        assertFalse(l.isTripped());
        l.rethrow();
        l.rethrowAs(OpContext.of("g", 0, "x"), "unused");

        PeerFailureException first = new PeerFailureException(OpContext.of("tp:0", 1, "allReduce"), 3, "connection lost");
        assertSame(first, l.trip(first));
        CommTimeoutException second = new CommTimeoutException(OpContext.of("tp:0", 1, "barrier"), "late");
        assertSame(second, l.trip(second), "trip returns its argument for throw statements");
        assertFalse(l.tripFirst(second));
        assertSame(first, l.first());

        assertSame(first, assertThrows(PeerFailureException.class, l::rethrow));
        PeerFailureException again = assertThrows(PeerFailureException.class,
                () -> l.rethrowAs(OpContext.of("tp:0", 1, "broadcast"), "group failed earlier"));
        assertEquals(3, again.peerRank());
        assertEquals("broadcast", again.operation());
        assertSame(first, again.getCause());
        assertTrue(again.detail().contains("group failed earlier (allReduce): "), again.detail());
    }

    @Test
    void underARaceExactlyOneTripIsFirst() throws Exception {
        FailureLatch l = new FailureLatch();
        AtomicInteger firsts = new AtomicInteger();
        CountDownLatch go = new CountDownLatch(1);
        List<Thread> threads = new ArrayList<>();
        for (int i = 0; i < 8; i++) {
            CommException e = new CommException(OpContext.of("g", i, "op"), "failure " + i, null);
            Thread t = new Thread(() -> {
                try {
                    go.await();
                } catch (InterruptedException ex) {
                    return;
                }
                if (l.tripFirst(e)) {
                    firsts.incrementAndGet();
                }
            });
            threads.add(t);
            t.start();
        }
        go.countDown();
        for (Thread t : threads) {
            t.join(10_000);
        }
        assertEquals(1, firsts.get());
        assertTrue(l.isTripped());
    }
}
