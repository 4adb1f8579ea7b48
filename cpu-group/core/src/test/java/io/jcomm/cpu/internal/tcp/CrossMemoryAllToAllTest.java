package io.jcomm.cpu.internal.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.jcomm.cpu.internal.NativeCopy;
import io.jcomm.testkit.MultiJvm;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Three rank processes on one host exchange all-to-all and all-to-all-v inputs of ~12 MiB (far beyond the
 * fast path's region): with cross-memory reads every rank reads its parts from its two peers' processes,
 * without them (tcp.shm.crossMemory=false) the rings carry them; the values are the same either way.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class CrossMemoryAllToAllTest {

    @Test
    void largeAllToAllReadsEachPeersPartFromItsProcess() throws Exception {
        assumeTrue(NativeCopy.availability().available(), "libjcommcopy.so: " + NativeCopy.availability());
        try (MultiJvm job = MultiJvm.builder().name("crossmem").worldSize(3).mainClass(CrossMemoryWorker.class)
                .maxHeap("256m").deadline(Duration.ofSeconds(150)).start()) {
            MultiJvm.Results res = job.awaitAll();
            res.assertSurvivorsSucceeded();
            for (int r = 0; r < 3; r++) {
                String out = String.join("\n", res.output(r));
                // 3 rounds of all-to-all and all-to-all-v, 2 peers each
                assertEquals(List.of("CROSS cross 12"), res.linesContaining(r, "CROSS cross"), out);
                assertEquals(List.of("CROSS rings 0"), res.linesContaining(r, "CROSS rings"), out);
                assertEquals(1, res.linesContaining(r, "DONE").size(), out);
            }
        }
    }
}
