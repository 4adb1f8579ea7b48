package io.jcomm.it.parallel;

import io.jcomm.api.CommException;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.Tensor;
import io.jcomm.parallel.GroupCoordinator;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelState;
import java.util.Map;

/**
 * One rank of {@link ParallelStateKillIT}: makes TP2 x PP2, prints {@code READY}, then runs a mix of
 * world, TP and PP operations in a loop until one fails. Prints
 * {@code FAILED <exception class> <is CommException> <nanoTime of the failure> <op>} and exits 0:
 * a typed failure is what the test expects of a survivor.
 */
public final class KillWorker {

    private KillWorker() {
    }

    public static void main(String[] args) {
        DistributedConfig config = DistributedConfig.fromEnvironment();
        ParallelState ps = ParallelState.initialize(config, ParallelWorker.options(), ParallelSizes.of(2, 2));
        String op = "start";
        try {
            ps.world().barrier();
            System.out.println("READY " + config.rank());
            System.out.flush();
            GroupCoordinator tp = ps.tp();
            GroupCoordinator pp = ps.pp();
            for (long i = 0; ; i++) {
                op = "world.barrier";
                ps.world().barrier();
                op = "world.allReduce";
                ps.world().allReduce(Tensor.ofLongs(i));
                op = "tp.broadcastObject";
                tp.broadcastObject(tp.rankInGroup() == 0 ? "step " + i : null, 0, String.class);
                op = "tp.allReduce";
                tp.allReduce(Tensor.ofFloats(1, 2, 3));
                op = "pp.tensorDict";
                if (pp.isFirstRank()) {
                    pp.sendTensorDict(Map.of("h", Tensor.ofFloats(i, i)), 1, tp);
                } else {
                    pp.recvTensorDict(0, tp);
                }
                op = "pp.barrier";
                pp.barrier();
            }
        } catch (RuntimeException e) {
            long at = System.nanoTime();
            System.out.println("FAILED " + e.getClass().getName() + " " + (e instanceof CommException) + " " + at + " " + op
                    + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
            System.out.flush();
        } finally {
            ps.close();
        }
    }
}
