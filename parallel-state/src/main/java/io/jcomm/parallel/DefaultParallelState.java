package io.jcomm.parallel;

import io.jcomm.api.DistributedConfig;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A thin static facade over one default {@link ParallelState} per JVM, for code written in vLLM's
 * style ({@code get_tp_group()}, ...). It only forwards: every piece of state lives in the
 * {@link ParallelState} instance, and code that needs more than one (tests with ranks as threads)
 * uses instances directly.
 */
public final class DefaultParallelState {

    private static final AtomicReference<ParallelState> DEFAULT = new AtomicReference<>();

    private DefaultParallelState() {
    }

    /**
     * Initialises the default instance (vLLM's {@code init_distributed_environment}); idempotent
     * when it exists already for the same rank and world size.
     *
     * @throws IllegalStateException if it exists with another rank or world size
     */
    public static synchronized ParallelState initDistributedEnvironment(DistributedConfig config,
                                                                         ParallelStateOptions options) {
        ParallelState ps = DEFAULT.get();
        if (ps != null) {
            if (ps.rank() != config.rank() || ps.worldSize() != config.worldSize()) {
                throw new IllegalStateException("the distributed environment exists as rank " + ps.rank() + " of "
                        + ps.worldSize() + ", not rank " + config.rank() + " of " + config.worldSize());
            }
            return ps;
        }
        ps = ParallelState.initialize(config, options);
        DEFAULT.set(ps);
        return ps;
    }

    public static ParallelState initDistributedEnvironment(DistributedConfig config) {
        return initDistributedEnvironment(config, ParallelStateOptions.defaults());
    }

    /** The default instance. */
    public static ParallelState get() {
        ParallelState ps = DEFAULT.get();
        if (ps == null) {
            throw new IllegalStateException("the distributed environment is not initialized (initDistributedEnvironment)");
        }
        return ps;
    }

    public static boolean isInitialized() {
        return DEFAULT.get() != null;
    }

    public static void initializeModelParallel(int tp, int pp, int dp) {
        get().initializeModelParallel(tp, pp, dp);
    }

    public static void ensureModelParallelInitialized(int tp, int pp) {
        get().ensureModelParallelInitialized(tp, pp);
    }

    public static GroupCoordinator tp() {
        return get().tp();
    }

    public static GroupCoordinator pp() {
        return get().pp();
    }

    public static GroupCoordinator dp() {
        return get().dp();
    }

    public static GroupCoordinator ep() {
        return get().ep();
    }

    public static GroupCoordinator world() {
        return get().world();
    }

    public static void destroyModelParallel() {
        ParallelState ps = DEFAULT.get();
        if (ps != null) {
            ps.destroyModelParallel();
        }
    }

    /** Closes and forgets the default instance (vLLM's {@code destroy_distributed_environment}). */
    public static synchronized void destroyDistributedEnvironment() {
        ParallelState ps = DEFAULT.getAndSet(null);
        if (ps != null) {
            ps.close();
        }
    }
}
