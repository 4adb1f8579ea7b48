package io.jcomm.mq;

import static org.junit.jupiter.api.Assertions.assertEquals;
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
 * Writer and readers in separate JVMs over a real Aeron media driver: 1 and 3 local readers, a
 * reader forced remote over UDP on loopback; every size from 0 B to 64 MiB; 100,000 messages in
 * order; garbage and unregistered types; a slow reader holding the writer back; clean close.
 * After each job no file of it remains in /dev/shm.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class MessageQueueIT {

    @TempDir
    Path dir;

    static String tag(String name) {
        return name + ProcessHandle.current().pid() + "x" + Long.toHexString(System.nanoTime() & 0xffffff);
    }

    static void assertNoShmFiles(String tag) throws Exception {
        try (Stream<Path> s = Files.list(Path.of("/dev/shm"))) {
            assertEquals(List.of(), s.filter(p -> p.getFileName().toString().contains(tag)).toList(),
                    "files of the job left in /dev/shm");
        }
    }

    static MultiJvm.Results run(String name, String tag, Path dir, int world, List<Integer> remote, String... args) {
        try (MultiJvm job = MultiJvm.builder().name(name).worldSize(world).mainClass(MqWorker.class).args(args)
                .env("MQ_DIR", dir.toString()).env("MQ_TAG", tag).maxHeap("512m")
                .envForRank(r -> remote.contains(r) ? Map.of("MQ_REMOTE", "1") : Map.of())
                .deadline(Duration.ofSeconds(180)).start()) {
            MultiJvm.Results r = job.awaitAll();
            r.assertAllSucceeded();
            return r;
        }
    }

    static void assertReaderSawEverything(MultiJvm.Results r, int rank, boolean slowPhase) {
        assertEquals(1, r.linesContaining(rank, "SIZES OK").size(), "sizes");
        assertEquals(1, r.linesContaining(rank, "STREAM OK 100000").size(), "stream");
        assertTrue(r.linesContaining(rank, "GARBAGE REJECTED").get(0).contains("raw bytes"), "garbage");
        assertTrue(r.linesContaining(rank, "UNREGISTERED REJECTED").get(0).contains("ProtocolException")
                || r.linesContaining(rank, "UNREGISTERED REJECTED").get(0).contains("message"), "unregistered");
        if (slowPhase) {
            assertEquals(1, r.linesContaining(rank, "FLOOD OK").size(), "flood");
        }
        assertTrue(r.linesContaining(rank, "CLOSED").get(0).contains("writer rank 0 closed the queue"), "close");
        assertEquals(1, r.linesContaining(rank, "READER " + rank + " DONE").size());
    }

    @Test
    void threeLocalReadersWithASlowOne() throws Exception {
        String tag = tag("mqit3l");
        MultiJvm.Results r = run("3-local", tag, dir, 4, List.of(), "stream", "1,2,3", "-", "3");
        String bp = r.linesContaining(0, "BACKPRESSURE").get(0);
        // rank 3 is among the slow readers (a descheduled rank 1 or 2 may be named with it); everyone is listed
        assertTrue(slowPart(bp).contains("rank 3 ("), bp);
        assertTrue(bp.contains("rank 1 (") && bp.contains("rank 2 ("), bp);
        assertTrue(bp.contains("CommTimeoutException") || bp.contains("op=enqueue"), bp);
        assertTrue(r.linesContaining(0, "WRITER REFUSED UNREGISTERED").get(0).contains("not registered")
                || r.linesContaining(0, "WRITER REFUSED UNREGISTERED").get(0).contains("cannot encode"));
        assertEquals(1, r.linesContaining(0, "DELIVERED").size());
        for (int rank = 1; rank <= 3; rank++) {
            assertReaderSawEverything(r, rank, true);
        }
        assertNoShmFiles(tag);
    }

    @Test
    void oneLocalReaderAndOneRemoteSlowReaderOverUdp() throws Exception {
        String tag = tag("mqitlr");
        MultiJvm.Results r = run("local+remote", tag, dir, 3, List.of(2), "stream", "1", "2", "2");
        assertEquals(1, r.linesContaining(1, "OPEN ipc").size());
        assertEquals(1, r.linesContaining(2, "OPEN udp").size());
        String bp = r.linesContaining(0, "BACKPRESSURE").get(0);
        assertTrue(slowPart(bp).contains("rank 2 ("), bp);
        assertTrue(bp.contains("rank 1 ("), bp);
        for (int rank = 1; rank <= 2; rank++) {
            assertReaderSawEverything(r, rank, true);
        }
        assertNoShmFiles(tag);
    }

    @Test
    void oneLocalReader() throws Exception {
        String tag = tag("mqit1l");
        MultiJvm.Results r = run("1-local", tag, dir, 2, List.of(), "stream", "1", "-");
        assertReaderSawEverything(r, 1, false);
        assertNoShmFiles(tag);
    }

    /** The "slow reader(s) ..." part of a backpressure message (up to "other readers", if any). */
    private static String slowPart(String bp) {
        int from = bp.indexOf("slow reader(s) ");
        assertTrue(from >= 0, bp);
        int to = bp.indexOf("other readers: ", from);
        return bp.substring(from, to < 0 ? bp.length() : to);
    }
}
