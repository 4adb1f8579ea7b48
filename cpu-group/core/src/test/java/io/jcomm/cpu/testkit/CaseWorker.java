package io.jcomm.cpu.testkit;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ProcessGroup;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import java.util.Arrays;

/**
 * Multi-JVM worker: one process per rank runs every {@link CpuGroupCases} case in order and prints
 * {@code CASE <name> OK <ms>} or {@code CASE <name> FAIL <error>} per case, then {@code DONE}.
 * Arguments: {@code <backend> <timeoutMillis> <big: true|false> [key=value options...]}.
 */
public final class CaseWorker {

    private CaseWorker() {
    }

    public static void main(String[] args) throws Exception {
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        boolean big = Boolean.parseBoolean(args[2]);
        try (TcpStore store = TcpRendezvous.connect(cfg);
             ProcessGroup g = WorkerSupport.create(args, cfg, store, "kitjvm", 3)) {
            System.out.println("GROUP " + g.backendName() + " rank " + g.rank() + "/" + g.size() + " " + Arrays.toString(args));
            for (CpuGroupCases.Case c : CpuGroupCases.all(big)) {
                long t0 = System.nanoTime();
                try {
                    c.body().run(g);
                    System.out.println("CASE " + c.name() + " OK " + (System.nanoTime() - t0) / 1_000_000);
                } catch (Throwable t) {
                    System.out.println("CASE " + c.name() + " FAIL " + WorkerSupport.oneLine(t));
                }
            }
            if (!g.isPoisoned()) {
                g.barrier(); // nobody closes (and stops the store) before everyone is done
            }
        }
        System.out.println("DONE");
    }
}
