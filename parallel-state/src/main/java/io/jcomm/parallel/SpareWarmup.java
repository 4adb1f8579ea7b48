package io.jcomm.parallel;

import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ObjectCodec;
import io.jcomm.api.Tensor;
import io.jcomm.runtime.Entropy;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.device.DeviceCommunicators;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What a spare does while it waits for a vacancy: it runs the path its groups will take once it replaces a
 * rank (a {@link GroupFactory} group of the job's options: CPU group, node-local channel, device communicator,
 * all-reduces, tensor-dict broadcasts) on a throwaway group of two threads of its own, over an in-memory store
 * and loopback, so that those classes are loaded and their code compiled before the survivors wait for it. Its
 * own namespace and nonce; no fault injection, no broadcaster; bounded; a failure only costs a debug line.
 */
final class SpareWarmup {

    private static final Logger LOG = LoggerFactory.getLogger(SpareWarmup.class);
    static final String GROUP = "spare-warmup";
    private static final int ROUNDS = 300;

    private SpareWarmup() {
    }

    static void run(DistributedConfig config, ParallelStateOptions options, ObjectCodec codec, DeviceCommunicators devices,
                    Duration budget) {
        long t0 = System.nanoTime();
        InMemoryStore store = new InMemoryStore();
        long nonce = Entropy.nextLong();
        HostTopology topology = HostTopology.of(List.of(config.hostId(), config.hostId()));
        ParallelStateOptions o = options.toBuilder().tpMessageQueue(false).timeout(budget)
                .cpuOption(CpuGroupOptions.FAULT_OPTION, "").build();
        Thread[] threads = new Thread[2];
        for (int r = 0; r < 2; r++) {
            int rank = r;
            threads[r] = new Thread(() -> {
                DistributedConfig c = config.toBuilder().rank(rank).worldSize(2).localRank(rank).localWorldSize(2)
                        .role(DistributedConfig.Role.WORKER).build();
                GroupFactory f = new GroupFactory(c, o, store, codec, devices);
                GroupCoordinator g = null;
                try {
                    g = f.create(new GroupFactory.Spec(GROUP, List.of(0, 1), false, "w" + Long.toHexString(nonce), true),
                            store, topology, nonce, null, null);
                    Tensor t = Tensor.allocate(DType.F32, 256);
                    for (int i = 0; i < ROUNDS; i++) {
                        t.setDouble(0, i);
                        g.allReduce(t);
                        if (i % 10 == 0) {
                            g.broadcastTensorDict(rank == 0 ? Map.of("id", (long) i, "x", Tensor.ofInts(i, i + 1)) : null, 0);
                        }
                    }
                    g.cpuGroup().barrier();
                } catch (RuntimeException | LinkageError e) {
                    LOG.debug("spare warm-up (rank {}) stopped: {}", rank, e.toString());
                } finally {
                    if (g != null) {
                        g.destroy();
                    }
                }
            }, "jcomm-spare-warmup-" + r);
            threads[r].setDaemon(true);
            threads[r].start();
        }
        long end = t0 + budget.toNanos();
        for (Thread t : threads) {
            try {
                t.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(end - System.nanoTime())));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
        LOG.debug("spare warm-up took {} ms", TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0));
    }
}
