package io.jcomm.cpu.testkit;

import io.jcomm.api.ProcessGroup;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import io.jcomm.testkit.RankThreads;
import java.time.Duration;
import java.util.List;
import java.util.function.Function;
import java.util.function.IntFunction;

/**
 * Ranks as threads of this JVM (for fast logic tests): one long-lived thread per rank, each owning
 * its {@link ProcessGroup}, created over one {@link InMemoryStore}. Every call is bounded
 * ({@link RankThreads}): when a rank fails or does not finish in time, every group is closed
 * (which unblocks the others) and the call fails.
 */
public final class ThreadRanks implements AutoCloseable {

    private final RankThreads<ProcessGroup> ranks;
    private final InMemoryStore store;

    private ThreadRanks(int n, InMemoryStore store) {
        this.ranks = new RankThreads<>(n);
        this.store = store;
    }

    /**
     * Creates {@code n} groups, one per thread, with the options {@code options} returns for each
     * rank (the store is filled in).
     */
    public static ThreadRanks start(int n, IntFunction<CpuGroupOptions.Builder> options, Duration timeout) {
        InMemoryStore store = new InMemoryStore(timeout);
        ThreadRanks tr = new ThreadRanks(n, store);
        try {
            tr.ranks.open(r -> CpuGroups.create(options.apply(r).store(store).rank(r).size(n).build()),
                    timeout.plusSeconds(5));
            return tr;
        } catch (RuntimeException | AssertionError e) {
            tr.close();
            throw e;
        }
    }

    public int size() {
        return ranks.size();
    }

    public ProcessGroup group(int rank) {
        return ranks.get(rank);
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
        return ranks.call(r -> f.apply(ranks.get(r)), timeout);
    }

    /** Like {@link #call} but collects each rank's outcome (result or throwable) without throwing. */
    public List<Object> outcomes(Function<ProcessGroup, Object> f, Duration timeout) {
        return ranks.outcomes(r -> f.apply(ranks.get(r)), timeout);
    }

    @Override
    public void close() {
        ranks.close();
        store.close();
    }
}
