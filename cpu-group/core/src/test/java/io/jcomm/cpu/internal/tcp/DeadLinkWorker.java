package io.jcomm.cpu.internal.tcp;

import io.jcomm.api.CommException;
import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.testkit.CpuGroupCases;
import java.time.Duration;
import java.util.List;

/**
 * Three processes, three groups: {@code pp} = {P0, P1} (P0 only ever sends on it), {@code tp} = {P0,
 * P2} (P0 is busy there), {@code world} = {P0, P1, P2} (idle). The test kills P1; P0 prints when it
 * noticed the death in {@code pp} and {@code world} ({@code NOTICED <group> <epoch ms>}) while it kept
 * running {@code tp}, then what its next call on each group did.
 */
public final class DeadLinkWorker {

    private DeadLinkWorker() {
    }

    private static ProcessGroup group(TcpStore store, String name, int rank, int size, List<Integer> globals) {
        return CpuGroups.create(CpuGroupOptions.builder().backend("tcp").store(store).groupName(name).rank(rank).size(size)
                .globalRanks(globals).timeout(Duration.ofSeconds(60)).codec(CpuGroupCases.codec()).build());
    }

    public static void main(String[] args) throws Exception {
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        int me = cfg.rank();
        Duration t = Duration.ofSeconds(5);
        try (TcpStore store = TcpRendezvous.connect(cfg)) {
            ProcessGroup pp = me == 2 ? null : group(store, "pp", me, 2, List.of(0, 1));
            ProcessGroup tp = me == 1 ? null : group(store, "tp", me == 0 ? 0 : 1, 2, List.of(0, 2));
            ProcessGroup world = group(store, "world", me, 3, List.of(0, 1, 2));
            world.barrier();
            System.out.println("READY");
            Tensor x = Tensor.allocate(DType.F32, 256);
            if (me == 1) {
                pp.recv(x, 0, 0);
                System.out.println("GOT " + x.getDouble(255));
                Thread.sleep(60_000); // until killed
                return;
            }
            if (me == 2) {
                while (!"stop".equals(tp.broadcastObject(null, 0, String.class))) {
                    // P0 drives the loop
                }
                System.out.println("DONE");
                return;
            }
            x.fill(7);
            pp.send(x, 1, 0);
            long ppNoticed = 0;
            long worldNoticed = 0;
            long end = System.nanoTime() + 30_000_000_000L;
            while ((ppNoticed == 0 || worldNoticed == 0) && System.nanoTime() < end) {
                tp.broadcastObject("go", 0, String.class);
                if (ppNoticed == 0 && pp.isPoisoned()) {
                    ppNoticed = System.currentTimeMillis();
                    System.out.println("NOTICED pp " + ppNoticed);
                }
                if (worldNoticed == 0 && world.isPoisoned()) {
                    worldNoticed = System.currentTimeMillis();
                    System.out.println("NOTICED world " + worldNoticed);
                }
                Thread.sleep(1);
            }
            report("WORLD", () -> world.barrier(t));
            report("PP", () -> pp.send(x, 1, 0, t));
            report("TP", () -> tp.broadcastObject("go", 0, String.class, t));
            tp.broadcastObject("stop", 0, String.class);
            System.out.println("DONE");
        }
    }

    private static void report(String what, Runnable call) {
        long t0 = System.nanoTime();
        try {
            call.run();
            System.out.println(what + " ok " + (System.nanoTime() - t0) / 1_000_000);
        } catch (CommException e) {
            System.out.println(what + " " + e.getClass().getSimpleName() + " " + (System.nanoTime() - t0) / 1_000_000 + " "
                    + e.getMessage().replace('\n', ' '));
        }
    }
}
