package io.jcomm.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.Deadline;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

class BackoffTest {

    @Test
    void pausesGrowByTheFactorUpToTheLongest() {
        Backoff b = Backoff.of(Duration.ofNanos(100), Duration.ofNanos(1000), 1.5);
        long[] expected = {100, 150, 225, 337, 505, 757, 1000, 1000};
        for (long e : expected) {
            assertEquals(e, b.nextNanos());
        }
        b.reset();
        assertEquals(100, b.nextNanos());
        Backoff d = Backoff.doubling(Duration.ofNanos(1), Duration.ofNanos(8));
        assertEquals(1, d.nextNanos());
        assertEquals(2, d.nextNanos());
        assertEquals(4, d.nextNanos());
        assertEquals(8, d.nextNanos());
        assertEquals(8, d.nextNanos());
        Backoff flat = Backoff.of(Duration.ofNanos(3), Duration.ofNanos(3), 1.0);
        assertEquals(3, flat.nextNanos());
        assertEquals(3, flat.nextNanos());
    }

    @Test
    @Timeout(5)
    void aPauseNeverPassesItsDeadline() {
        Backoff b = Backoff.doubling(Duration.ofSeconds(10), Duration.ofSeconds(10));
        long t0 = System.nanoTime();
        assertTrue(b.pause(Deadline.after(Duration.ofMillis(50))));
        long took = System.nanoTime() - t0;
        assertTrue(took < Duration.ofSeconds(2).toNanos(), "parked " + took / 1_000_000 + " ms");
        assertFalse(b.pause(Deadline.after(Duration.ZERO)));
        assertFalse(b.pauseUntil(System.nanoTime() - 1));
        assertTrue(b.pauseUntil(System.nanoTime() + 1_000_000));
    }

    @Test
    void nonsenseIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> Backoff.of(Duration.ZERO, Duration.ofMillis(1), 2));
        assertThrows(IllegalArgumentException.class, () -> Backoff.of(Duration.ofMillis(2), Duration.ofMillis(1), 2));
        assertThrows(IllegalArgumentException.class, () -> Backoff.of(Duration.ofMillis(1), Duration.ofMillis(2), 0.5));
    }
}
