package com.example.consumer;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.Tensor;
import io.jcomm.parallel.GroupCoordinator;
import io.jcomm.parallel.ParallelState;
import java.util.Arrays;
import java.util.Map;

/**
 * A CPU-only TP=2 x PP=2 job written against jcomm's public API only. Start 4 JVMs with torchrun's
 * environment (RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), e.g. with
 * the jcomm checkout's {@code bin/commrun}. Every rank checks what it received and exits 1 on a wrong
 * value.
 */
public final class TpPpJob {

    public static void main(String[] args) {
        try (ParallelState ps = ParallelState.initialize(DistributedConfig.fromEnvironment())) {
            ps.initializeModelParallel(2, 2);
            GroupCoordinator tp = ps.tp();
            GroupCoordinator pp = ps.pp();
            // each TP pair sums [r+1, 10]: [1+2, 20] on every rank
            double[] sum = tp.allReduce(Tensor.ofFloats(tp.rankInGroup() + 1, 10)).toDoubleArray();
            check(Arrays.equals(sum, new double[] {3, 20}), ps.rank(), "allReduce " + Arrays.toString(sum));
            if (pp.isFirstRank()) {
                pp.sendTensorDict(Map.of("hidden", Tensor.ofFloats((float) sum[0], ps.rank()), "step", 7L));
            } else {
                Map<String, Object> in = pp.recvTensorDict();
                double[] h = ((Tensor) in.get("hidden")).toDoubleArray();
                check(h[0] == 3 && h[1] == ps.rank() - 2 && Long.valueOf(7).equals(in.get("step")), ps.rank(),
                        "recvTensorDict " + Arrays.toString(h) + " " + in.get("step"));
            }
            System.out.println("consumer: rank " + ps.rank() + " ok (tp " + tp.rankInGroup() + ", pp "
                    + pp.rankInGroup() + ")");
        }
    }

    private static void check(boolean ok, int rank, String what) {
        if (!ok) {
            System.out.println("consumer: rank " + rank + " WRONG " + what);
            System.exit(1);
        }
    }

    private TpPpJob() {
    }
}
