package io.jcomm.parallel.testkit;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelState;
import io.jcomm.parallel.ParallelStateOptions;
import io.jcomm.testkit.RankThreads;
import java.time.Duration;
import java.util.List;
import java.util.function.Function;
import java.util.function.IntFunction;

/**
 * A job whose ranks are threads of this JVM, each with its own {@link ParallelState} over one
 * {@link InMemoryStore}: for logic tests. Every call is bounded ({@link RankThreads}); on a failure
 * or timeout every state is closed (which unblocks the others) and the call fails.
 */
public final class ThreadJob implements AutoCloseable {

    private final RankThreads<ParallelState> ranks;
    private final InMemoryStore store;

    private ThreadJob(int n, InMemoryStore store) {
        this.ranks = new RankThreads<>(n);
        this.store = store;
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
            job.ranks.open(r -> sizes == null
                    ? ParallelState.initialize(configs.apply(r), store, options.apply(r))
                    : ParallelState.initialize(configs.apply(r), store, options.apply(r), sizes), timeout.plusSeconds(10));
            return job;
        } catch (RuntimeException | AssertionError e) {
            job.close();
            throw e;
        }
    }

    public int size() {
        return ranks.size();
    }

    public ParallelState state(int rank) {
        return ranks.get(rank);
    }

    public InMemoryStore store() {
        return store;
    }

    /** Runs {@code f} with each rank's state on its thread; results in rank order; failures rethrown. */
    public <T> List<T> call(Function<ParallelState, T> f, Duration timeout) {
        return ranks.call(r -> f.apply(ranks.get(r)), timeout);
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
        return ranks.outcomes(r -> f.apply(ranks.get(r)), timeout);
    }

    /** Closes every rank's state (concurrently, bounded) and the store. */
    @Override
    public void close() {
        ranks.close();
        store.close();
    }

    /** Work of one rank. */
    @FunctionalInterface
    public interface Body {
        void run(ParallelState ps) throws Exception;
    }
}
