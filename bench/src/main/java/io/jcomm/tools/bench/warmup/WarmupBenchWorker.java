package io.jcomm.tools.bench.warmup;

import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.api.store.Store;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.tools.bench.ParentWatch;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;

/**
 * One rank of {@link WarmupBenchCommand}: in a fresh JVM, makes a tcp CPU group and at once runs
 * {@code calls} operations of {@code bytes}, timing each. Rank 0 prints
 * {@code @@warmup <op> <bytes> <p50 of the first `first` calls, ns> <p50 of the last `first` calls, ns> <calls>}
 * (per call the slowest rank's time).
 *
 * <p>Arguments: {@code <allreduce|sendrecv> <bytes> <calls> <first>}.
 */
public final class WarmupBenchWorker {

    private WarmupBenchWorker() {
    }

    public static void main(String[] args) throws Exception {
        ParentWatch.start(3);
        String op = args[0];
        int bytes = Integer.parseInt(args[1]);
        int calls = Integer.parseInt(args[2]);
        int first = Integer.parseInt(args[3]);
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        try (Store store = TcpRendezvous.connect(cfg, TcpRendezvous.Options.builder().hostServer(false).build());
             ProcessGroup g = CpuGroups.create(CpuGroupOptions.builder().store(store).groupName("warmup")
                     .rank(cfg.rank()).size(cfg.worldSize()).backend("tcp").timeout(Duration.ofSeconds(60)).build())) {
            Tensor x = Tensor.allocate(DType.F32, Math.max(1, bytes / 4));
            Tensor y = Tensor.allocate(DType.F32, Math.max(1, bytes / 4));
            int next = (g.rank() + 1) % g.size();
            int prev = (g.rank() + g.size() - 1) % g.size();
            long[] t = new long[calls];
            for (int i = 0; i < calls; i++) {
                long t0 = System.nanoTime();
                if (op.equals("allreduce")) {
                    g.allReduce(x, ReduceOp.SUM);
                } else if (g.rank() % 2 == 0) {
                    g.send(x, next, 0);
                    g.recv(y, prev, 0);
                } else {
                    g.recv(y, prev, 0);
                    g.send(x, next, 0);
                }
                t[i] = System.nanoTime() - t0;
            }
            List<long[]> all = g.gatherObject(t, 0, long[].class);
            if (g.rank() == 0) {
                long[] slowest = new long[calls];
                for (long[] r : all) {
                    for (int i = 0; i < calls; i++) {
                        slowest[i] = Math.max(slowest[i], r[i]);
                    }
                }
                long[] head = Arrays.copyOfRange(slowest, 0, first);
                long[] tail = Arrays.copyOfRange(slowest, calls - first, calls);
                Arrays.sort(head);
                Arrays.sort(tail);
                System.out.println("@@warmup " + op + " " + bytes + " " + head[first / 2] + " " + tail[first / 2] + " "
                        + calls);
            }
            g.barrier();
        }
    }
}
