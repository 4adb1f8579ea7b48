package io.jcomm.mq;

import static org.junit.jupiter.api.Assertions.assertEquals;

import io.jcomm.api.Deadline;
import java.lang.management.ManagementFactory;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The byte-payload hot path allocates nothing in steady state, measured with the per-thread
 * allocation counter after a warm-up long enough for the JIT to settle (during warm-up,
 * deoptimisations re-materialise scalar-replaced objects, which the counter sees) and in which
 * the readers have slept and been woken (the JDK's socket and selector code allocates on first use
 * only). Under load a reader may sleep in the measured window too: that path is allocation free.
 *
 * <p>The measured part is split into {@value #WINDOWS} windows of {@value #WINDOW} messages each.
 * A late JIT event (a recompilation or deoptimisation on a loaded 2-core machine) can allocate a
 * few hundred bytes once; a per-message allocation, however small, makes every window allocate.
 * So the assertion is that most windows (the median) allocate exactly nothing.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class AllocationFreeTest {

    private static final Duration T = Duration.ofSeconds(20);
    private static final int WARMUP = 100_000;
    private static final int WINDOW = 10_000;
    private static final int WINDOWS = 5;
    private static final int MEASURED = WINDOW * WINDOWS;
    private static final com.sun.management.ThreadMXBean THREADS =
            (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();

    /** Bytes this thread allocated between two calls, minus what the call itself allocates. */
    private static final class Meter {
        private final long calibration;
        private long start;

        Meter() {
            long a = THREADS.getCurrentThreadAllocatedBytes();
            long b = THREADS.getCurrentThreadAllocatedBytes();
            long c = THREADS.getCurrentThreadAllocatedBytes();
            calibration = Math.min(b - a, c - b);
        }

        void start() {
            start = THREADS.getCurrentThreadAllocatedBytes();
        }

        long stop() {
            return THREADS.getCurrentThreadAllocatedBytes() - start - calibration;
        }
    }

    /** Bytes allocated per measured window; {@code i} is the message index just about to be handled. */
    private static final class Windows {
        private final Meter meter = new Meter();
        private final long[] bytes = new long[WINDOWS];

        void at(int i) {
            if (i >= WARMUP && (i - WARMUP) % WINDOW == 0) {
                int w = (i - WARMUP) / WINDOW;
                if (w > 0) {
                    bytes[w - 1] = meter.stop();
                }
                meter.start();
            }
        }

        long[] finish() {
            bytes[WINDOWS - 1] = meter.stop();
            return bytes;
        }
    }

    private static void assertMostlyZero(long[] windows, String who) {
        long[] sorted = windows.clone();
        java.util.Arrays.sort(sorted);
        assertEquals(0L, sorted[WINDOWS / 2], who + " allocated in most windows of " + WINDOW
                + " messages (bytes per window: " + java.util.Arrays.toString(windows) + ")");
    }

    @Test
    void enqueueAndDequeueOfBytesAllocateNothing() throws Exception {
        String tag = "alloc" + ProcessHandle.current().pid();
        AeronMedia.Options mo = AeronMedia.Options.builder().tag(tag).build();
        MessageQueueOptions opts = MessageQueueOptions.builder().udpAddress("127.0.0.1").build();
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try (AeronMedia hostA = AeronMedia.launch(mo); AeronMedia hostB = AeronMedia.launch(mo);
             QueueWriter w = QueueWriter.create(hostA, "alloc", 0, List.of(1), List.of(2), 0, opts)) {
            Future<long[]> local = pool.submit(() -> readAndMeasure(hostA, w.handle(), 1, opts));
            Future<long[]> remote = pool.submit(() -> readAndMeasure(hostB, w.handle(), 2, opts));
            w.awaitReaders(Deadline.after(T));
            UnsafeBuffer msg = new UnsafeBuffer(new byte[100]);
            Windows windows = new Windows();
            for (int i = 0; i < WARMUP + MEASURED; i++) {
                windows.at(i);
                if (i == WARMUP / 2 || i == WARMUP - 1000) {
                    Thread.sleep(20); // readers go to sleep and are woken: first-use costs of that path in warm-up
                }
                msg.putInt(0, i);
                w.enqueue(msg, 0, 100, T);
            }
            assertMostlyZero(windows.finish(), "writer");
            assertMostlyZero(local.get(60, TimeUnit.SECONDS), "local reader");
            assertMostlyZero(remote.get(60, TimeUnit.SECONDS), "remote (UDP + HMAC) reader");
        } finally {
            pool.shutdownNow();
        }
    }

    private static long[] readAndMeasure(AeronMedia media, QueueHandle h, int rank, MessageQueueOptions opts) {
        try (QueueReader r = QueueReader.open(media, h, rank, 0, opts, Deadline.after(T))) {
            Windows windows = new Windows();
            for (int i = 0; i < WARMUP + MEASURED; i++) {
                windows.at(i);
                DirectBuffer v = r.dequeue(T);
                if (v.getInt(0) != i || v.capacity() != 100) {
                    throw new AssertionError("message " + i + " wrong: " + v.getInt(0));
                }
            }
            long[] bytes = windows.finish();
            r.release();
            return bytes;
        }
    }
}
