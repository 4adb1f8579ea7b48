package io.jcomm.it.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.testkit.FreePorts;
import io.jcomm.testkit.MultiJvm;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** torchrun-style rendezvous across real processes: Java ranks, and a torch worker joining a Java host. */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class RendezvousIT {

    @Test
    void threeJvmsRendezvousOnTheStoreHostedByRankZero() {
        try (MultiJvm job = MultiJvm.builder().name("rdzv").worldSize(3).mainClass(RendezvousWorker.class)
                .args("java-only").maxHeap("256m").deadline(Duration.ofSeconds(120)).start()) {
            MultiJvm.Results r = job.awaitAll();
            r.assertAllSucceeded();
            for (int rank = 0; rank < 3; rank++) {
                assertEquals(1, r.linesContaining(rank, "rank " + rank + " sees ok,ok,ok,").size(),
                        String.join("\n", r.output(rank)));
                assertEquals(1, r.linesContaining(rank, "rank " + rank + " done").size());
            }
        }
    }

    @Test
    void aTorchWorkerWithWorldSizeJoinsAJavaHostedStore() throws Exception {
        TorchProcess.assumeTorch();
        int port = FreePorts.find();
        try (MultiJvm job = MultiJvm.builder().name("rdzv-torch").worldSize(1).mainClass(RendezvousWorker.class)
                .args("with-torch").env("WORLD_SIZE", "2").masterPort(port).maxHeap("256m")
                .deadline(Duration.ofSeconds(150)).start();
             TorchProcess py = TorchProcess.start("torch-worker", "127.0.0.1", Integer.toString(port), "worker", "2")) {
            assertEquals(0, py.waitFor(Duration.ofSeconds(120)), py.output());
            MultiJvm.Results r = job.awaitAll();
            r.assertAllSucceeded();
            assertEquals(1, r.linesContaining(0, "torch_worker=joined").size(), String.join("\n", r.output(0)));
            assertTrue(py.lines().contains("DONE"), py.output());
        }
    }
}
