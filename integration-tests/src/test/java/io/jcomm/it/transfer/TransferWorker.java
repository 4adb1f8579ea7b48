package io.jcomm.it.transfer;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.jcomm.api.CommException;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
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
 * arrives, survives the first initiator's {@code kill -9} and serves a second one), {@code initiator}
 * (agent "prefill": writes, reads, tries refused descriptors, then streams until it is killed) or
 * {@code second} (agent "prefill-2": after the first initiator's death, writes, reads and notifies,
 * then streams until the owner is killed). All reach the TCP store at {@code MASTER_ADDR:MASTER_PORT}
 * with the job token; the role {@code store} hosts that store (across network namespaces, where the
 * test's JVM reaches neither host). {@code TRANSFER_LISTEN} is the
 * address an agent's tcp transport listens on. Arguments: the role, the token file, a directory
 * where the test leaves the file {@code initiator-killed} after it killed the first initiator.
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

    static long crc(ByteBuffer b) {
        CRC32 c = new CRC32();
        c.update(b.duplicate().clear());
        return c.getValue();
    }

    /** Lines of this process's memory map naming one of the owner's shared-memory files (an shm transfer maps them). */
    static long mappedOwnerFiles() throws java.io.IOException {
        try (java.util.stream.Stream<String> maps = java.nio.file.Files.lines(Path.of("/proc/self/maps"))) {
            return maps.filter(l -> l.contains("jcomm-kv-decode-")).count();
        }
    }

    private static String env(String name, String otherwise) {
        String v = System.getenv(name);
        return v == null || v.isEmpty() ? otherwise : v;
    }

    public static void main(String[] args) throws Exception {
        String host = env("MASTER_ADDR", "127.0.0.1");
        int port = Integer.parseInt(System.getenv("MASTER_PORT"));
        Path token = Path.of(args[1]);
        Path signals = Path.of(args[2]);
        if (args[0].equals("store")) {
            try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().name("transfer-store").host(host)
                    .port(port).tokenFile(token).build())) {
                System.out.println("store ready on " + server.address());
                Thread.sleep(170_000); // until the test ends it
            }
            return;
        }
        try (TcpStore store = TcpStore.connect(TcpStoreConfig.builder().host(host).port(port).tokenFile(token)
                .timeout(Duration.ofSeconds(60)).build())) {
            TransferOptions.Builder ob = TransferOptions.builder(args[0].equals("owner") ? "decode"
                    : args[0].equals("second") ? "prefill-2" : "prefill").tokenFile(token)
                    .listenHost(env("TRANSFER_LISTEN", TransferOptions.LISTEN_HOST_DEFAULT));
            switch (args[0]) {
                case "owner" -> owner(store, ob, signals);
                case "initiator" -> initiator(store, ob);
                case "second" -> second(store, ob);
                default -> throw new IllegalArgumentException("role " + args[0]);
            }
        }
    }

    private static void owner(TcpStore store, TransferOptions.Builder ob, Path signals) throws Exception {
        try (TransferAgent agent = TransferAgent.open(store, ob.build())) {
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
            MemoryRegion keep = agent.register(ByteBuffer.allocateDirect(1 << 20), RW); // nobody writes it
            fill(keep.buffer(), 99);
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
            List<MemoryRegion> others = List.of(heap, shared, readOnly, guard, reused, keep);
            long[] sums = new long[others.size()];
            for (int i = 0; i < sums.length; i++) {
                sums[i] = crc(others.get(i).buffer());
            }
            store.set("owner-verified", new byte[0]);

            // the first initiator is killed (kill -9) while it streams into the sink
            long servingBefore = servingThreads();
            long waitEnd = System.nanoTime() + Duration.ofSeconds(90).toNanos();
            while (!java.nio.file.Files.exists(signals.resolve("initiator-killed")) && System.nanoTime() < waitEnd) {
                Thread.sleep(10);
            }
            long killedAt = System.nanoTime();
            boolean intact = keep.buffer().equals(reference(1 << 20, 99));
            for (int i = 0; i < sums.length; i++) {
                intact &= sums[i] == crc(others.get(i).buffer());
            }
            String deregistered;
            try {
                agent.deregister(sink, Duration.ofSeconds(2));
                deregistered = "in ms=" + (System.nanoTime() - killedAt) / 1_000_000;
            } catch (CommException e) {
                deregistered = "failed " + e;
            }
            long serving = -1;
            long threadsEnd = System.nanoTime() + Duration.ofSeconds(2).toNanos();
            while (System.nanoTime() < threadsEnd && (serving = servingThreads()) > 0) {
                Thread.sleep(10);
            }
            System.out.println("owner after initiator kill: other regions intact=" + intact + ", the written region deregistered "
                    + deregistered + ", serving threads " + servingBefore + " before, " + serving + " after");

            // ... and serves a second initiator
            MemoryRegion sink2 = agent.register(ByteBuffer.allocateDirect(64 << 20), RW);
            store.set("desc/sink2", sink2.descriptor().encode());
            store.set("second-go", new byte[0]);
            Notification n = agent.pollNotification(Duration.ofSeconds(60)).orElseThrow();
            System.out.println("owner second notified from=" + n.from() + " payload=" + new String(n.payload(), UTF_8)
                    + " heap wrong bytes=" + checkPermuted(heap.buffer(), 45, 9));
            store.set("owner-verified-2", new byte[0]);
            Thread.sleep(120_000); // until killed
        }
    }

    /** Threads of the owner's tcp transport serving a connection. */
    private static long servingThreads() {
        return Thread.getAllStackTraces().keySet().stream().filter(t -> t.getName().equals("jcomm-transfer-decode-serve")
                && t.isAlive()).count();
    }

    private static ByteBuffer reference(int size, int seed) {
        ByteBuffer b = ByteBuffer.allocateDirect(size);
        fill(b, seed);
        return b;
    }

    private static void initiator(TcpStore store, TransferOptions.Builder ob) throws Exception {
        try (TransferAgent agent = TransferAgent.open(store, ob.build())) {
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
            System.out.println("initiator mapped owner files=" + mappedOwnerFiles());
            store.set("refusals-done", new byte[0]);
            store.get("owner-verified", Duration.ofSeconds(60));
            stream(agent, src, sink, "initiator");
        }
    }

    private static void second(TcpStore store, TransferOptions.Builder ob) throws Exception {
        try (TransferAgent agent = TransferAgent.open(store, ob.build())) {
            MemoryRegion src = agent.register(ByteBuffer.allocateDirect(16 << 20), Set.of());
            fill(src.buffer(), 9);
            store.get("second-go", Duration.ofSeconds(90));
            RemoteDescriptor heap = RemoteDescriptor.decode(store.get("desc/heap"));
            RemoteDescriptor sink = RemoteDescriptor.decode(store.get("desc/sink2"));
            List<LocalDescriptor> ls = new ArrayList<>();
            List<RemoteDescriptor> rs = new ArrayList<>();
            for (int i = 0; i < BLOCKS; i++) {
                ls.add(src.slice((long) i * BLOCK, BLOCK));
                rs.add(heap.slice((long) (i * 45 % BLOCKS) * BLOCK, BLOCK));
            }
            agent.write(ls, rs, "second-done".getBytes(UTF_8), Duration.ofSeconds(30)).await();
            MemoryRegion back = agent.register(ByteBuffer.allocate(REGION), Set.of());
            agent.read(List.of(back.all()), List.of(heap), Duration.ofSeconds(30)).await();
            System.out.println("second read-back wrong bytes=" + checkPermuted(back.buffer(), 45, 9));
            store.get("owner-verified-2", Duration.ofSeconds(60));
            stream(agent, src, sink, "second");
        }
    }

    /** Streams 4 x 16 MiB writes at a time into {@code sink} until a transfer fails (the owner was killed). */
    private static void stream(TransferAgent agent, MemoryRegion src, RemoteDescriptor sink, String who) throws Exception {
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
                System.out.println(who + " streaming");
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
        System.out.println(who + " failed type=" + failure + " failedAt=" + failedAt.get() + " peerFailures=" + typed
                + " rounds=" + rounds);
        long t0 = System.nanoTime();
        try {
            agent.write(src.slice(0, 4096), sink.slice(0, 4096), null, Duration.ofSeconds(5)).await();
            System.out.println(who + " write after death succeeded?!");
        } catch (CommException e) {
            System.out.println(who + " write after death failed type=" + e.getClass().getSimpleName() + " in ms="
                    + (System.nanoTime() - t0) / 1_000_000);
        }
        System.out.println(who + " survivor intact=" + (before.getValue() == after.getValue() && src.isLive()));
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
