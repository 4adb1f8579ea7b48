package io.jcomm.it.transfer;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.jcomm.api.CommException;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import io.jcomm.transfer.LocalDescriptor;
import io.jcomm.transfer.MemoryRegion;
import io.jcomm.transfer.Notification;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import io.jcomm.transfer.TransferAgent;
import io.jcomm.transfer.TransferHandle;
import io.jcomm.transfer.TransferOptions;
import io.jcomm.transfer.TransferRefusedException;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32;

/**
 * One side of {@link TransferIT}: {@code owner} (agent "decode": registers memory and checks what
 * arrives) or {@code initiator} (agent "prefill": writes, reads, tries refused descriptors, then
 * streams until the owner is killed). Both reach the test's TCP store with the job token.
 */
public final class TransferWorker {

    static final int BLOCK = 64 << 10;
    static final int BLOCKS = 128;
    static final int REGION = BLOCK * BLOCKS; // 8 MiB
    static final Set<Permission> RW = EnumSet.of(Permission.READ, Permission.WRITE);

    private TransferWorker() {
    }

    static byte f(long i, int seed) {
        return (byte) (i * 31 + seed + (i >>> 16));
    }

    static void fill(ByteBuffer b, int seed) {
        for (int i = 0; i < b.capacity(); i++) {
            b.put(i, f(i, seed));
        }
    }

    static long checkPermuted(ByteBuffer dst, int mul, int seed) {
        long bad = 0;
        for (int i = 0; i < BLOCKS; i++) {
            int j = i * mul % BLOCKS;
            for (int k = 0; k < BLOCK; k++) {
                if (dst.get(j * BLOCK + k) != f((long) i * BLOCK + k, seed)) {
                    bad++;
                }
            }
        }
        return bad;
    }

    static long countNot(ByteBuffer b, byte v) {
        long n = 0;
        for (int i = 0; i < b.capacity(); i++) {
            if (b.get(i) != v) {
                n++;
            }
        }
        return n;
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(System.getenv("MASTER_PORT"));
        Path token = Path.of(args[1]);
        try (TcpStore store = TcpStore.connect(TcpStoreConfig.builder().port(port).tokenFile(token)
                .timeout(Duration.ofSeconds(60)).build())) {
            if (args[0].equals("owner")) {
                owner(store, token);
            } else {
                initiator(store, token);
            }
        }
    }

    private static void owner(TcpStore store, Path token) throws Exception {
        try (TransferAgent agent = TransferAgent.open(store, TransferOptions.builder("decode").tokenFile(token).build())) {
            MemoryRegion heap = agent.register(ByteBuffer.allocate(REGION), RW);
            MemoryRegion shared = agent.allocateShared(REGION, RW);
            MemoryRegion readOnly = agent.register(ByteBuffer.allocateDirect(1 << 20), Set.of(Permission.READ));
            fill(readOnly.buffer(), 77);
            MemoryRegion guard = agent.register(ByteBuffer.allocate(256 << 10), RW);
            MemoryRegion victim = agent.register(ByteBuffer.allocate(64 << 10), RW);
            RemoteDescriptor stale = victim.descriptor();
            agent.deregister(victim);
            MemoryRegion reused = agent.register(ByteBuffer.allocate(64 << 10), RW);
            MemoryRegion sink = agent.register(ByteBuffer.allocateDirect(64 << 20), RW);
            store.set("desc/heap", heap.descriptor().encode());
            store.set("desc/shared", shared.descriptor().encode());
            store.set("desc/readOnly", readOnly.descriptor().encode());
            store.set("desc/guard", guard.descriptor().encode());
            store.set("desc/stale", stale.encode());
            store.set("desc/sink", sink.descriptor().encode());
            System.out.println("owner ready: stale region " + stale.regionId() + " reused by " + reused.id()
                    + " with generation " + Long.toHexString(reused.generation()));
            for (int i = 0; i < 2; i++) {
                Notification n = agent.pollNotification(Duration.ofSeconds(60)).orElseThrow();
                System.out.println("owner notified from=" + n.from() + " payload=" + new String(n.payload(), UTF_8));
            }
            System.out.println("owner heap wrong bytes=" + checkPermuted(heap.buffer(), 37, 7));
            System.out.println("owner shared wrong bytes=" + checkPermuted(shared.buffer(), 53, 7));
            store.get("refusals-done", Duration.ofSeconds(60));
            System.out.println("owner after refusals guard touched=" + countNot(guard.buffer(), (byte) 0)
                    + " reused touched=" + countNot(reused.buffer(), (byte) 0)
                    + " readOnly changed=" + (readOnly.buffer().equals(reference(1 << 20, 77)) ? 0 : 1)
                    + " extra notifications=" + (agent.pollNotification(Duration.ofMillis(200)).isPresent() ? 1 : 0));
            store.set("owner-verified", new byte[0]);
            Thread.sleep(120_000); // until killed
        }
    }

    private static ByteBuffer reference(int size, int seed) {
        ByteBuffer b = ByteBuffer.allocateDirect(size);
        fill(b, seed);
        return b;
    }

    private static void initiator(TcpStore store, Path token) throws Exception {
        try (TransferAgent agent = TransferAgent.open(store, TransferOptions.builder("prefill").tokenFile(token).build())) {
            MemoryRegion src = agent.register(ByteBuffer.allocateDirect(16 << 20), Set.of());
            fill(src.buffer(), 7);
            RemoteDescriptor heap = RemoteDescriptor.decode(store.get("desc/heap"));
            RemoteDescriptor shared = RemoteDescriptor.decode(store.get("desc/shared"));
            RemoteDescriptor readOnly = RemoteDescriptor.decode(store.get("desc/readOnly"));
            RemoteDescriptor guard = RemoteDescriptor.decode(store.get("desc/guard"));
            RemoteDescriptor stale = RemoteDescriptor.decode(store.get("desc/stale"));
            RemoteDescriptor sink = RemoteDescriptor.decode(store.get("desc/sink"));

            for (Object[] t : new Object[][] {{heap, 37, "heap-done"}, {shared, 53, "shared-done"}}) {
                RemoteDescriptor r = (RemoteDescriptor) t[0];
                int mul = (Integer) t[1];
                List<LocalDescriptor> ls = new ArrayList<>();
                List<RemoteDescriptor> rs = new ArrayList<>();
                for (int i = 0; i < BLOCKS; i++) {
                    ls.add(src.slice((long) i * BLOCK, BLOCK));
                    rs.add(r.slice((long) (i * mul % BLOCKS) * BLOCK, BLOCK));
                }
                agent.write(ls, rs, ((String) t[2]).getBytes(UTF_8), Duration.ofSeconds(30)).await();
                // read every block back and compare with what was sent
                MemoryRegion back = agent.register(ByteBuffer.allocate(REGION), Set.of());
                agent.read(List.of(back.all()), List.of(r), Duration.ofSeconds(30)).await();
                System.out.println("initiator " + t[2] + " " + r.kind() + " read-back wrong bytes=" + checkPermuted(back.buffer(), mul, 7));
                agent.deregister(back);
            }
            MemoryRegion ro = agent.register(ByteBuffer.allocate(1 << 20), Set.of());
            agent.read(ro.all(), readOnly).await();
            System.out.println("initiator read-only region wrong bytes=" + (ro.buffer().equals(reference(1 << 20, 77)) ? 0 : countNot(ro.buffer(), (byte) 0)));

            RemoteDescriptor outOfRange = new RemoteDescriptor(guard.agent(), guard.regionId(), guard.generation(), guard.kind(),
                    guard.length() - 4096, 64 << 10, guard.permissions());
            refuse(agent.write(src.slice(0, 64 << 10), outOfRange, "must-not-arrive".getBytes(UTF_8)), "out-of-range");
            refuse(agent.write(src.slice(0, 4096), readOnly.slice(0, 4096), null), "read-only");
            refuse(agent.write(src.slice(0, 4096), stale.slice(0, 4096), "must-not-arrive".getBytes(UTF_8)), "stale");
            store.set("refusals-done", new byte[0]);
            store.get("owner-verified", Duration.ofSeconds(60));

            CRC32 before = new CRC32();
            before.update(src.buffer());
            AtomicLong failedAt = new AtomicLong();
            List<TransferHandle> inFlight = new ArrayList<>();
            String failure = null;
            long rounds = 0;
            while (failure == null && rounds < 100_000) {
                inFlight.clear();
                for (int i = 0; i < 4; i++) {
                    TransferHandle h = agent.write(src.all(), sink.slice((long) i * (16 << 20), 16 << 20), null);
                    h.toCompletableFuture().whenComplete((v, e) -> {
                        if (e != null) {
                            failedAt.compareAndSet(0, System.currentTimeMillis());
                        }
                    });
                    inFlight.add(h);
                }
                for (TransferHandle h : inFlight) {
                    try {
                        h.await();
                    } catch (CommException e) {
                        failure = failure == null ? e.getClass().getSimpleName() : failure;
                    }
                }
                if (rounds++ == 2) {
                    System.out.println("initiator streaming");
                }
            }
            int typed = 0;
            for (TransferHandle h : inFlight) {
                if (h.isDone() && h.error().isPresent() && h.error().get() instanceof io.jcomm.api.PeerFailureException) {
                    typed++;
                }
            }
            CRC32 after = new CRC32();
            after.update(src.buffer());
            System.out.println("initiator failed type=" + failure + " failedAt=" + failedAt.get() + " peerFailures=" + typed
                    + " rounds=" + rounds);
            long t0 = System.nanoTime();
            try {
                agent.write(src.slice(0, 4096), sink.slice(0, 4096), null, Duration.ofSeconds(5)).await();
                System.out.println("initiator write after death succeeded?!");
            } catch (CommException e) {
                System.out.println("initiator write after death failed type=" + e.getClass().getSimpleName() + " in ms="
                        + (System.nanoTime() - t0) / 1_000_000);
            }
            System.out.println("initiator survivor intact=" + (before.getValue() == after.getValue() && src.isLive()));
        }
    }

    private static void refuse(TransferHandle h, String what) {
        try {
            h.await();
            System.out.println("initiator " + what + " ACCEPTED");
        } catch (TransferRefusedException e) {
            System.out.println("initiator " + what + " refused reason=" + e.reason());
        }
    }
}
