package io.jcomm.examples.llama;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelState;
import io.jcomm.parallel.ParallelStateOptions;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;

/**
 * The whole model in this thread: a job of one rank (TP = PP = DP = 1) over an in-memory store, so
 * that it runs the very code of a sharded rank, each collective a no-op. What the demo checks a
 * sharded run against, and the unit tests' TP 1 case.
 */
public final class SingleProcess {

    private SingleProcess() {
    }

    /** Runs {@code requests} on the model in {@code directory}, unsharded. */
    public static Engine.Result run(Path directory, List<Request> requests, int logitsSteps, Duration timeout) {
        DistributedConfig config = DistributedConfig.builder().rank(0).worldSize(1).timeout(timeout)
                .jobId("llama-single-" + ProcessHandle.current().pid()).build();
        ParallelStateOptions options = ParallelStateOptions.defaults().toBuilder().tpMessageQueue(false).build();
        try (InMemoryStore store = new InMemoryStore(timeout);
             ParallelState ps = ParallelState.initialize(config, store, options, ParallelSizes.of(1, 1, 1))) {
            LlamaModel model = LlamaModel.load(directory, ps, new CommClock());
            return new Engine(ps, model, logitsSteps).run(requests, capacity(requests));
        }
    }

    /** KV cache positions for the longest request. */
    static int capacity(List<Request> requests) {
        int n = 1;
        for (Request r : requests) {
            n = Math.max(n, r.positions());
        }
        return n;
    }
}
