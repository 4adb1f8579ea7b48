package io.jcomm.cpu.gloo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.store.InMemoryStore;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** torch's key chain and join order, checked on Java-only ranks (the PyTorch test is TorchGlooInteropIT). */
@Timeout(60)
class TorchGlooGroupTest {

    @Test
    void joinsWithTorchKeysAndAgreesOnTheSequenceNumber() throws Exception {
        ThreadRanks.assumeGloo();
        InMemoryStore store = new InMemoryStore(Duration.ofSeconds(20));
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            List<Future<long[]>> fs = List.of(0, 1).stream().map(r -> pool.submit(() -> {
                try (TorchGlooGroup g = TorchGlooGroup.joinDefaultGroup(store, r, 2, Duration.ofSeconds(20),
                        Map.of(GlooBackend.HOSTNAME_OPTION, "127.0.0.1", GlooBackend.DEVICES_OPTION, "2"))) {
                    ProcessGroup pg = g.group();
                    assertEquals("gloo", pg.backendName());
                    assertEquals("0", pg.name());
                    assertEquals(r, pg.rank());
                    Tensor t = Tensor.ofLongs(r + 1);
                    pg.allReduce(t, ReduceOp.SUM, Duration.ofSeconds(10));
                    return new long[] {g.sequenceNumber(), t.getLong(0)};
                }
            })).toList();
            long[] a = fs.get(0).get(30, TimeUnit.SECONDS);
            long[] b = fs.get(1).get(30, TimeUnit.SECONDS);
            assertEquals(a[0], b[0], "same sequence number");
            assertTrue(a[0] > 0);
            assertArrayEquals(new long[] {3, 3}, new long[] {a[1], b[1]});
        } finally {
            pool.shutdownNow();
        }
        assertTrue(store.check(List.of("default_pg/0/0/rank_0", "default_pg/0/0/rank_1", "default_pg/0/0/0",
                "default_pg/0/0/1", "default_pg/0/1/0", "default_pg/0/1/1", "default_pg/0/SEQ_NUM_STORE_KEY")));
        assertEquals("2", new String(store.get("default_pg/store_based_barrier_key:1"), StandardCharsets.US_ASCII));
        assertEquals(8, store.get("default_pg/0/SEQ_NUM_STORE_KEY").length);
    }

    @Test
    void aMissingRankIsATimeout() {
        ThreadRanks.assumeGloo();
        InMemoryStore store = new InMemoryStore(Duration.ofSeconds(20));
        assertThrows(CommTimeoutException.class, () -> TorchGlooGroup.joinDefaultGroup(store, 1, 2,
                Duration.ofMillis(500), Map.of(GlooBackend.HOSTNAME_OPTION, "127.0.0.1")));
    }
}
