package io.jcomm.cpu.testkit;

import io.jcomm.api.ProcessGroup;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import java.util.function.IntFunction;

/**
 * Ranks as threads of this JVM (for fast logic tests): one long-lived thread per rank, each owning
 * its {@link ProcessGroup}, created over one {@link InMemoryStore}. Every call is bounded: when a
 * rank does not finish in time, every group is closed (which unblocks the others) and the call fails.
 */
public final class ThreadRanks implements AutoCloseable {

    private final ExecutorService[] threads;
    private final ProcessGroup[] groups;
    private final InMemoryStore store;

    private ThreadRanks(int n, InMemoryStore store) {
        this.threads = new ExecutorService[n];
        this.groups = new ProcessGroup[n];
        this.store = store;
        for (int r = 0; r < n; r++) {
            int rr = r;
            threads[r] = Executors.newSingleThreadExecutor(t -> {
                Thread th = new Thread(t, "rank-" + rr);
                th.setDaemon(true);
                return th;
            });
        }
    }

    /**
     * Creates {@code n} groups, one per thread, with the options {@code options} returns for each
     * rank (the store is filled in).
     */
    public static ThreadRanks start(int n, IntFunction<CpuGroupOptions.Builder> options, Duration timeout) {
        InMemoryStore store = new InMemoryStore(timeout);
        ThreadRanks tr = new ThreadRanks(n, store);
        try {
            List<ProcessGroup> gs = tr.callRaw(r -> CpuGroups.create(options.apply(r).store(store).rank(r).size(n).build()),
                    timeout.plusSeconds(5));
            for (int r = 0; r < n; r++) {
                tr.groups[r] = gs.get(r);
            }
            return tr;
        } catch (RuntimeException | AssertionError e) {
            tr.close();
            throw e;
        }
    }

    public int size() {
        return groups.length;
    }

    public ProcessGroup group(int rank) {
        return groups[rank];
    }

    public InMemoryStore store() {
        return store;
    }

    /** Runs {@code body} on every rank concurrently; rethrows the failures (all ranks' messages). */
    public void run(CpuGroupCases.Body body, Duration timeout) {
        call(g -> {
            try {
                body.run(g);
            } catch (RuntimeException | Error e) {
                throw e;
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
            return null;
        }, timeout);
    }

    /** Runs {@code f} with each rank's group on its thread; returns the results in rank order. */
    public <T> List<T> call(Function<ProcessGroup, T> f, Duration timeout) {
        return callRaw(r -> f.apply(groups[r]), timeout);
    }

    /** Like {@link #call} but collects each rank's outcome (result or throwable) without throwing. */
    public List<Object> outcomes(Function<ProcessGroup, Object> f, Duration timeout) {
        List<Future<Object>> fs = new ArrayList<>();
        for (int r = 0; r < groups.length; r++) {
            int rr = r;
            fs.add(threads[r].submit(() -> {
                try {
                    return f.apply(groups[rr]);
                } catch (Throwable t) {
                    return t;
                }
            }));
        }
        List<Object> out = new ArrayList<>();
        long end = System.nanoTime() + timeout.toNanos();
        for (Future<Object> fu : fs) {
            try {
                out.add(fu.get(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS));
            } catch (TimeoutException e) {
                closeGroups();
                throw new AssertionError("a rank did not finish within " + timeout);
            } catch (InterruptedException | ExecutionException e) {
                throw new AssertionError(e);
            }
        }
        return out;
    }

    private <T> List<T> callRaw(IntFunction<T> f, Duration timeout) {
        List<Future<T>> fs = new ArrayList<>();
        for (int r = 0; r < threads.length; r++) {
            int rr = r;
            fs.add(threads[r].submit(() -> f.apply(rr)));
        }
        List<T> out = new ArrayList<>();
        StringBuilder failures = new StringBuilder();
        Throwable first = null;
        long end = System.nanoTime() + timeout.toNanos();
        for (int r = 0; r < fs.size(); r++) {
            try {
                out.add(fs.get(r).get(Math.max(0, end - System.nanoTime()), TimeUnit.NANOSECONDS));
            } catch (TimeoutException e) {
                closeGroups();
                throw new AssertionError("rank " + r + " did not finish within " + timeout + failures);
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
        if (first != null) {
            AssertionError err = new AssertionError("failed on some ranks:" + failures, first);
            throw err;
        }
        return out;
    }

    private void closeGroups() {
        for (ProcessGroup g : groups) {
            if (g != null) {
                g.close();
            }
        }
    }

    @Override
    public void close() {
        closeGroups();
        for (ExecutorService t : threads) {
            t.shutdownNow();
        }
        store.close();
    }
}
