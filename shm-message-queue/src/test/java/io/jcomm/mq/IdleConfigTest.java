package io.jcomm.mq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import org.agrona.concurrent.IdleStrategy;
import org.junit.jupiter.api.Test;

class IdleConfigTest {

    @Test
    void parsesNamesAndNumbers() {
        assertEquals(IdleConfig.spinning(), IdleConfig.parse("spin"));
        assertEquals(IdleConfig.yielding(), IdleConfig.parse("yield"));
        assertEquals(IdleConfig.backoff(), IdleConfig.parse("backoff"));
        assertEquals(IdleConfig.yieldThenPark(), IdleConfig.parse("yieldpark"));
        IdleConfig c = IdleConfig.parse("10,20,1,500");
        assertEquals(10_000, c.spinNanos());
        assertEquals(20_000, c.yieldNanos());
        assertEquals(1_000, c.minParkNanos());
        assertEquals(500_000, c.maxParkNanos());
        assertThrows(IllegalArgumentException.class, () -> IdleConfig.parse("fast"));
        assertThrows(IllegalArgumentException.class, () -> IdleConfig.parse("1,2,3,2"));
    }

    @Test
    void spinsFirstOnlyWhenEveryWaiterHasACore() {
        assertEquals(IdleConfig.backoff(), IdleConfig.forHost(2, 2));
        assertEquals(IdleConfig.yieldThenPark(), IdleConfig.forHost(4, 2));
        assertEquals(IdleConfig.backoff(), MessageQueueOptions.builder().idle(IdleConfig.backoff()).build().idleFor(64));
    }

    @Test
    void aParkingStrategyReallyParksAndWorkResetsIt() {
        IdleStrategy s = IdleConfig.of(Duration.ZERO, Duration.ZERO, Duration.ofMillis(2), Duration.ofMillis(2)).newStrategy();
        long t0 = System.nanoTime();
        for (int i = 0; i < 10; i++) {
            s.idle(0);
        }
        assertTrue(System.nanoTime() - t0 >= 10 * 1_500_000L, "parked ~2 ms per idle call");
        IdleStrategy spin = IdleConfig.of(Duration.ofSeconds(10), Duration.ZERO, Duration.ofMillis(1), Duration.ofMillis(1))
                .newStrategy();
        long t1 = System.nanoTime();
        for (int i = 0; i < 100_000; i++) {
            spin.idle(0);
            if (i % 1000 == 0) {
                spin.idle(1); // work: back to the start of the spin phase
            }
        }
        assertTrue(System.nanoTime() - t1 < 5_000_000_000L, "spinning never parks");
    }
}
