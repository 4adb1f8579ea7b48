package io.jcomm.it.transfer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import io.jcomm.testkit.MultiJvm;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two JVMs, two transfer agents ("decode" owns memory, "prefill" writes and reads it) that find each
 * other through a real TCP store with a job token: every byte of permuted block writes over tcp (heap
 * region) and shm (shared region) checked on both sides, notifications, refused out-of-range,
 * read-only and stale descriptors writing nothing, and {@code kill -9} of the owner mid-stream
 * failing the initiator's pending transfers with a PeerFailureException within a second.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class TransferIT {

    @Test
    void twoAgentsInTwoJvmsWriteReadRefuseAndSurviveAKilledPeer(@TempDir Path dir) throws Exception {
        Path token = dir.resolve("token");
        Files.writeString(token, "transfer-it-job-token-0123456789\n", StandardCharsets.US_ASCII);
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().name("transfer-store")
                .token("transfer-it-job-token-0123456789".getBytes(StandardCharsets.US_ASCII)).build());
             MultiJvm job = MultiJvm.builder().name("transfer").worldSize(2).mainClass(TransferWorker.class)
                     .argsForRank(r -> List.of(r == 0 ? "owner" : "initiator", token.toString()))
                     .masterPort(server.port()).maxHeap("512m").deadline(Duration.ofSeconds(150)).start()) {
            job.awaitLine(0, "owner after refusals", Duration.ofSeconds(90));
            job.awaitLine(1, "initiator streaming", Duration.ofSeconds(60));
            long killedAt = System.currentTimeMillis();
            job.kill(0);
            String failed = job.awaitLine(1, l -> l.startsWith("initiator failed"), Duration.ofSeconds(30));
            job.awaitLine(1, "initiator survivor intact", Duration.ofSeconds(30));
            MultiJvm.Results r = job.awaitAll();
            String owner = String.join("\n", r.output(0));
            String init = String.join("\n", r.output(1));
            assertEquals(0, r.exitCode(1), init);

            assertTrue(owner.contains("owner notified from=prefill payload=heap-done"), owner);
            assertTrue(owner.contains("owner notified from=prefill payload=shared-done"), owner);
            assertTrue(owner.contains("owner heap wrong bytes=0"), owner);
            assertTrue(owner.contains("owner shared wrong bytes=0"), owner);
            assertTrue(owner.contains("guard touched=0 reused touched=0 readOnly changed=0 extra notifications=0"), owner);

            assertTrue(init.contains("initiator heap-done HEAP read-back wrong bytes=0"), init);
            assertTrue(init.contains("initiator shared-done SHARED read-back wrong bytes=0"), init);
            assertTrue(init.contains("initiator read-only region wrong bytes=0"), init);
            assertTrue(init.contains("initiator out-of-range refused reason=OUT_OF_RANGE"), init);
            assertTrue(init.contains("initiator read-only refused reason=PERMISSION"), init);
            assertTrue(init.contains("initiator stale refused reason=STALE"), init);

            assertTrue(failed.contains("type=PeerFailureException"), failed);
            long failedAt = Long.parseLong(failed.replaceAll(".*failedAt=(\\d+).*", "$1"));
            long ms = failedAt - killedAt;
            System.out.println("pending transfers failed " + ms + " ms after kill -9");
            assertTrue(ms >= 0 && ms < 1000, "failed " + ms + " ms after the kill: " + failed);
            assertTrue(init.contains("initiator write after death failed type=PeerFailureException"), init);
            assertTrue(init.contains("initiator survivor intact=true"), init);
        }
        // the killed owner's shared-memory directory is what the next agent on the host removes as it starts
        io.jcomm.api.internal.shm.ShmFiles.cleanStale(io.jcomm.api.internal.shm.ShmFiles.DEFAULT_DIR, "jcomm-kv-");
        try (java.util.stream.Stream<Path> left = Files.list(io.jcomm.api.internal.shm.ShmFiles.DEFAULT_DIR)) {
            List<String> dead = left.filter(p -> p.getFileName().toString().startsWith("jcomm-kv-decode-"))
                    .filter(p -> !io.jcomm.api.internal.shm.ShmFiles.ownerAlive(p)).map(Path::toString).toList();
            assertTrue(dead.isEmpty(), "a dead owner's directory is left: " + dead);
        }
    }
}
