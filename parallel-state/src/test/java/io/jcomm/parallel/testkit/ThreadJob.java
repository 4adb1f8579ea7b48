package io.jcomm.parallel.testkit;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelState;
import io.jcomm.parallel.ParallelStateOptions;
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
 * A job whose ranks are threads of this JVM, each with its own {@link ParallelState} over one
 * {@link InMemoryStore}: for logic tests. Every call is bounded; on a timeout every state is
 * closed (which unblocks the others) and the call fails.
 */
public final class ThreadJob implements AutoCloseable {

    private final ExecutorService[] threads;
    private final ParallelState[] states;
    private final InMemoryStore store;

    private ThreadJob(int n, InMemoryStore store) {
        this.threads = new ExecutorService[n];
        this.states = new ParallelState[n];
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

    /** Configuration of rank {@code r} of an {@code n}-rank job on host {@code host}. */
    public static DistributedConfig config(int r, int n, String host, Duration timeout) {
        return DistributedConfig.builder().rank(r).worldSize(n).hostId(host).timeout(timeout).build();
    }

    /** Starts {@code n} ranks on one host with {@code options}. */
    public static ThreadJob start(int n, ParallelStateOptions options, Duration timeout) {
        return start(n, r -> config(r, n, "host-a", timeout), r -> options, timeout);
    }

    /** Starts {@code n} ranks with a config and options per rank. */
    public static ThreadJob start(int n, IntFunction<DistributedConfig> configs, IntFunction<ParallelStateOptions> options,
                                  Duration timeout) {
        return start(n, configs, options, null, timeout);
    }

    /**
     * Starts {@code n} ranks; with {@code sizes}, in one step
     * ({@link ParallelState#initialize(DistributedConfig, io.jcomm.api.store.Store, ParallelStateOptions, ParallelSizes)}).
     */
    public static ThreadJob start(int n, IntFunction<DistributedConfig> configs, IntFunction<ParallelStateOptions> options,
                                  ParallelSizes sizes, Duration timeout) {
        InMemoryStore store = new InMemoryStore(timeout);
        ThreadJob job = new ThreadJob(n, store);
        try {
            List<ParallelState> ps = job.callRaw(r -> sizes == null
                    ? ParallelState.initialize(configs.apply(r), store, options.apply(r))
                    : ParallelState.initialize(configs.apply(r), store, options.apply(r), sizes), timeout.plusSeconds(10));
            for (int r = 0; r < n; r++) {
                job.states[r] = ps.get(r);
            }
            return job;
        } catch (RuntimeException | AssertionError e) {
            job.close();
            throw e;
        }
    }

    public int size() {
        return states.length;
    }

    public ParallelState state(int rank) {
        return states[rank];
    }

    public InMemoryStore store() {
        return store;
    }

    /** Runs {@code f} with each rank's state on its thread; results in rank order; failures rethrown. */
    public <T> List<T> call(Function<ParallelState, T> f, Duration timeout) {
        return callRaw(r -> f.apply(states[r]), timeout);
    }

    /** Runs {@code body} on every rank. */
    public void run(Body body, Duration timeout) {
        call(ps -> {
            try {
                body.run(ps);
            } catch (RuntimeException | Error e) {
                throw e;
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
            return null;
        }, timeout);
    }

    /** Each rank's outcome (its result or the throwable), without throwing. */
    public List<Object> outcomes(Function<ParallelState, Object> f, Duration timeout) {
        List<Future<Object>> fs = new ArrayList<>();
        for (int r = 0; r < states.length; r++) {
            int rr = r;
            fs.add(threads[r].submit(() -> {
                try {
                    return f.apply(states[rr]);
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
                closeStates();
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
        long end = System.nanoTime() + timeout.toNanos();
        long failedAt = 0;
        String stacks = null;
        // wait for all; once one rank failed, give the others a short grace, then unblock them
        while (fs.stream().anyMatch(x -> !x.isDone())) {
            long now = System.nanoTime();
            boolean anyFailed = fs.stream().anyMatch(x -> x.isDone() && failed(x));
            if (anyFailed && failedAt == 0) {
                failedAt = now;
            }
            if (now - end > 0 || (failedAt != 0 && now - failedAt > TimeUnit.SECONDS.toNanos(5))) {
                stacks = stacks();
                closeStates();
                break;
            }
            try {
                Thread.sleep(5);
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
        if (failures.length() > 0) {
            throw new AssertionError("failed on some ranks:" + failures + (stacks != null ? "\n" + stacks : ""), first);
        }
        return out;
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

    /** Stack traces of the rank threads and the SDK's own threads, for timeout messages. */
    public static String stacks() {
        StringBuilder sb = new StringBuilder();
        Thread.getAllStackTraces().forEach((t, st) -> {
            if (t.getName().startsWith("rank-") || t.getName().startsWith("jcomm-")) {
                sb.append("--- ").append(t.getName()).append(" (").append(t.getState()).append(")\n");
                for (int i = 0; i < Math.min(st.length, 25); i++) {
                    sb.append("    at ").append(st[i]).append('\n');
                }
            }
        });
        return sb.toString();
    }

    private void closeStates() {
        for (ParallelState s : states) {
            if (s != null) {
                try {
                    s.close();
                } catch (RuntimeException ignored) {
                    // best effort
                }
            }
        }
    }

    /** Closes every rank's state (concurrently, bounded) and the store. */
    @Override
    public void close() {
        List<Future<?>> fs = new ArrayList<>();
        for (int r = 0; r < states.length; r++) {
            ParallelState s = states[r];
            if (s != null) {
                fs.add(threads[r].submit(s::close));
            }
        }
        for (Future<?> f : fs) {
            try {
                f.get(30, TimeUnit.SECONDS);
            } catch (InterruptedException | ExecutionException | TimeoutException e) {
                closeStates();
            }
        }
        for (ExecutorService t : threads) {
            t.shutdownNow();
        }
        store.close();
    }

    /** Work of one rank. */
    @FunctionalInterface
    public interface Body {
        void run(ParallelState ps) throws Exception;
    }
}
