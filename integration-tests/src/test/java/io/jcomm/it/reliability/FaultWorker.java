package io.jcomm.it.reliability;

import io.jcomm.api.CommException;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * A rank of {@link FaultInjectionIT}: makes the group {@code tp:0} of every rank (the store hosted by
 * rank 0), then runs {@code <ops>} all-reduces with a deadline of {@code <op timeout ms>} each, printing
 * {@code DONE <seq> <nanoTime>} after each (the group's sequence numbers: nothing else runs in it). The
 * faults come from {@code JCOMM_FAULT} in its environment. The first failure prints
 * {@code FAILED <exception> <group> <rank> <op> <peer rank or -1> <nanoTime> <message>} and the worker
 * exits 0 (a typed failure is what a survivor should get); all done prints {@code ALL DONE}.
 *
 * <p>args: {@code <ops> <op timeout ms>}
 */
public final class FaultWorker {

    private FaultWorker() {
    }

    public static void main(String[] args) {
        int ops = Integer.parseInt(args[0]);
        Duration opTimeout = Duration.ofMillis(Long.parseLong(args[1]));
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        List<Integer> ranks = new ArrayList<>();
        for (int i = 0; i < cfg.worldSize(); i++) {
            ranks.add(i);
        }
        try (TcpStore store = TcpRendezvous.connect(cfg);
             ProcessGroup g = CpuGroups.create(CpuGroupOptions.builder().store(store).groupName("tp:0").rank(cfg.rank())
                     .size(cfg.worldSize()).globalRanks(ranks).backend("tcp").timeout(Duration.ofSeconds(30)).build())) {
            for (long seq = 1; seq <= ops; seq++) {
                Tensor t = Tensor.ofLongs(seq);
                try {
                    g.allReduce(t, ReduceOp.SUM, opTimeout);
                } catch (CommException e) {
                    long at = System.nanoTime();
                    int peer = e instanceof PeerFailureException ? ((PeerFailureException) e).peerRank() : -1;
                    System.out.println("FAILED " + e.getClass().getSimpleName() + " " + e.group() + " " + e.rank() + " "
                            + e.operation() + " " + peer + " " + at + " " + String.valueOf(e.getMessage()).replace('\n', ' '));
                    System.out.flush();
                    return;
                }
                if (t.getLong(0) != seq * cfg.worldSize()) {
                    throw new AssertionError("op " + seq + ": " + t.getLong(0));
                }
                System.out.println("DONE " + seq + " " + System.nanoTime());
            }
            System.out.println("ALL DONE");
            System.out.flush();
        }
    }
}
