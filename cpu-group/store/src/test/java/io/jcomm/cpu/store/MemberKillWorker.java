package io.jcomm.cpu.store;

import io.jcomm.api.CommException;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.PeerFailureException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Multi-JVM worker of {@link TcpStoreMemberKillTest}: connects through {@link TcpRendezvous} (so it
 * declares itself rank {@code RANK} of job {@code JCOMM_JOB_ID}), waits until every rank is up, then
 * the victim (argument 0) prints {@code DECLARED} and sleeps until it is killed, while the others
 * print {@code WAITING} and wait 60 s for a key nobody sets. They print
 * {@code PEER_FAILURE <dead rank> <ms waited> <message>} (or {@code OTHER ...} / {@code NOFAIL}).
 */
public final class MemberKillWorker {

    private MemberKillWorker() {
    }

    public static void main(String[] args) throws Exception {
        int victim = Integer.parseInt(args[0]);
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        try (TcpStore store = TcpRendezvous.connect(cfg)) {
            if (!store.isDeclaredMember()) {
                throw new AssertionError("the rendezvous store did not declare this rank");
            }
            store.set("up/" + cfg.rank(), new byte[0]);
            List<String> up = new ArrayList<>();
            for (int r = 0; r < cfg.worldSize(); r++) {
                up.add("up/" + r);
            }
            store.wait(up);
            if (cfg.rank() == victim) {
                System.out.println("DECLARED " + store.config().member().orElseThrow());
                Thread.sleep(120_000);
                return;
            }
            System.out.println("WAITING");
            long t0 = System.nanoTime();
            try {
                store.wait(List.of("never"), Duration.ofSeconds(60));
                System.out.println("NOFAIL");
            } catch (PeerFailureException e) {
                System.out.println("PEER_FAILURE " + e.peerRank() + " " + (System.nanoTime() - t0) / 1_000_000 + " "
                        + e.getMessage().replace('\n', ' '));
            } catch (CommException e) {
                System.out.println("OTHER " + e.getClass().getSimpleName() + " " + e.getMessage().replace('\n', ' '));
            }
        }
    }
}
