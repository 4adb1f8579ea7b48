package io.jcomm.cpu.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;

import io.jcomm.testkit.MultiJvm;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Two JVMs share one Chronicle Map store file in /dev/shm: atomic adds, waits, owner cleanup. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ChronicleMapStoreIT {

    @Test
    void twoProcessesShareOneStoreFile() {
        Path file = Path.of("/dev/shm", "jcomm-store-it-" + ProcessHandle.current().pid() + "-" + System.nanoTime() + ".dat");
        try (MultiJvm job = MultiJvm.builder().name("store").worldSize(2).mainClass(StoreWorker.class)
                .env("STORE_FILE", file.toString()).maxHeap("256m").deadline(Duration.ofSeconds(90)).start()) {
            MultiJvm.Results r = job.awaitAll();
            r.assertAllSucceeded();
            for (int rank = 0; rank < 2; rank++) {
                assertEquals(1, r.linesContaining(rank, "COUNTER 2000 PEER pid " + job.pid(1 - rank)).size(),
                        String.join("\n", r.output(rank)));
            }
        }
        assertFalse(Files.exists(file), "store file left in /dev/shm");
    }
}
