package io.jcomm.tools.demo;

import io.jcomm.api.CommException;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.OpContext;
import io.jcomm.api.store.Store;
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
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * {@code demo --pd prefill|decode}: disaggregated prefill and decode as two jobs, each under its own
 * {@code commrun}, whose transfer agents meet in one store (the decode job's launcher store, or a
 * standalone {@code commstore}):
 *
 * <pre>
 * bin/commrun --nproc-per-node 2 --master-port 29610 demo --pd decode
 * bin/commrun --nproc-per-node 2 demo --pd prefill --store 127.0.0.1:29610
 * </pre>
 *
 * Decode rank i registers a paged block pool ({@code --window} request slots; per layer
 * {@code window x blocks} blocks of {@code --block-bytes}, a request's blocks interleaved with the
 * other slots' as a paged KV cache places them) and publishes its descriptor and the run's shape.
 * Prefill rank i (TP rank i writes to TP rank i: each holds its shard of the KV heads) fills each
 * request's {@code layers x blocks} blocks with bytes that follow from (request, layer, block, offset)
 * and writes them into the request's slot in one transfer with one notification; decode verifies
 * every byte of the request, then frees the slot with a notification back, which is prefill's credit
 * for the request {@code window} later. Decode reports requests, bytes verified, wrong bytes, GB/s
 * (first to last notification) and p50/p99 per-request latency (prefill's send to decode's
 * notification, on one wall clock: meaningful on one host, or across network namespaces of one
 * host); prefill reports its own rate and the p50/p99 of its writes' completion. A wrong byte, a
 * refused transfer or a missed deadline fails the rank (exit 1).
 *
 * <p>Lines for tests: {@code demo --pd: decode rank R verified N requests, B bytes, wrong bytes W, ...}
 * and {@code demo --pd: prefill rank R wrote N requests, B bytes, ...}.
 */
final class PdDemo {

    /** Store keys of a run, under this prefix. */
    static final String KEY_PREFIX = "jcomm/pd-demo/";
    /** Most requests of one run (each is a slot in a bounded array of latencies). */
    static final int MAX_REQUESTS = 1 << 20;
    private static final long GOLDEN = 0x9E3779B97F4A7C15L;
    private static final byte[] NO_BYTES = new byte[0];

    /** The run's shape: both jobs must be given the same. */
    record Shape(int requests, int layers, int blocks, int blockBytes, int window) {

        /** Why this shape cannot run, or null. */
        String problem() {
            if (requests < 1 || requests > MAX_REQUESTS) {
                return "--requests must be 1.." + MAX_REQUESTS;
            }
            if (layers < 1 || blocks < 1 || window < 1 || blockBytes < 8 || blockBytes % 8 != 0) {
                return "--layers, --blocks and --window must be >= 1 and --block-bytes a positive multiple of 8";
            }
            if ((long) window * layers * blocks * blockBytes > Integer.MAX_VALUE) {
                return "the block pool (window x layers x blocks x block-bytes = "
                        + (long) window * layers * blocks * blockBytes + " bytes) must be below 2 GiB";
            }
            return null;
        }

        long requestBytes() {
            return (long) layers * blocks * blockBytes;
        }

        /** Offset in decode's pool of block {@code b} of layer {@code l} of slot {@code s}: pages interleaved. */
        long poolOffset(int s, int l, int b) {
            long pagesPerLayer = (long) window * blocks;
            return ((long) l * pagesPerLayer + (long) b * window + s) * blockBytes;
        }

        /** Offset in prefill's source of block {@code b} of layer {@code l} of slot {@code s}: contiguous. */
        long sourceOffset(int s, int l, int b) {
            return ((long) s * layers * blocks + (long) l * blocks + b) * blockBytes;
        }

        String encode() {
            return "requests=" + requests + " layers=" + layers + " blocks=" + blocks + " block-bytes=" + blockBytes
                    + " window=" + window;
        }
    }

    private final String role;
    private final String storeAddress;
    private final Shape shape;
    private final Duration timeout;
    private final PrintStream out;

    PdDemo(String role, String storeAddress, Shape shape, Duration timeout, PrintStream out) {
        this.role = role;
        this.storeAddress = storeAddress;
        this.shape = shape;
        this.timeout = timeout;
        this.out = out;
    }

    /** The first long of block (request, layer, block): every later long adds {@link #GOLDEN}. */
    static long seed(int request, int layer, int block) {
        long x = request * 0xBF58476D1CE4E5B9L ^ (layer + 1L) * 0x94D049BB133111EBL ^ (block + 1L) * 0xD6E8FEB86659FD93L;
        return x ^ (x >>> 31);
    }

    static void fill(ByteBuffer b, long offset, int length, long seed) {
        long v = seed;
        int end = (int) offset + length;
        for (int i = (int) offset; i < end; i += 8) {
            b.putLong(i, v);
            v += GOLDEN;
        }
    }

    /** Bytes of {@code [offset, offset + length)} that differ from {@link #fill}'s. */
    static long wrongBytes(ByteBuffer b, long offset, int length, long seed) {
        long v = seed;
        long wrong = 0;
        int end = (int) offset + length;
        for (int i = (int) offset; i < end; i += 8) {
            long got = b.getLong(i);
            if (got != v) {
                long x = got ^ v;
                for (int k = 0; k < 8; k++) {
                    if (((x >>> (8 * k)) & 0xff) != 0) {
                        wrong++;
                    }
                }
            }
            v += GOLDEN;
        }
        return wrong;
    }

    int run() {
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        String problem = shape.problem();
        if (problem != null) {
            System.err.println("demo --pd: " + problem);
            return 2;
        }
        if (!role.equals("prefill") && !role.equals("decode")) {
            System.err.println("demo --pd: the role is prefill or decode, not " + role);
            return 2;
        }
        String host = cfg.masterAddr();
        int port = cfg.masterPort();
        if (storeAddress != null) {
            int colon = storeAddress.lastIndexOf(':');
            if (colon <= 0 || !storeAddress.substring(colon + 1).matches("[0-9]{1,5}")) {
                System.err.println("demo --pd: --store is HOST:PORT, not " + storeAddress);
                return 2;
            }
            host = storeAddress.substring(0, colon);
            port = Integer.parseInt(storeAddress.substring(colon + 1));
        } else if (role.equals("prefill")) {
            System.err.println("demo --pd prefill: give --store HOST:PORT, the store where the decode job's agents are "
                    + "(its commrun's --master-addr and --master-port, or a standalone commstore)");
            return 2;
        }
        TcpStoreConfig.Builder sc = TcpStoreConfig.builder().host(host).port(port).timeout(timeout);
        cfg.tokenFile().ifPresent(sc::tokenFile);
        // the address the store's host reaches this process by (JCOMM_HOSTNAME when set)
        String listen = cfg.toBuilder().masterAddr(host).build().hostname();
        TransferOptions.Builder ob = TransferOptions.builder(agentName(role, cfg.rank())).namespace(KEY_PREFIX + "agents")
                .listenHost(listen).timeout(timeout);
        cfg.tokenFile().ifPresent(ob::tokenFile);
        try (TcpStore store = TcpStore.connect(sc.build());
             TransferAgent agent = TransferAgent.open(store, ob.build())) {
            return role.equals("decode") ? decode(cfg, store, agent) : prefill(cfg, store, agent);
        }
    }

    static String agentName(String role, int rank) {
        return "pd-" + role + "-" + rank;
    }

    private static String key(String what, int rank) {
        return KEY_PREFIX + what + "/" + rank;
    }

    // ------------------------------------------------------------------ decode

    private int decode(DistributedConfig cfg, Store store, TransferAgent agent) {
        int rank = cfg.rank();
        int window = shape.window();
        MemoryRegion pool = agent.allocateShared((int) (shape.requestBytes() * window), Set.of(Permission.WRITE));
        ByteBuffer mem = pool.buffer().order(ByteOrder.LITTLE_ENDIAN);
        store.deleteKey(key("prefill-done", rank));
        store.set(key("shape", rank), (shape.encode() + " world=" + cfg.worldSize()).getBytes(StandardCharsets.US_ASCII));
        store.set(key("pool", rank), pool.descriptor().encode());
        out.println("demo --pd: decode rank " + rank + " published a pool of " + pool.length() + " bytes (" + window
                + " request slots) as " + agent.name() + " via " + agent.transports());
        out.flush();
        String prefill = agentName("prefill", rank);
        long[] latencyMicros = new long[shape.requests()];
        boolean[] seen = new boolean[shape.requests()];
        TransferHandle[] frees = new TransferHandle[window];
        long wrong = 0;
        long firstArrival = 0;
        long lastArrival = 0;
        for (int n = 0; n < shape.requests(); n++) {
            Optional<Notification> got = agent.pollNotification(timeout);
            long arrival = epochMicros();
            if (got.isEmpty()) {
                throw new CommException(OpContext.of("demo-pd:decode", rank, "poll"),
                        "no request within " + timeout + " after " + n + " of " + shape.requests());
            }
            Notification note = got.get();
            ByteBuffer p = ByteBuffer.wrap(note.payload()).order(ByteOrder.LITTLE_ENDIAN);
            if (!note.from().equals(prefill) || p.remaining() != 16) {
                throw new IllegalStateException("demo --pd: decode rank " + rank + ": unexpected " + note + " (expected 16 bytes from "
                        + prefill + ")");
            }
            int request = (int) p.getLong();
            long sentMicros = p.getLong();
            if (request < 0 || request >= shape.requests() || seen[request]) {
                throw new IllegalStateException("demo --pd: decode rank " + rank + ": request " + request + " unexpected");
            }
            seen[request] = true;
            if (n == 0) {
                firstArrival = arrival;
            }
            lastArrival = arrival;
            latencyMicros[n] = arrival - sentMicros;
            int slot = request % window;
            long w = 0;
            for (int l = 0; l < shape.layers(); l++) {
                for (int b = 0; b < shape.blocks(); b++) {
                    w += wrongBytes(mem, shape.poolOffset(slot, l, b), shape.blockBytes(), seed(request, l, b));
                }
            }
            if (w != 0) {
                throw new IllegalStateException("demo --pd: decode rank " + rank + ": request " + request + " has " + w
                        + " wrong bytes");
            }
            wrong += w;
            // the slot is free again: prefill's credit for request + window
            if (frees[slot] != null) {
                frees[slot].await();
            }
            frees[slot] = agent.notify(prefill, longBytes(request), timeout);
        }
        for (TransferHandle h : frees) {
            if (h != null) {
                h.await();
            }
        }
        // prefill says when its last write completed on its side; then this agent may go
        store.get(key("prefill-done", rank), timeout);
        long bytes = shape.requestBytes() * shape.requests();
        double seconds = Math.max(1, lastArrival - firstArrival) / 1e6;
        long carried = shape.requestBytes() * (shape.requests() - 1L); // the first one starts the clock
        Arrays.sort(latencyMicros);
        out.printf(Locale.ROOT, "demo --pd: decode rank %d verified %d requests, %d bytes, wrong bytes %d, %.2f GB/s, "
                        + "latency p50 %.3f ms p99 %.3f ms (prefill send to decode notification)%n", rank, shape.requests(),
                bytes, wrong, shape.requests() > 1 ? carried / seconds / 1e9 : 0.0, percentile(latencyMicros, 50) / 1e3,
                percentile(latencyMicros, 99) / 1e3);
        out.flush();
        for (String k : List.of(key("shape", rank), key("pool", rank), key("prefill-done", rank))) {
            store.deleteKey(k);
        }
        agent.deregister(pool);
        return 0;
    }

    // ------------------------------------------------------------------ prefill

    private int prefill(DistributedConfig cfg, Store store, TransferAgent agent) {
        int rank = cfg.rank();
        int window = shape.window();
        String expected = shape.encode() + " world=" + cfg.worldSize();
        String theirs = new String(store.get(key("shape", rank), timeout), StandardCharsets.US_ASCII);
        if (!theirs.equals(expected)) {
            System.err.println("demo --pd prefill: rank " + rank + ": the decode job runs with " + theirs + ", this job with "
                    + expected + "; give both jobs the same options and sizes");
            return 2;
        }
        RemoteDescriptor pool = RemoteDescriptor.decode(store.get(key("pool", rank), timeout));
        MemoryRegion source = agent.register(ByteBuffer.allocateDirect((int) (shape.requestBytes() * window)), Set.of());
        ByteBuffer src = source.buffer().order(ByteOrder.LITTLE_ENDIAN);
        int descriptors = shape.layers() * shape.blocks();
        List<List<LocalDescriptor>> locals = new ArrayList<>();
        List<List<RemoteDescriptor>> remotes = new ArrayList<>();
        for (int s = 0; s < window; s++) {
            List<LocalDescriptor> l = new ArrayList<>(descriptors);
            List<RemoteDescriptor> r = new ArrayList<>(descriptors);
            for (int layer = 0; layer < shape.layers(); layer++) {
                for (int b = 0; b < shape.blocks(); b++) {
                    l.add(source.slice(shape.sourceOffset(s, layer, b), shape.blockBytes()));
                    r.add(pool.slice(shape.poolOffset(s, layer, b), shape.blockBytes()));
                }
            }
            locals.add(List.copyOf(l));
            remotes.add(List.copyOf(r));
        }
        out.println("demo --pd: prefill rank " + rank + " writes " + shape.requests() + " requests of " + shape.requestBytes()
                + " bytes into " + pool.agent() + " (" + descriptors + " blocks each, " + window + " in flight)");
        out.flush();
        boolean[] freed = new boolean[shape.requests()];
        long[] latencyNanos = new long[shape.requests()];
        List<CompletableFuture<Void>> recorded = new ArrayList<>(shape.requests());
        TransferHandle[] inFlight = new TransferHandle[window];
        long t0 = System.nanoTime();
        for (int r = 0; r < shape.requests(); r++) {
            int slot = r % window;
            if (r >= window) {
                awaitFree(agent, rank, freed, r - window);
                inFlight[slot].await();
            }
            for (int layer = 0; layer < shape.layers(); layer++) {
                for (int b = 0; b < shape.blocks(); b++) {
                    fill(src, shape.sourceOffset(slot, layer, b), shape.blockBytes(), seed(r, layer, b));
                }
            }
            byte[] note = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(r).putLong(epochMicros()).array();
            long issued = System.nanoTime();
            TransferHandle h = agent.write(locals.get(slot), remotes.get(slot), note, timeout);
            int request = r;
            recorded.add(h.toCompletableFuture().whenComplete((v, e) -> latencyNanos[request] = System.nanoTime() - issued));
            inFlight[slot] = h;
        }
        for (TransferHandle h : inFlight) {
            if (h != null) {
                h.await();
            }
        }
        long elapsed = System.nanoTime() - t0;
        for (int r = Math.max(0, shape.requests() - window); r < shape.requests(); r++) {
            awaitFree(agent, rank, freed, r); // decode verified everything: nothing of ours is in use there
        }
        store.set(key("prefill-done", rank), NO_BYTES);
        long bytes = shape.requestBytes() * shape.requests();
        for (CompletableFuture<Void> f : recorded) {
            f.orTimeout(timeout.toMillis(), TimeUnit.MILLISECONDS).join(); // each latency is written
        }
        long[] sorted = latencyNanos.clone();
        Arrays.sort(sorted);
        out.printf(Locale.ROOT, "demo --pd: prefill rank %d wrote %d requests, %d bytes, %.2f GB/s (fill, write, credit), "
                        + "write p50 %.3f ms p99 %.3f ms (issue to completion)%n", rank, shape.requests(), bytes,
                bytes / (elapsed / 1e9) / 1e9, percentile(sorted, 50) / 1e6, percentile(sorted, 99) / 1e6);
        out.flush();
        agent.deregister(source);
        return 0;
    }

    /** Takes decode's slot-free notifications until request {@code r}'s slot is free. */
    private void awaitFree(TransferAgent agent, int rank, boolean[] freed, int r) {
        String decode = agentName("decode", rank);
        while (!freed[r]) {
            Notification n = agent.pollNotification(timeout).orElseThrow(() -> new CommException(
                    OpContext.of("demo-pd:prefill", rank, "credit"),
                    "decode freed no slot within " + timeout + " (waiting for request " + r + ")"));
            byte[] p = n.payload();
            if (!n.from().equals(decode) || p.length != 8) {
                throw new IllegalStateException("demo --pd: prefill rank " + rank + ": unexpected " + n);
            }
            long freedRequest = ByteBuffer.wrap(p).order(ByteOrder.LITTLE_ENDIAN).getLong();
            if (freedRequest < 0 || freedRequest >= freed.length) {
                throw new IllegalStateException("demo --pd: prefill rank " + rank + ": decode freed request " + freedRequest);
            }
            freed[(int) freedRequest] = true;
        }
    }

    private static byte[] longBytes(long v) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(v).array();
    }

    private static long epochMicros() {
        Instant now = Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    static long percentile(long[] sorted, int p) {
        if (sorted.length == 0) {
            return 0;
        }
        int i = (int) Math.ceil(p / 100.0 * sorted.length) - 1;
        return sorted[Math.max(0, Math.min(sorted.length - 1, i))];
    }
}
