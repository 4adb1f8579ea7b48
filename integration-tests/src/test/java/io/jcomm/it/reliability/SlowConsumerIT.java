package io.jcomm.it.reliability;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.testkit.MultiJvm;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * A producer that sends 240 MB in 4 KiB messages to a consumer that is slower, across two JVMs with
 * the default options: neither process grows by more than a few times the per-peer budget
 * ({@code tcp.sendBudgetBytes} 4 MiB, {@code tcp.sendBudgetMessages} 64; docs/RELIABILITY.md), while
 * without flow control the producer would buffer most of the 240 MB.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class SlowConsumerIT {

    /**
     * Resident-set growth allowed after warm-up, with the heap resident from the start: the send budget (4 MiB)
     * plus JIT and allocator noise.
     */
    private static final long BOUND_KB = 16 << 10;

    @Test
    void aProducerFeedingASlowerConsumerStaysWithinTheMemoryBound() {
        int messages = 60_000;
        try (MultiJvm job = MultiJvm.builder().name("slow").worldSize(2).mainClass(SlowConsumerWorker.class)
                .args(Integer.toString(messages), "4096").maxHeap("256m")
                // the heap resident from the start: what grows is then what the bound is about (buffers, queues),
                // not the young generation filling its committed space
                .jvmArg("-Xms256m").jvmArg("-XX:+AlwaysPreTouch").deadline(Duration.ofSeconds(150)).start()) {
            MultiJvm.Results res = job.awaitAll();
            res.assertAllSucceeded();
            for (int r = 0; r < 2; r++) {
                String line = res.linesContaining(r, "RSS " + r + " ").get(0);
                String[] f = line.substring(line.indexOf("RSS ")).split(" ");
                long base = Long.parseLong(f[3]);
                long max = Long.parseLong(f[5]);
                System.out.println("slow consumer: rank " + r + " RSS " + base / 1024 + " MiB after warm-up, max "
                        + max / 1024 + " MiB, " + f[7] + " ms");
                assertTrue(base > 0 && max > 0, line);
                assertTrue(max - base < BOUND_KB, "rank " + r + " grew by " + (max - base) / 1024 + " MiB: " + line);
            }
            assertEquals(1, res.linesContaining(1, "RSS 1 ").size());
        }
    }
}
