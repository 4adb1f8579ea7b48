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
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class AllocationFreeTest {

    private static final Duration T = Duration.ofSeconds(20);
    private static final int WARMUP = 100_000;
    private static final int MEASURED = 50_000;
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

    @Test
    void enqueueAndDequeueOfBytesAllocateNothing() throws Exception {
        String tag = "alloc" + ProcessHandle.current().pid();
        AeronMedia.Options mo = AeronMedia.Options.builder().tag(tag).build();
        MessageQueueOptions opts = MessageQueueOptions.builder().udpAddress("127.0.0.1").build();
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try (AeronMedia hostA = AeronMedia.launch(mo); AeronMedia hostB = AeronMedia.launch(mo);
             QueueWriter w = QueueWriter.create(hostA, "alloc", 0, List.of(1), List.of(2), 0, opts)) {
            Future<Long> local = pool.submit(() -> readAndMeasure(hostA, w.handle(), 1, opts));
            Future<Long> remote = pool.submit(() -> readAndMeasure(hostB, w.handle(), 2, opts));
            w.awaitReaders(Deadline.after(T));
            UnsafeBuffer msg = new UnsafeBuffer(new byte[100]);
            Meter meter = new Meter();
            for (int i = 0; i < WARMUP + MEASURED; i++) {
                if (i == WARMUP) {
                    meter.start();
                }
                if (i == WARMUP / 2 || i == WARMUP - 1000) {
                    Thread.sleep(20); // readers go to sleep and are woken: first-use costs of that path in warm-up
                }
                msg.putInt(0, i);
                w.enqueue(msg, 0, 100, T);
            }
            long writerBytes = meter.stop();
            assertEquals(0, writerBytes, "writer allocated during " + MEASURED + " enqueues");
            assertEquals(0L, local.get(60, TimeUnit.SECONDS), "local reader allocated");
            assertEquals(0L, remote.get(60, TimeUnit.SECONDS), "remote (UDP + HMAC) reader allocated");
        } finally {
            pool.shutdownNow();
        }
    }

    private static long readAndMeasure(AeronMedia media, QueueHandle h, int rank, MessageQueueOptions opts) {
        try (QueueReader r = QueueReader.open(media, h, rank, 0, opts, Deadline.after(T))) {
            Meter meter = new Meter();
            for (int i = 0; i < WARMUP + MEASURED; i++) {
                if (i == WARMUP) {
                    meter.start();
                }
                DirectBuffer v = r.dequeue(T);
                if (v.getInt(0) != i || v.capacity() != 100) {
                    throw new AssertionError("message " + i + " wrong: " + v.getInt(0));
                }
            }
            long bytes = meter.stop();
            r.release();
            return bytes;
        }
    }
}
