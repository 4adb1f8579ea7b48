package io.jcomm.examples;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.Tensor;
import io.jcomm.parallel.GroupCoordinator;
import io.jcomm.parallel.ParallelState;
import java.util.Arrays;
import java.util.Map;

/**
 * The README's example: 4 ranks as TP=2 x PP=2. Each TP group broadcasts request metadata from its
 * first rank, every rank all-reduces its shard over its TP group, and stage 0 hands the result to
 * stage 1 as a tensor dict. Run: {@code bin/commrun --nproc-per-node 4
 * examples/src/io/jcomm/examples/ParallelStateExample.java}
 */
public final class ParallelStateExample {

    public static void main(String[] args) {
        try (ParallelState ps = ParallelState.initialize(DistributedConfig.fromEnvironment())) {
            ps.initializeModelParallel(2, 2);                      // TP=2 x PP=2, vLLM's rank layout
            GroupCoordinator tp = ps.tp();
            GroupCoordinator pp = ps.pp();
            Map<String, Object> meta = tp.broadcastTensorDict(     // metadata via the shared-memory queue
                    tp.rankInGroup() == 0 ? Map.of("request", "r-7", "positions", Tensor.ofInts(5, 6, 7)) : null, 0);
            Tensor hidden = tp.allReduce(Tensor.ofFloats(tp.rankInGroup() + 1, 10));  // [3.0, 20.0]
            if (pp.isFirstRank()) {
                pp.sendTensorDict(Map.of("hidden", hidden, "request", meta.get("request")));
            } else {
                Map<String, Object> in = pp.recvTensorDict();      // from the previous stage
                Tensor h = (Tensor) in.get("hidden");
                System.out.println("stage 1 rank " + ps.rank() + " got " + in.get("request") + " "
                        + Arrays.toString(h.toDoubleArray()));
            }
        }
    }

    private ParallelStateExample() {
    }
}
