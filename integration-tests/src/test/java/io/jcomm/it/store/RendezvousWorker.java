package io.jcomm.it.store;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.jcomm.api.DistributedConfig;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import java.util.ArrayList;
import java.util.List;

/** A rank of the multi-process rendezvous tests (torchrun environment from MultiJvm). */
public final class RendezvousWorker {

    private RendezvousWorker() {
    }

    public static void main(String[] args) throws Exception {
        DistributedConfig dc = DistributedConfig.fromEnvironment();
        try (TcpStore s = TcpRendezvous.connect(dc, TcpRendezvous.Options.builder().waitForWorkers(true).build())) {
            System.out.println("rank " + dc.rank() + " joined");
            if (args[0].equals("with-torch")) {
                // rank 0 of 2: hosts; torch's worker is rank 1 (its constructor added 1 to init/)
                s.set("java_rank0", "hosted by java".getBytes(UTF_8));
                System.out.println("torch_worker=" + new String(s.get("torch_worker"), UTF_8));
                s.set("java_done", new byte[0]);
                s.wait(List.of("torch_bye"));
            } else {
                s.set("addr/" + dc.rank(), ("jvm-" + ProcessHandle.current().pid()).getBytes(UTF_8));
                List<String> keys = new ArrayList<>();
                for (int r = 0; r < dc.worldSize(); r++) {
                    keys.add("addr/" + r);
                }
                StringBuilder sb = new StringBuilder();
                for (byte[] v : s.multiGet(keys)) {
                    sb.append(new String(v, UTF_8).startsWith("jvm-") ? "ok," : "bad,");
                }
                System.out.println("rank " + dc.rank() + " sees " + sb);
                long arrived = s.add("arrived", 1);
                s.wait(List.of("arrived"));
                while (arrived < dc.worldSize()) {
                    Thread.sleep(2);
                    arrived = s.add("arrived", 0);
                }
                if (dc.rank() == 0) {
                    List<String> bye = new ArrayList<>();
                    for (int r = 1; r < dc.worldSize(); r++) {
                        bye.add("bye/" + r);
                    }
                    s.wait(bye); // keep hosting until everyone is done
                } else {
                    s.set("bye/" + dc.rank(), new byte[0]);
                }
                System.out.println("rank " + dc.rank() + " done");
            }
        }
    }
}
