package io.jcomm.cpu.gloo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.Deadline;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CyclicBarrier;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(60)
class GlooSmokeTest {

    @Test
    void allReduceSumOnThreeThreadRanks() {
        ThreadRanks.run(3, (b, rank) -> {
            Tensor t = Tensor.ofFloats(rank, 10 + rank, -rank);
            b.allReduce(t, ReduceOp.SUM, Deadline.after(Duration.ofSeconds(10)));
            assertArrayEquals(new double[] {3, 33, -3}, t.toDoubleArray());
        });
    }

    /** gloo's event-loop threads run at nice 19 by default ({@code gloo.loopNice}), unchanged with 0. */
    @Test
    void loopThreadsAreDeprioritised() throws Exception {
        long before = threadsAtNice19();
        CyclicBarrier inside = new CyclicBarrier(2);
        long[] seen = new long[2];
        ThreadRanks.run(2, Map.of(), Duration.ofSeconds(30), (b, rank) -> {
            await(inside);
            seen[rank] = threadsAtNice19();
            await(inside); // both groups alive while counting
        });
        assertTrue(seen[0] >= before + 2, "one nice-19 loop thread per rank expected: " + before + " -> " + seen[0]);
        ThreadRanks.run(2, Map.of(GlooBackend.LOOP_NICE_OPTION, "0"), Duration.ofSeconds(30), (b, rank) -> {
            await(inside);
            seen[rank] = threadsAtNice19();
            await(inside);
        });
        assertEquals(before, seen[0], "gloo.loopNice=0 leaves the loop threads alone");
    }

    private static void await(CyclicBarrier barrier) {
        try {
            barrier.await();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** Threads of this process whose nice value (field 19 of /proc/self/task/TID/stat) is 19. */
    private static long threadsAtNice19() {
        try (Stream<Path> tasks = Files.list(Path.of("/proc/self/task"))) {
            return tasks.filter(t -> {
                try {
                    String stat = Files.readString(t.resolve("stat"));
                    String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
                    return f[16].equals("19");
                } catch (IOException e) {
                    return false; // the thread ended meanwhile
                }
            }).count();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
