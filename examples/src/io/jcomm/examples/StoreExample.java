package io.jcomm.examples;

import io.jcomm.api.DistributedConfig;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

/**
 * The rendezvous store: every rank publishes its address, waits for everyone else's, and counts
 * itself in. Run: {@code bin/commrun --nproc-per-node 3 examples/src/io/jcomm/examples/StoreExample.java}
 */
public final class StoreExample {

    public static void main(String[] args) {
        DistributedConfig cfg = DistributedConfig.fromEnvironment(); // RANK, WORLD_SIZE, MASTER_ADDR, ...
        try (TcpStore store = TcpRendezvous.connect(cfg)) {          // the launcher hosts the server
            store.set("addr/" + cfg.rank(), ("worker-" + cfg.rank()).getBytes(StandardCharsets.UTF_8));
            List<String> keys = new ArrayList<>();
            for (int r = 0; r < cfg.worldSize(); r++) {
                keys.add("addr/" + r);
            }
            store.wait(keys);                                        // bounded by JCOMM_TIMEOUT_MS
            List<String> peers = new ArrayList<>();
            for (byte[] v : store.multiGet(keys)) {
                peers.add(new String(v, StandardCharsets.UTF_8));
            }
            long arrived = store.add("arrived", 1);
            System.out.println("rank " + cfg.rank() + " sees " + peers + ", arrival #" + arrived);
            store.add("done", 1);
            while (store.add("done", 0) < cfg.worldSize()) {         // leave together
                Thread.onSpinWait();
            }
        }
    }

    private StoreExample() {
    }
}
