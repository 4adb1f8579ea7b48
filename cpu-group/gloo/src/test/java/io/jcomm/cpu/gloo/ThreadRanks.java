package io.jcomm.cpu.gloo;


import io.jcomm.api.Availability;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.api.store.PrefixStore;
import io.jcomm.api.store.Store;
import io.jcomm.cpu.spi.CpuBackendContext;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Ranks as threads of this JVM, each with its own gloo communicator, meeting through one
 * {@link InMemoryStore} (a fresh key prefix per job). For unit tests of the backend's logic; the
 * multi-process behaviour is tested with separate JVMs.
 */
final class ThreadRanks {

    interface Body {
        void run(GlooBackend backend, int rank) throws Exception;
    }

    private static final AtomicInteger JOBS = new AtomicInteger();

    private ThreadRanks() {
    }

    /**
     * Skips the calling test with the availability reason when gloo cannot load here (fails it where the
     * run requires gloo: {@link io.jcomm.testkit.Requirements}).
     */
    static void assumeGloo() {
        Availability a = GlooBackend.availability();
        io.jcomm.testkit.Requirements.assume("gloo", a.available(), a.toString());
    }

    static CpuBackendContext context(Store store, int rank, int size, Duration timeout, Map<String, String> options) {
        List<Integer> ranks = new ArrayList<>();
        for (int i = 0; i < size; i++) {
            ranks.add(i);
        }
        return new CpuBackendContext(store, "test", rank, size, ranks, "127.0.0.1", timeout, options);
    }

    static void run(int size, Body body) {
        run(size, Map.of(), Duration.ofSeconds(30), body);
    }

    /**
     * Connects {@code size} backends on threads and runs {@code body} on each; fails with the first
     * rank's failure, or when the job takes longer than {@code limit}.
     */
    static void run(int size, Map<String, String> options, Duration limit, Body body) {
        assumeGloo();
        Store store = new InMemoryStore(Duration.ofSeconds(20));
        String prefix = "job" + JOBS.incrementAndGet();
        ExecutorService pool = Executors.newFixedThreadPool(size);
        try {
            List<Future<?>> fs = new ArrayList<>();
            for (int r = 0; r < size; r++) {
                final int rank = r;
                fs.add(pool.submit(() -> {
                    Thread.currentThread().setName("gloo-rank-" + rank);
                    try (GlooBackend b = GlooBackend.connect(context(new PrefixStore(prefix, store), rank, size,
                            Duration.ofSeconds(20), options))) {
                        body.run(b, rank);
                    }
                    return null;
                }));
            }
            long end = System.nanoTime() + limit.toNanos();
            for (int r = 0; r < size; r++) {
                try {
                    fs.get(r).get(Math.max(1, end - System.nanoTime()), TimeUnit.NANOSECONDS);
                } catch (ExecutionException e) {
                    Throwable c = e.getCause();
                    if (c instanceof Error) {
                        throw (Error) c;
                    }
                    throw new AssertionError("rank " + r + " failed: " + c, c);
                } catch (TimeoutException e) {
                    throw new AssertionError("rank " + r + " did not finish within " + limit);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AssertionError("interrupted", e);
                }
            }
        } finally {
            pool.shutdownNow();
            store.close();
        }
    }
}
