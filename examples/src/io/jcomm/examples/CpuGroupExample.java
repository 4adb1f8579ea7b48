package io.jcomm.examples;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import io.jcomm.cpu.codec.ForyCodec;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import java.util.Arrays;
import java.util.List;

/**
 * The CPU group (the control plane): tensor all-reduce, a typed object broadcast through the
 * registered codec (no Java serialization), all-gather of objects, barrier.
 * Run: {@code bin/commrun --nproc-per-node 2 examples/src/io/jcomm/examples/CpuGroupExample.java}
 * ({@code JCOMM_CPU_BACKEND=tcp|gloo} picks the backend; default: the best available).
 */
public final class CpuGroupExample {

    /** An application message; its class is registered with the codec on every rank. */
    public record Plan(int step, String mode) {
    }

    public static void main(String[] args) {
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        try (TcpStore store = TcpRendezvous.connect(cfg);
             ProcessGroup world = CpuGroups.create(CpuGroupOptions.fromConfig(cfg, store).toBuilder()
                     .codec(ForyCodec.builder().register(Plan.class).build()).build())) {
            Tensor t = Tensor.ofFloats(world.rank() + 1, 10 * (world.rank() + 1));
            world.allReduce(t, ReduceOp.SUM);                                   // in place, every rank
            Plan plan = world.broadcastObject(world.rank() == 0 ? new Plan(42, "decode") : null, 0, Plan.class);
            List<String> names = world.allGatherObject("rank-" + world.rank(), String.class);
            world.barrier();
            System.out.println("rank " + world.rank() + "/" + world.size() + " on " + world.backendName()
                    + ": allReduce=" + Arrays.toString(t.toDoubleArray()) + " plan=" + plan + " names=" + names);
        }
    }

    private CpuGroupExample() {
    }
}
