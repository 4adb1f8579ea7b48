package io.jcomm.testkit;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.IntFunction;

/**
 * Ranks as threads of this JVM, for logic tests: one long-lived thread per rank ({@code rank-N}),
 * each owning one resource of type {@code R} (a process group, a parallel state, ...). Every call
 * is bounded. When a rank fails, the others get a short grace period, then every resource is
 * closed (which unblocks ranks waiting on a peer that will never come) and the call fails with
 * every rank's outcome and the stacks of the rank and SDK threads. A rank still running at the
 * deadline always fails the call, even {@link #outcomes}.
 *
 * @param <R> the per-rank resource; closed with {@link AutoCloseable#close()}
 */
public final class RankThreads<R extends AutoCloseable> implements AutoCloseable {

    /** How long the other ranks may still take once one rank failed. */
    private static final long GRACE_NANOS = TimeUnit.SECONDS.toNanos(5);

    private final ExecutorService[] threads;
    private final List<R> resources;

    public RankThreads(int n) {
        this.threads = new ExecutorService[n];
        this.resources = new ArrayList<>(n);
        for (int r = 0; r < n; r++) {
            int rr = r;
            resources.add(null);
            threads[r] = Executors.newSingleThreadExecutor(t -> {
                Thread th = new Thread(t, "rank-" + rr);
                th.setDaemon(true);
                return th;
            });
        }
    }

    public int size() {
        return threads.length;
    }

    /** The resource of {@code rank} ({@code null} before {@link #open}). */
    public R get(int rank) {
        return resources.get(rank);
    }

    /**
     * Makes every rank's resource on its thread ({@code factory} is called with the rank);
     * closes what was made and rethrows when any rank fails.
     */
    public void open(IntFunction<R> factory, Duration timeout) {
        List<R> made = call(factory, timeout);
        for (int r = 0; r < made.size(); r++) {
            resources.set(r, made.get(r));
        }
    }

    /**
     * Runs {@code f} for every rank on that rank's thread; results in rank order. Failures are
     * rethrown as one {@link AssertionError} naming every failed rank (the first cause attached).
     */
    public <T> List<T> call(IntFunction<T> f, Duration timeout) {
        List<Future<T>> fs = new ArrayList<>();
        for (int r = 0; r < threads.length; r++) {
            int rr = r;
            fs.add(threads[r].submit(() -> f.apply(rr)));
        }
        long end = System.nanoTime() + timeout.toNanos();
        long failedAt = 0;
        String stacks = null;
        List<Integer> late = new ArrayList<>();
        while (fs.stream().anyMatch(x -> !x.isDone())) {
            long now = System.nanoTime();
            if (failedAt == 0 && fs.stream().anyMatch(x -> x.isDone() && failed(x))) {
                failedAt = now;
            }
            if (now - end > 0 || (failedAt != 0 && now - failedAt > GRACE_NANOS)) {
                if (now - end > 0) {
                    for (int r = 0; r < fs.size(); r++) {
                        if (!fs.get(r).isDone()) {
                            late.add(r);
                        }
                    }
                }
                stacks = stacks();
                closeResources();
                break;
            }
            try {
                Thread.sleep(2);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
        List<T> out = new ArrayList<>();
        StringBuilder failures = new StringBuilder();
        Throwable first = null;
        for (int r = 0; r < fs.size(); r++) {
            try {
                out.add(fs.get(r).get(10, TimeUnit.SECONDS));
            } catch (TimeoutException e) {
                out.add(null);
                failures.append("\n  rank ").append(r).append(": did not finish within ").append(timeout);
            } catch (ExecutionException e) {
                out.add(null);
                if (first == null) {
                    first = e.getCause();
                }
                failures.append("\n  rank ").append(r).append(": ").append(e.getCause());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError(e);
            }
        }
        if (!late.isEmpty()) {
            // even when closing unblocked them: a rank that hangs is a failure of the test
            throw new AssertionError("rank(s) " + late + " did not finish within " + timeout + failures
                    + "\n" + stacks, first);
        }
        if (failures.length() > 0) {
            throw new AssertionError("failed on some ranks:" + failures + (stacks != null ? "\n" + stacks : ""), first);
        }
        return out;
    }

    /** Like {@link #call} but returns each rank's outcome (its result or its throwable) without throwing. */
    public List<Object> outcomes(IntFunction<Object> f, Duration timeout) {
        return call(r -> {
            try {
                return f.apply(r);
            } catch (Throwable t) {
                return t;
            }
        }, timeout);
    }

    private static boolean failed(Future<?> f) {
        try {
            f.get(0, TimeUnit.NANOSECONDS);
            return false;
        } catch (ExecutionException e) {
            return true;
        } catch (InterruptedException | TimeoutException e) {
            return false;
        }
    }

    /** Stack traces of the rank threads and the SDK's own ({@code jcomm-}) threads, for timeout messages. */
    public static String stacks() {
        return RuntimeHooks.threadStacks("rank-", "jcomm-");
    }

    /** Closes every rank's resource from the calling thread (best effort; unblocks waiting ranks). */
    public void closeResources() {
        for (R res : resources) {
            if (res != null) {
                try {
                    res.close();
                } catch (Exception ignored) {
                    // best effort: the rank may already be failing on its own
                }
            }
        }
    }

    /**
     * Closes every resource on its own rank's thread (concurrently, as collective closes need),
     * bounded; what does not close in time is closed from here. Then stops the threads.
     */
    @Override
    public void close() {
        List<Future<?>> fs = new ArrayList<>();
        for (int r = 0; r < threads.length; r++) {
            R res = resources.get(r);
            if (res != null) {
                fs.add(threads[r].submit(() -> {
                    res.close();
                    return null;
                }));
            }
        }
        for (Future<?> f : fs) {
            try {
                f.get(30, TimeUnit.SECONDS);
            } catch (InterruptedException | ExecutionException | TimeoutException e) {
                closeResources();
            }
        }
        for (ExecutorService t : threads) {
            t.shutdownNow();
        }
    }
}
