package io.jcomm.tools.demo;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.store.Store;
import io.jcomm.transfer.LocalDescriptor;
import io.jcomm.transfer.MemoryRegion;
import io.jcomm.transfer.Notification;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import io.jcomm.transfer.TransferAgent;
import io.jcomm.transfer.TransferHandle;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
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
    /** The mark prefill sets when its last write completed on its side. */
    private static final String DONE = "prefill-done";

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

    /** The first long of block (request, layer, block) ({@link BytePattern}). */
    static long seed(int request, int layer, int block) {
        return BytePattern.seed(request, layer, block);
    }

    int run() {
        String problem = shape.problem();
        if (problem != null) {
            System.err.println("demo --pd: " + problem);
            return 2;
        }
        if (!role.equals("prefill") && !role.equals("decode")) {
            System.err.println("demo --pd: the role is prefill or decode, not " + role);
            return 2;
        }
        int world = DistributedConfig.fromEnvironment().worldSize();
        return DemoLink.run("pd", KEY_PREFIX, role, "decode", storeAddress, timeout,
                link -> role.equals("decode") ? decode(link, world) : prefill(link, world));
    }

    // ------------------------------------------------------------------ decode

    private int decode(DemoLink link, int world) {
        int rank = link.rank();
        TransferAgent agent = link.agent();
        Store store = link.store();
        int window = shape.window();
        MemoryRegion pool = agent.allocateShared((int) (shape.requestBytes() * window), Set.of(Permission.WRITE));
        ByteBuffer mem = pool.buffer().order(ByteOrder.LITTLE_ENDIAN);
        link.clearDone(DONE, rank);
        link.publishShape(shape.encode() + " world=" + world);
        store.set(link.key("pool", rank), pool.descriptor().encode());
        out.println("demo --pd: decode rank " + rank + " published a pool of " + pool.length() + " bytes (" + window
                + " request slots) as " + agent.name() + " via " + agent.transports());
        out.flush();
        String prefill = link.agentName("prefill", rank);
        long[] latencyMicros = new long[shape.requests()];
        boolean[] seen = new boolean[shape.requests()];
        TransferHandle[] frees = new TransferHandle[window];
        long wrong = 0;
        long firstArrival = 0;
        long lastArrival = 0;
        for (int n = 0; n < shape.requests(); n++) {
            Notification note = link.next("request " + n + " of " + shape.requests() + " from " + prefill);
            long arrival = DemoLink.epochMicros();
            ByteBuffer p = link.payload(note, prefill, 16);
            int request = (int) p.getLong();
            long sentMicros = p.getLong();
            if (request < 0 || request >= shape.requests() || seen[request]) {
                throw new IllegalStateException(link.who() + ": request " + request + " unexpected");
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
                    w += BytePattern.wrongBytes(mem, shape.poolOffset(slot, l, b), shape.blockBytes(), seed(request, l, b));
                }
            }
            if (w != 0) {
                throw new IllegalStateException(link.who() + ": request " + request + " has " + w + " wrong bytes");
            }
            wrong += w;
            // the slot is free again: prefill's credit for request + window
            if (frees[slot] != null) {
                frees[slot].await();
            }
            frees[slot] = agent.notify(prefill, DemoLink.longs(request), timeout);
        }
        for (TransferHandle h : frees) {
            if (h != null) {
                h.await();
            }
        }
        // prefill says when its last write completed on its side; then this agent may go
        link.awaitDone(DONE, rank);
        long bytes = shape.requestBytes() * shape.requests();
        double seconds = Math.max(1, lastArrival - firstArrival) / 1e6;
        long carried = shape.requestBytes() * (shape.requests() - 1L); // the first one starts the clock
        Arrays.sort(latencyMicros);
        out.printf(Locale.ROOT, "demo --pd: decode rank %d verified %d requests, %d bytes, wrong bytes %d, %.2f GB/s, "
                        + "latency p50 %.3f ms p99 %.3f ms (prefill send to decode notification)%n", rank, shape.requests(),
                bytes, wrong, shape.requests() > 1 ? carried / seconds / 1e9 : 0.0,
                DemoLink.percentile(latencyMicros, 50) / 1e3, DemoLink.percentile(latencyMicros, 99) / 1e3);
        out.flush();
        for (String k : List.of(link.key("shape", rank), link.key("pool", rank))) {
            store.deleteKey(k);
        }
        link.clearDone(DONE, rank);
        agent.deregister(pool);
        return 0;
    }

    // ------------------------------------------------------------------ prefill

    private int prefill(DemoLink link, int world) {
        int rank = link.rank();
        TransferAgent agent = link.agent();
        int window = shape.window();
        String expected = shape.encode() + " world=" + world;
        String theirs = link.shapeOf(rank);
        if (!theirs.equals(expected)) {
            System.err.println("demo --pd prefill: rank " + rank + ": the decode job runs with " + theirs + ", this job with "
                    + expected + "; give both jobs the same options and sizes");
            return 2;
        }
        RemoteDescriptor pool = RemoteDescriptor.decode(link.getKey(link.key("pool", rank), "pool of decode rank " + rank));
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
                awaitFree(link, freed, r - window);
                inFlight[slot].await();
            }
            for (int layer = 0; layer < shape.layers(); layer++) {
                for (int b = 0; b < shape.blocks(); b++) {
                    BytePattern.fill(src, shape.sourceOffset(slot, layer, b), shape.blockBytes(), seed(r, layer, b));
                }
            }
            byte[] note = DemoLink.longs(r, DemoLink.epochMicros());
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
            awaitFree(link, freed, r); // decode verified everything: nothing of ours is in use there
        }
        link.markDone(DONE, rank);
        long bytes = shape.requestBytes() * shape.requests();
        for (CompletableFuture<Void> f : recorded) {
            f.orTimeout(timeout.toMillis(), TimeUnit.MILLISECONDS).join(); // each latency is written
        }
        long[] sorted = latencyNanos.clone();
        Arrays.sort(sorted);
        out.printf(Locale.ROOT, "demo --pd: prefill rank %d wrote %d requests, %d bytes, %.2f GB/s (fill, write, credit), "
                        + "write p50 %.3f ms p99 %.3f ms (issue to completion)%n", rank, shape.requests(), bytes,
                bytes / (elapsed / 1e9) / 1e9, DemoLink.percentile(sorted, 50) / 1e6, DemoLink.percentile(sorted, 99) / 1e6);
        out.flush();
        agent.deregister(source);
        return 0;
    }

    /** Takes decode's slot-free notifications until request {@code r}'s slot is free. */
    private static void awaitFree(DemoLink link, boolean[] freed, int r) {
        String decode = link.agentName("decode", link.rank());
        while (!freed[r]) {
            long freedRequest = link.payload(link.next("decode's credit for request " + r), decode, 8).getLong();
            if (freedRequest < 0 || freedRequest >= freed.length) {
                throw new IllegalStateException(link.who() + ": decode freed request " + freedRequest);
            }
            freed[(int) freedRequest] = true;
        }
    }
}
