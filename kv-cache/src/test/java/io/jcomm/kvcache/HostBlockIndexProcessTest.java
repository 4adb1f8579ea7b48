package io.jcomm.kvcache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.testkit.MultiJvm;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The host index as processes use it: separate JVMs on one Chronicle Map file (each pays the first
 * open, a few seconds).
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class HostBlockIndexProcessTest {

    @TempDir
    Path dir;

    private MultiJvm.Builder jvms(String name, int n, java.util.function.IntFunction<List<String>> args) {
        return MultiJvm.builder().name(name).worldSize(n).mainClass(IndexWorker.class).argsForRank(args).maxHeap("128m")
                .deadline(Duration.ofSeconds(150));
    }

    private static int number(String line, String pattern) {
        Matcher m = Pattern.compile(pattern).matcher(line);
        assertTrue(m.find(), line + " !~ " + pattern);
        return Integer.parseInt(m.group(1));
    }

    @Test
    void concurrentWritersAndReadersSeeWholeEntriesOnly() throws Exception {
        String file = dir.resolve("idx.cmap").toString();
        int n = 3000;
        try (MultiJvm job = jvms("rw", 5, r -> r < 3
                ? List.of("write", file, "w" + r, "0", Integer.toString(n), "65536", "1")
                : List.of("read", file, "w0,w1,w2", "0", Integer.toString(n), "100")).start()) {
            for (int r = 3; r < 5; r++) {
                String line = job.awaitLine(r, "read hits", Duration.ofSeconds(140));
                assertTrue(line.contains("read hits " + 3 * n + " of " + 3 * n + " bad 0"), line);
            }
            for (int r = 0; r < 3; r++) {
                job.awaitLine(r, "written w" + r + " " + n, Duration.ofSeconds(10));
            }
            try (HostBlockIndex idx = HostBlockIndex.open(IndexWorker.options(file, 65536))) {
                assertEquals(3L * n, idx.size());
                for (int r = 0; r < 3; r++) {
                    BlockOwner owner = new BlockOwner(job.pid(r), io.jcomm.runtime.shm.ProcessIdentity.startTicksOf(job.pid(r)));
                    for (int i = 0; i < n; i += 97) {
                        BlockLocation l = idx.lookup(IndexWorker.key("w" + r, i)).orElseThrow();
                        assertTrue(IndexWorker.matches(l, "w" + r, i));
                        assertEquals(owner, l.owner());
                    }
                }
            }
        }
    }

    @Test
    void aRestartedProcessFindsTheIndex() throws Exception {
        String file = dir.resolve("idx.cmap").toString();
        // entries of this (live) process, written and closed
        try (HostBlockIndex idx = HostBlockIndex.open(IndexWorker.options(file, 65536))) {
            for (int i = 0; i < 200; i++) {
                idx.publish(IndexWorker.key("me", i), IndexWorker.location("me", i, BlockOwner.self()));
            }
        }
        // a holder process's entries, then two readers one after the other (the second a restart of the first)
        try (MultiJvm holder = jvms("holder", 1, r -> List.of("write", file, "h", "0", "300", "65536", "1")).start()) {
            holder.awaitLine(0, "written h 300", Duration.ofSeconds(60));
            for (int run = 0; run < 2; run++) {
                try (MultiJvm reader = jvms("reader" + run, 2, r -> r == 0 ? List.of("count", file, "me", "0", "200")
                        : List.of("count", file, "h", "0", "300")).start()) {
                    MultiJvm.Results res = reader.awaitAll();
                    res.assertAllSucceeded();
                    assertFalse(res.linesContaining(0, "found 200 size 500").isEmpty(), res.output(0).toString());
                    assertFalse(res.linesContaining(1, "found 300 size 500").isEmpty(), res.output(1).toString());
                }
            }
        }
        // this process reopens it too
        try (HostBlockIndex idx = HostBlockIndex.open(IndexWorker.options(file, 65536))) {
            assertTrue(IndexWorker.matches(idx.lookup(IndexWorker.key("me", 7)).orElseThrow(), "me", 7));
        }
    }

    @Test
    void aDeadOwnersEntriesAreNeverServed() throws Exception {
        String file = dir.resolve("idx.cmap").toString();
        try (HostBlockIndex idx = HostBlockIndex.open(IndexWorker.options(file, 65536));
             MultiJvm owners = jvms("owners", 2, r -> List.of("write", file, "d" + r, "0", "400", "65536", "1")).start()) {
            owners.awaitLine(0, "written d0 400", Duration.ofSeconds(60));
            owners.awaitLine(1, "written d1 400", Duration.ofSeconds(60));
            assertEquals(800, idx.size());
            for (int i = 0; i < 400; i++) {
                assertTrue(idx.lookup(IndexWorker.key("d0", i)).isPresent(), "entry " + i + " of a live owner");
            }
            long pid0 = owners.pid(0);
            owners.kill(0);
            owners.kill(1);
            assertTrue(owners.process(0).waitFor(20, TimeUnit.SECONDS) && owners.process(1).waitFor(20, TimeUnit.SECONDS));
            assertFalse(ProcessHandle.of(pid0).map(ProcessHandle::isAlive).orElse(false));
            // another process looks d0's entries up: none served, each removed as it is met
            try (MultiJvm reader = jvms("reader", 1, r -> List.of("count", file, "d0", "0", "400")).start()) {
                MultiJvm.Results res = reader.awaitAll();
                res.assertAllSucceeded();
                assertFalse(res.linesContaining(0, "found 0 size 400").isEmpty(), res.output(0).toString());
            }
            for (int i = 0; i < 400; i++) {
                assertFalse(idx.lookup(IndexWorker.key("d0", i)).isPresent());
            }
            // d1's entries: the sweep removes them without a lookup
            assertEquals(400, idx.size());
            assertEquals(400, idx.sweep());
            assertEquals(0, idx.size());
        }
    }

    @Test
    void evictionKeepsTheBoundWithConcurrentWriters() throws Exception {
        String file = dir.resolve("idx.cmap").toString();
        int bound = 512;
        try (MultiJvm writers = jvms("ev", 3, r -> List.of("write", file, "e" + r, "0", "2000", Integer.toString(bound), "1"))
                .start()) {
            long evicted = 0;
            for (int r = 0; r < 3; r++) {
                String line = writers.awaitLine(r, "written e" + r + " 2000", Duration.ofSeconds(120));
                assertTrue(number(line, "size (\\d+)") <= bound, line);
                evicted += number(line, "evicted (\\d+)");
            }
            assertTrue(evicted >= 3 * 2000 - bound, "evicted " + evicted);
            try (HostBlockIndex idx = HostBlockIndex.open(IndexWorker.options(file, 1 << 16))) {
                assertEquals(bound, idx.bound(), "the bound the file was made with");
                long size = idx.size();
                assertTrue(size <= bound && size >= bound - bound / 8 - 3, "size " + size + " of " + bound);
            }
        }
    }

    @Test
    void evictionIsLeastRecentlyUsedAndDeadOwnersGoFirst() throws Exception {
        Path file = dir.resolve("lru.cmap");
        try (HostBlockIndex idx = HostBlockIndex.open(IndexWorker.options(file.toString(), 64))) {
            assertEquals(64, idx.bound());
            BlockOwner me = BlockOwner.self();
            for (int i = 0; i < 64; i++) {
                idx.publish(IndexWorker.key("l", i), IndexWorker.location("l", i, me));
                Thread.sleep(2);
            }
            for (int i = 0; i < 8; i++) { // the oldest eight, used again
                assertTrue(idx.lookup(IndexWorker.key("l", i)).isPresent());
            }
            Thread.sleep(2);
            idx.publish(IndexWorker.key("l", 64), IndexWorker.location("l", 64, me)); // evicts an eighth: 8..15
            assertEquals(64 - 8 + 1, idx.size());
            for (int i = 0; i < 8; i++) {
                assertTrue(idx.lookup(IndexWorker.key("l", i)).isPresent(), "used again: " + i);
            }
            for (int i = 8; i < 16; i++) {
                assertFalse(idx.lookup(IndexWorker.key("l", i)).isPresent(), "least recently used: " + i);
            }
            assertTrue(idx.lookup(IndexWorker.key("l", 64)).isPresent());
        }
        assertTrue(Files.exists(file), "the file stays for other processes");
    }
}
