package io.jcomm.it.gloo;

import io.jcomm.api.CommException;
import io.jcomm.api.DType;
import io.jcomm.api.Deadline;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.store.PrefixStore;
import io.jcomm.cpu.gloo.GlooBackend;
import io.jcomm.cpu.spi.CpuBackendContext;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A rank of {@link GlooKillIT}: connects a gloo backend through the job's TCP store (rank 0 hosts
 * it), prints {@code READY}, then runs {@code allReduce} (4 MiB) or {@code barrier} in a loop until
 * a peer is killed. Then it prints {@code FAILED <exception> <peer rank> <epoch ms>}, checks that
 * the next call fails at once ({@code FAST <exception> <ms>}) and exits 0.
 *
 * <p>args: {@code allReduce|barrier <op timeout ms>}
 */
public final class GlooKillWorker {

    private GlooKillWorker() {
    }

    public static void main(String[] args) throws Exception {
        String op = args[0];
        Duration opTimeout = Duration.ofMillis(Long.parseLong(args[1]));
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        List<Integer> ranks = new ArrayList<>();
        for (int i = 0; i < cfg.worldSize(); i++) {
            ranks.add(i);
        }
        try (TcpStore store = TcpRendezvous.connect(cfg);
             GlooBackend g = GlooBackend.connect(new CpuBackendContext(new PrefixStore("kill", store), "kill",
                     cfg.rank(), cfg.worldSize(), ranks, "127.0.0.1", Duration.ofSeconds(30), Map.of()))) {
            g.barrier(Deadline.after(Duration.ofSeconds(30)));
            System.out.println("READY");
            Tensor t = Tensor.allocate(DType.F32, 1 << 20);
            long n = 0;
            CommException failure = null;
            while (failure == null) {
                try {
                    if (op.equals("barrier")) {
                        g.barrier(Deadline.after(opTimeout));
                    } else {
                        t.fill(1);
                        g.allReduce(t, ReduceOp.SUM, Deadline.after(opTimeout));
                    }
                    n++;
                } catch (CommException e) {
                    failure = e;
                }
            }
            int peer = failure instanceof PeerFailureException ? ((PeerFailureException) failure).peerRank() : -1;
            System.out.println("FAILED " + failure.getClass().getSimpleName() + " " + peer + " "
                    + System.currentTimeMillis() + " after " + n + " calls: " + failure.getMessage());
            long start = System.nanoTime();
            try {
                g.barrier(Deadline.after(Duration.ofSeconds(30)));
                System.out.println("UNEXPECTED the call after the failure succeeded");
                System.exit(3);
            } catch (CommException e) {
                System.out.println("FAST " + e.getClass().getSimpleName() + " "
                        + (System.nanoTime() - start) / 1_000_000 + " cause=" + (e.getCause() == failure));
            }
            System.out.flush();
            // the store host must outlive the other survivors' last store use: none is left here
        }
    }
}
