package io.jcomm.tools.bench.progress;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;

class BenchProgressTest {

    @Test
    void namesTheOperationBackendAndSizeBeingMeasured() throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        PrintStream err = new PrintStream(bytes, true, StandardCharsets.UTF_8);
        try (BenchProgress p = BenchProgress.start("allreduce", "tcp", List.of(1024L, 4096L, 16L << 20), err, 20)) {
            assertTrue(p.status().startsWith("commbench: allreduce tcp: warming up, then 1K (1/3), "), p.status());
            p.sizeDone(1024);
            assertTrue(p.status().startsWith("commbench: allreduce tcp: measuring 4K (2/3)"), p.status());
            p.sizeDone(4096);
            assertTrue(p.status().startsWith("commbench: allreduce tcp: measuring 16M (3/3)"), p.status());
            long end = System.nanoTime() + 10_000_000_000L;
            while (!bytes.toString(StandardCharsets.UTF_8).contains("measuring 16M") && System.nanoTime() < end) {
                Thread.sleep(10);
            }
            p.sizeDone(16L << 20);
            assertTrue(p.status().contains("all 3 sizes done"), p.status());
        }
        assertTrue(bytes.toString(StandardCharsets.UTF_8).contains("commbench: allreduce tcp: measuring 16M (3/3)"));
        ByteArrayOutputStream quiet = new ByteArrayOutputStream();
        try (BenchProgress p = BenchProgress.start("barrier", "gloo", List.of(0L), new PrintStream(quiet, true,
                StandardCharsets.UTF_8), 0)) {
            Thread.sleep(50);
            p.sizeDone(0);
        }
        assertEquals(0, quiet.size(), "interval 0 prints nothing");
    }
}
