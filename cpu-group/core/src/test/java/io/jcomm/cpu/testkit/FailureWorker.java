package io.jcomm.cpu.testkit;

import io.jcomm.api.CommException;
import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import java.time.Duration;

/**
 * Multi-JVM worker for failure injection: runs {@code allreduce} (16 MiB) or {@code barrier} in a
 * loop until one fails (the test kills a rank with SIGKILL meanwhile), then prints
 * {@code FAILED <exception> <ms the failing call took>} and {@code AFTER <exception> <ms>} for one
 * more call (which must fail fast). Arguments: {@code <backend> <timeoutMillis> <mode> [options...]}.
 */
public final class FailureWorker {

    private FailureWorker() {
    }

    public static void main(String[] args) throws Exception {
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        String mode = args[2];
        Duration timeout = Duration.ofMillis(Long.parseLong(args[1]));
        // set-up gets a generous deadline (JVMs start slowly on a busy machine); every call in the
        // loop carries the short timeout under test
        String[] setupArgs = args.clone();
        setupArgs[1] = "60000";
        try (TcpStore store = TcpRendezvous.connect(cfg);
             ProcessGroup g = WorkerSupport.create(setupArgs, cfg, store, "failjvm", 3)) {
            Tensor t = Tensor.allocate(DType.F32, (16 << 20) / 4);
            Runnable op = mode.equals("barrier") ? () -> g.barrier(timeout) : () -> g.allReduce(t, ReduceOp.SUM, timeout);
            op.run();
            g.barrier(Duration.ofSeconds(60));
            System.out.println("READY");
            long end = System.nanoTime() + 60_000_000_000L;
            while (System.nanoTime() < end) {
                long t0 = System.nanoTime();
                try {
                    op.run();
                } catch (CommException e) {
                    long ms = (System.nanoTime() - t0) / 1_000_000;
                    System.out.println("FAILED " + e.getClass().getSimpleName() + " " + ms + " " + WorkerSupport.oneLine(e));
                    long t1 = System.nanoTime();
                    try {
                        g.barrier(timeout);
                        System.out.println("AFTER none");
                    } catch (CommException e2) {
                        System.out.println("AFTER " + e2.getClass().getSimpleName() + " " + (System.nanoTime() - t1) / 1_000_000
                                + " " + WorkerSupport.oneLine(e2));
                    }
                    System.out.println("DONE");
                    return;
                }
            }
            System.out.println("NOFAIL");
        }
    }
}
