package io.jcomm.cpu.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DType;
import io.jcomm.api.Tensor;
import io.jcomm.api.work.Work;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.testkit.CpuGroupCases;
import io.jcomm.cpu.testkit.ThreadRanks;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The asynchronous worker's queue is bounded: a caller beyond the bound waits, within its deadline. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class AsyncBoundTest {

    @Test
    void aCallBeyondTheBoundWaitsForRoomThenTimesOutTyped() {
        try (ThreadRanks t = ThreadRanks.start(2, r -> CpuGroupOptions.builder().backend("tcp").groupName("bound")
                .timeout(Duration.ofSeconds(20)).codec(CpuGroupCases.codec()), Duration.ofSeconds(30))) {
            t.run(g -> {
                if (g.rank() != 0) {
                    return;
                }
                Tensor x = Tensor.allocate(DType.F32, 4);
                // the first receive waits for a message rank 1 never sends: every later one queues behind it
                List<Work<Void>> works = new ArrayList<>();
                for (int i = 0; i < DefaultProcessGroup.MAX_ASYNC_IN_FLIGHT; i++) {
                    works.add(g.recvAsync(x, 1, 7, Duration.ofSeconds(3)));
                }
                long start = System.nanoTime();
                Work<Void> extra = g.recvAsync(x, 1, 7, Duration.ofMillis(300));
                long waitedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
                assertTrue(extra.isDone(), "failed at its deadline, not queued");
                Throwable f = extra.failure().orElseThrow();
                assertInstanceOf(CommTimeoutException.class, f, f.toString());
                assertTrue(f.getMessage().contains("in flight"), f.getMessage());
                assertTrue(waitedMs >= 250 && waitedMs < 3000, "waited " + waitedMs + " ms");
                // the queued ones end at their own deadlines (the first times out, the group is poisoned)
                int failed = 0;
                for (Work<Void> w : works) {
                    try {
                        w.await(Duration.ofSeconds(20));
                    } catch (RuntimeException e) {
                        failed++;
                    }
                }
                assertEquals(works.size(), failed);
            }, Duration.ofSeconds(50));
        }
    }
}
