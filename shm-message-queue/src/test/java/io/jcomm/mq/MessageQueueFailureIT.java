package io.jcomm.mq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.testkit.MultiJvm;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * kill -9 of a reader or of the writer, in separate JVMs: the survivors get a
 * {@code PeerFailureException} naming the dead rank within a few seconds (liveness timeout 2 s),
 * never an endless wait; afterwards no file of the job remains in /dev/shm (the survivors or the
 * stale-directory cleanup remove the dead owner's driver directory).
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class MessageQueueFailureIT {

    /** Generous bound on detection (the machine is shared and loaded); typical is 2-3 s. */
    private static final long BOUND_NANOS = TimeUnit.SECONDS.toNanos(8);

    @TempDir
    Path dir;

    private static MultiJvm start(String name, String tag, Path dir, int world, List<Integer> remote, String... args) {
        return MultiJvm.builder().name(name).worldSize(world).mainClass(MqWorker.class).args(args)
                .env("MQ_DIR", dir.toString()).env("MQ_TAG", tag).maxHeap("256m").keepOthersOnFailure()
                .envForRank(r -> remote.contains(r) ? Map.of("MQ_REMOTE", "1") : Map.of())
                .deadline(Duration.ofSeconds(120)).start();
    }

    /** Waits for the FAILURE line of {@code rank}; asserts type and peer; returns detection delay. */
    private static long awaitFailure(MultiJvm job, int rank, String type, int peer, long killedAt) {
        String line = job.awaitLine(rank, "FAILURE", Duration.ofSeconds(30));
        assertTrue(line.contains("FAILURE " + type + " peer=" + peer), line);
        long at = Long.parseLong(line.replaceAll(".* nanos=(\\d+) .*", "$1"));
        long delay = at - killedAt;
        System.out.printf("rank %d detected the death of rank %d after %.2f s: %s%n", rank, peer, delay / 1e9, line);
        assertTrue(delay < BOUND_NANOS, "detection took " + delay / 1e9 + " s");
        return delay;
    }

    private static void assertNoShmFiles(String tag) throws Exception {
        try (Stream<Path> s = Files.list(Path.of("/dev/shm"))) {
            assertEquals(List.of(), s.filter(p -> p.getFileName().toString().contains(tag)).toList(),
                    "files of the job left in /dev/shm");
        }
    }

    @Test
    void killingALocalReaderFailsTheWriterNamingIt() throws Exception {
        String tag = MessageQueueIT.tag("mqkr");
        try (MultiJvm job = start("kill-local-reader", tag, dir, 3, List.of(), "flood", "1,2", "-")) {
            job.awaitLine(2, "READING", Duration.ofSeconds(60));
            long t0 = System.nanoTime();
            job.kill(2);
            awaitFailure(job, 0, "PeerFailureException", 2, t0);
            // the writer closes cleanly after the failure: the surviving reader sees a close, not a death
            String r1 = job.awaitLine(1, "FAILURE", Duration.ofSeconds(30));
            assertTrue(r1.contains("CommClosedException"), r1);
            MultiJvm.Results r = job.awaitAll();
            r.assertSurvivorsSucceeded();
        }
        assertNoShmFiles(tag);
    }

    @Test
    void killingTheWriterFailsLocalAndRemoteReadersNamingIt() throws Exception {
        String tag = MessageQueueIT.tag("mqkw");
        try (MultiJvm job = start("kill-writer", tag, dir, 3, List.of(2), "flood", "1", "2")) {
            job.awaitLine(1, "READING", Duration.ofSeconds(60));
            job.awaitLine(2, "READING", Duration.ofSeconds(60));
            long t0 = System.nanoTime();
            job.kill(0);
            awaitFailure(job, 1, "PeerFailureException", 0, t0);
            awaitFailure(job, 2, "PeerFailureException", 0, t0);
            MultiJvm.Results r = job.awaitAll();
            r.assertSurvivorsSucceeded();
        }
        // the local reader removed the dead writer's driver directory, the remote one its own
        assertNoShmFiles(tag);
    }

    @Test
    void sigtermOfTheDriverOwnerRemovesItsDirectory() throws Exception {
        String tag = MessageQueueIT.tag("mqterm");
        try (MultiJvm job = start("sigterm", tag, dir, 2, List.of(), "flood", "1", "-")) {
            job.awaitLine(1, "READING", Duration.ofSeconds(60));
            try (Stream<Path> s = Files.list(Path.of("/dev/shm"))) {
                assertEquals(1, s.filter(p -> p.getFileName().toString().contains(tag)).count(), "the writer's driver");
            }
            long t0 = System.nanoTime();
            job.process(0).destroy(); // SIGTERM: the JVM's shutdown hooks run
            assertTrue(job.process(0).waitFor(20, TimeUnit.SECONDS));
            awaitFailure(job, 1, "PeerFailureException", 0, t0);
            job.awaitAll();
        }
        assertNoShmFiles(tag);
    }

    @Test
    void killingARemoteReaderFailsTheWriterAndStaleCleanupRemovesItsDriver() throws Exception {
        String tag = MessageQueueIT.tag("mqkrr");
        Path readerDir;
        try (MultiJvm job = start("kill-remote-reader", tag, dir, 2, List.of(1), "flood", "-", "1")) {
            job.awaitLine(1, "READING", Duration.ofSeconds(60));
            String readerPid = "-" + job.pid(1) + "-";
            try (Stream<Path> s = Files.list(Path.of("/dev/shm"))) {
                readerDir = s.filter(p -> p.getFileName().toString().contains(tag)
                        && p.getFileName().toString().contains(readerPid)).findFirst().orElseThrow();
            }
            long t0 = System.nanoTime();
            job.kill(1);
            awaitFailure(job, 0, "PeerFailureException", 1, t0);
            MultiJvm.Results r = job.awaitAll();
            r.assertSurvivorsSucceeded();
        }
        // the killed reader owned its host's driver: nobody closed it, so its directory is stale until
        // a cleanup (ours here, or any other AeronMedia.launch on this host that ran meanwhile)
        List<Path> removed = AeronMedia.cleanStale(Path.of("/dev/shm"));
        System.out.println("stale cleanup removed " + removed);
        assertFalse(Files.exists(readerDir), readerDir + " survived the stale cleanup");
        assertNoShmFiles(tag);
    }
}
