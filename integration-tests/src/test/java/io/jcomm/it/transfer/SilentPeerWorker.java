package io.jcomm.it.transfer;

import io.jcomm.api.CommException;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import io.jcomm.transfer.MemoryRegion;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import io.jcomm.transfer.TransferAgent;
import io.jcomm.transfer.TransferHandle;
import io.jcomm.transfer.TransferOptions;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;

/**
 * One side of {@link TransferSilenceIT}, over tcp only: {@code owner} (agent "silent-owner": a 32 MiB
 * sink and a 1 MiB guard region of known bytes; once the file {@code release} appears in the trigger
 * directory it deregisters the sink, which waits for the writes being received into it, and reports how
 * long that took and whether the guard is intact) or {@code initiator} (agent "silent-init": streams
 * 8 MiB writes into the sink, four in flight, until one fails, and reports the failure's type and time).
 *
 * <p>Arguments: {@code owner|initiator STORE_HOST STORE_PORT LISTEN_HOST SILENCE_MS TRIGGER_DIR [host-store]};
 * with {@code host-store} the owner runs the store itself on {@code STORE_HOST:STORE_PORT}.
 */
public final class SilentPeerWorker {

    static final int SINK = 32 << 20;
    static final int PIECE = 8 << 20;

    private SilentPeerWorker() {
    }

    public static void main(String[] args) throws Exception {
        String role = args[0];
        String storeHost = args[1];
        int storePort = Integer.parseInt(args[2]);
        String listen = args[3];
        Duration silence = Duration.ofMillis(Long.parseLong(args[4]));
        Path triggers = Path.of(args[5]);
        TcpStoreServer server = args.length > 6 && args[6].equals("host-store")
                ? TcpStoreServer.start(TcpStoreServerConfig.builder().name("silent-store").host(storeHost).port(storePort).build())
                : null;
        try (TcpStore store = TcpStore.connect(TcpStoreConfig.builder().host(storeHost).port(storePort)
                .timeout(Duration.ofSeconds(60)).build())) {
            TransferOptions.Builder o = TransferOptions.builder(role.equals("owner") ? "silent-owner" : "silent-init")
                    .transports(Set.of("tcp")).listenHost(listen).peerSilenceTimeout(silence).timeout(Duration.ofSeconds(60));
            try (TransferAgent agent = TransferAgent.open(store, o.build())) {
                if (role.equals("owner")) {
                    owner(agent, store, triggers);
                } else {
                    initiator(agent, store);
                }
            }
        } finally {
            if (server != null) {
                server.close();
            }
        }
    }

    private static void owner(TransferAgent agent, TcpStore store, Path triggers) throws Exception {
        MemoryRegion sink = agent.register(ByteBuffer.allocateDirect(SINK), EnumSet.of(Permission.READ, Permission.WRITE));
        MemoryRegion guard = agent.register(ByteBuffer.allocateDirect(1 << 20), EnumSet.of(Permission.READ, Permission.WRITE));
        TransferWorker.fill(guard.buffer(), 41);
        store.set("desc/sink", sink.descriptor().encode());
        System.out.println("owner ready");
        Path release = triggers.resolve("release");
        long until = System.nanoTime() + Duration.ofSeconds(120).toNanos();
        while (!Files.exists(release) && System.nanoTime() < until) {
            Thread.sleep(5);
        }
        long t0 = System.nanoTime();
        try {
            agent.deregister(sink, Duration.ofSeconds(20));
            System.out.println("owner released the sink after ms=" + (System.nanoTime() - t0) / 1_000_000);
        } catch (CommException e) {
            System.out.println("owner could not release the sink: " + e);
        }
        ByteBuffer ref = ByteBuffer.allocateDirect(1 << 20);
        TransferWorker.fill(ref, 41);
        System.out.println("owner guard intact=" + guard.buffer().duplicate().clear().equals(ref));
        System.out.flush();
        Thread.sleep(120_000); // until killed
    }

    private static void initiator(TransferAgent agent, TcpStore store) throws Exception {
        MemoryRegion src = agent.register(ByteBuffer.allocateDirect(PIECE), Set.of());
        TransferWorker.fill(src.buffer(), 5);
        RemoteDescriptor sink = RemoteDescriptor.decode(store.get("desc/sink"));
        String failure = null;
        long failedAt = 0;
        List<TransferHandle> inFlight = new ArrayList<>();
        for (long round = 0; failure == null; round++) {
            inFlight.clear();
            for (int i = 0; i < SINK / PIECE; i++) {
                inFlight.add(agent.write(src.all(), sink.slice((long) i * PIECE, PIECE), null, Duration.ofSeconds(60)));
            }
            for (TransferHandle h : inFlight) {
                try {
                    h.await();
                } catch (CommException e) {
                    if (failure == null) {
                        failedAt = System.currentTimeMillis();
                        failure = e.getClass().getSimpleName() + ": " + e.getMessage();
                    }
                }
            }
            if (round == 3) {
                System.out.println("initiator streaming");
            }
        }
        System.out.println("initiator failed failedAt=" + failedAt + " type=" + failure);
        System.out.flush();
        Thread.sleep(120_000); // until killed
    }
}
