package io.jcomm.examples.llama;

import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.OpContext;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import io.jcomm.parallel.ParallelState;
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
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Prefill/decode disaggregation: two jobs of the same TP x PP layout, each under its own launcher,
 * whose ranks meet pairwise (rank r of one with rank r of the other: the same layers and KV heads) in
 * the decode job's store through kv-transfer agents:
 *
 * <pre>
 * bin/commrun --nproc-per-node 2 --master-port 29710 model --tp 2 --pd decode
 * bin/commrun --nproc-per-node 2 model --tp 2 --pd prefill --store 127.0.0.1:29710
 * </pre>
 *
 * <ul>
 *   <li>decode rank r allocates a shared region of {@code --slots} KV caches of {@code --max-seq}
 *       positions and publishes its descriptor and its shape (model, layout, its shard);</li>
 *   <li>prefill rank r checks the shape, runs each prompt through its shard into its own registered
 *       cache, and writes the prompt's KV blocks ({@code --block-tokens} positions of one layer's keys
 *       or values each) straight into the request's slot of decode rank r's cache, one transfer with
 *       one notification that carries the request, its length and the first token (prefill samples
 *       it, as vLLM's prefill instances do);</li>
 *   <li>decode continues each request from that token over the transferred cache, and frees the slot
 *       with a notification back: prefill's credit to reuse it.</li>
 * </ul>
 *
 * Decode rank 0 prints {@code llama: request I tokens ...} (the first token included) and the decode
 * figures; with {@code --reference} both jobs check against torch. Every wait has the job's deadline.
 */
final class Disaggregated {

    static final String KEY_PREFIX = "jcomm/llama-pd/";
    private static final long REQUEST = 1;
    private static final long END = 2;
    private static final long CREDIT = 3;

    private final DemoOptions o;
    private final DistributedConfig cfg;
    private final ParallelState ps;
    private final Path dir;
    private final PrintStream out;
    private final Duration timeout;

    Disaggregated(DemoOptions o, DistributedConfig cfg, ParallelState ps, Path dir, PrintStream out) {
        this.o = o;
        this.cfg = cfg;
        this.ps = ps;
        this.dir = dir;
        this.out = out;
        this.timeout = cfg.timeout();
    }

    int run() {
        String host = cfg.masterAddr();
        int port = cfg.masterPort();
        if (o.store != null) {
            int colon = o.store.lastIndexOf(':');
            if (colon <= 0 || !o.store.substring(colon + 1).matches("[0-9]{1,5}")) {
                System.err.println("llama --pd: --store is HOST:PORT, not " + o.store);
                return 2;
            }
            host = o.store.substring(0, colon);
            port = Integer.parseInt(o.store.substring(colon + 1));
        } else if (o.pd.equals("prefill")) {
            System.err.println("llama --pd prefill: give --store HOST:PORT, the decode job's store (its commrun's "
                    + "--master-addr and --master-port)");
            return 2;
        }
        CommClock clock = new CommClock();
        LlamaModel model = LlamaModel.load(dir, ps, clock);
        if (o.warmup > 0) {
            // the JIT compiles the loops before anything is timed (both jobs, each on its own)
            List<Request> warmup = Request.defaults(1, o.warmup, model.plan().config().vocab());
            new Engine(ps, model, 0).run(warmup, SingleProcess.capacity(warmup));
        }
        TcpStoreConfig.Builder sc = TcpStoreConfig.builder().host(host).port(port).timeout(timeout);
        cfg.tokenFile().ifPresent(sc::tokenFile);
        String listen = cfg.toBuilder().masterAddr(host).build().hostname();
        TransferOptions.Builder ob = TransferOptions.builder(agentName(o.pd, ps.rank())).namespace(KEY_PREFIX + "agents")
                .listenHost(listen).timeout(timeout);
        cfg.tokenFile().ifPresent(ob::tokenFile);
        try (TcpStore store = TcpStore.connect(sc.build());
             TransferAgent agent = TransferAgent.open(store, ob.build())) {
            return o.pd.equals("decode") ? decode(model, store, agent) : prefill(model, store, agent);
        }
    }

    static String agentName(String role, int rank) {
        return "llama-" + role + "-" + rank;
    }

    private static String key(String what, int rank) {
        return KEY_PREFIX + what + "/" + rank;
    }

    /** What both ranks of a pair must agree on. */
    private String shape(LlamaModel model) {
        return model.plan().config() + "; " + model.plan() + "; capacity " + o.maxSeq + "; slots " + o.slots;
    }

    private long cacheBytes(LlamaModel model) {
        long bytes = KvCache.bytes(model.plan().localLayers(), o.maxSeq, model.plan().kvRowFloats());
        if (bytes * o.slots > Integer.MAX_VALUE - 64) {
            throw new IllegalArgumentException("--slots " + o.slots + " x a KV cache of " + bytes + " bytes is beyond one "
                    + "region (2 GiB); lower --max-seq or --slots");
        }
        return bytes;
    }

    // ------------------------------------------------------------------ decode

    private int decode(LlamaModel model, TcpStore store, TransferAgent agent) {
        int rank = ps.rank();
        String prefill = agentName("prefill", rank);
        long bytes = cacheBytes(model);
        MemoryRegion pool = agent.allocateShared((int) (bytes * o.slots), Set.of(Permission.WRITE));
        KvCache[] caches = new KvCache[o.slots];
        for (int s = 0; s < o.slots; s++) {
            caches[s] = KvCache.over(pool.buffer().slice((int) (s * bytes), (int) bytes), model.plan(), o.maxSeq);
        }
        store.deleteKey(key("done", rank));
        store.set(key("shape", rank), shape(model).getBytes(StandardCharsets.UTF_8));
        store.set(key("pool", rank), pool.descriptor().encode());
        out.println("llama --pd: decode rank " + rank + " published a KV pool of " + pool.length() + " bytes (" + o.slots
                + " slots of " + o.maxSeq + " positions) as " + agent.name() + " via " + agent.transports());
        out.flush();

        CommClock clock = model.clock();
        Engine.Result result = new Engine.Result();
        long[] steps = new long[256];
        int nSteps = 0;
        Map<Integer, long[]> arrived = new TreeMap<>();
        List<TransferHandle> credits = new ArrayList<>();
        int total = -1;
        int next = 0;
        long begin = System.nanoTime();
        while (total < 0 || next < total) {
            long[] req = arrived.remove(next);
            if (req == null) {
                long[] p = payload(next(agent, "request " + next + " from " + prefill), prefill);
                if (p[0] == REQUEST && p.length == 6) {
                    arrived.put((int) p[1], p);
                } else if (p[0] == END && p.length == 2) {
                    total = (int) p[1];
                } else {
                    throw new IllegalStateException(who("decode") + ": unexpected notification " + Arrays.toString(p));
                }
                continue;
            }
            int request = (int) req[1];
            int promptLength = (int) req[2];
            int maxNew = (int) req[4];
            int slot = (int) req[5];
            if (slot < 0 || slot >= o.slots || promptLength < 1 || maxNew < 1 || promptLength + maxNew > o.maxSeq) {
                throw new IllegalStateException(who("decode") + ": request " + Arrays.toString(req) + " does not fit "
                        + o.slots + " slots of " + o.maxSeq + " positions");
            }
            int[] generated = new int[maxNew];
            generated[0] = (int) req[3];
            for (int k = 1; k < maxNew; k++) {
                long t0 = System.nanoTime();
                long[] c0 = clock.snapshot();
                generated[k] = model.step(new int[] {generated[k - 1]}, promptLength + k - 1, caches[slot]);
                if (nSteps == steps.length) {
                    steps = Arrays.copyOf(steps, nSteps * 2);
                }
                steps[nSteps++] = System.nanoTime() - t0;
                long[] c1 = clock.snapshot();
                for (int i = 0; i < c1.length; i++) {
                    result.decodeCommNanos[i] += c1[i] - c0[i];
                }
            }
            result.tokens.put(request, generated);
            credits.add(agent.notify(prefill, longs(CREDIT, request), timeout));
            next++;
        }
        for (TransferHandle h : credits) {
            h.await();
        }
        result.wallNanos = System.nanoTime() - begin;
        result.decodeStepNanos = Arrays.copyOf(steps, nSteps);
        // prefill has all its credits when it says so; only then may this agent and its region go
        awaitKey(store, key("done", rank), "prefill rank " + rank + "'s last credit");
        for (String k : List.of(key("shape", rank), key("pool", rank), key("done", rank))) {
            store.deleteKey(k);
        }
        agent.deregister(pool);

        double[][] stats = LlamaDemo.gatherStats(ps, result);
        boolean ok = true;
        if (rank == 0) {
            for (Map.Entry<Integer, int[]> e : result.tokens.entrySet()) {
                out.println("llama: request " + e.getKey() + " tokens " + LlamaDemo.join(e.getValue()));
            }
            LlamaDemo.report(ps, stats, result, out);
        }
        if (o.reference != null) {
            Reference ref = Reference.read(o.reference);
            Reference.Comparison c = ref.compare(result.tokens, Map.of());
            if (rank == 0) {
                out.println("llama: torch reference (decode job; the first token of each request is prefill's): " + c);
            }
            ok = c.ok() && c.requests() == ref.requests().size();
        }
        if (rank == 0) {
            out.println(ok ? "llama: OK" : "llama: FAILED");
        }
        out.flush();
        return ok ? 0 : 1;
    }

    // ------------------------------------------------------------------ prefill

    private int prefill(LlamaModel model, TcpStore store, TransferAgent agent) {
        int rank = ps.rank();
        String decode = agentName("decode", rank);
        String theirs = new String(awaitKey(store, key("shape", rank), "decode rank " + rank + "'s shape"),
                StandardCharsets.UTF_8);
        if (!theirs.equals(shape(model))) {
            System.err.println("llama --pd prefill: rank " + rank + ": the decode job runs " + theirs + ", this job "
                    + shape(model) + "; give both jobs the same model, layout, --max-seq and --slots");
            return 2;
        }
        RemoteDescriptor pool = RemoteDescriptor.decode(awaitKey(store, key("pool", rank), "decode rank " + rank + "'s pool"));
        long bytes = cacheBytes(model);
        MemoryRegion local = agent.register(ByteBuffer.allocateDirect((int) bytes), Set.of());
        KvCache cache = KvCache.over(local.buffer(), model.plan(), o.maxSeq);
        LlamaConfig c = model.plan().config();
        Reference ref = o.reference == null ? null : Reference.read(o.reference);
        List<Request> requests = ref != null ? ref.asRequests() : Request.defaults(o.prompts, o.tokens, c.vocab());
        Map<Integer, int[]> firsts = new LinkedHashMap<>();
        boolean[] freed = new boolean[requests.size()];
        long prefillNanos = 0;
        long[] writeNanos = new long[requests.size()];
        long kvBytes = 0;
        int blocks = 0;
        for (int n = 0; n < requests.size(); n++) {
            Request r = requests.get(n);
            if (r.positions() > o.maxSeq) {
                throw new IllegalArgumentException(r + " needs " + r.positions() + " positions; --max-seq is " + o.maxSeq);
            }
            int slot = n % o.slots;
            if (n >= o.slots) {
                awaitCredit(agent, decode, freed, n - o.slots);
            }
            long t0 = System.nanoTime();
            int first = model.step(r.prompt(), 0, cache);
            long t1 = System.nanoTime();
            prefillNanos += t1 - t0;
            firsts.put(n, new int[] {first});
            int p = r.prompt().length;
            List<LocalDescriptor> from = new ArrayList<>();
            List<RemoteDescriptor> to = new ArrayList<>();
            for (int l = 0; l < cache.layers(); l++) {
                for (int plane = KvCache.KEYS; plane <= KvCache.VALUES; plane++) {
                    for (int b = 0; b * o.blockTokens < p; b++) {
                        for (int head = 0; head < cache.heads(); head++) {
                            long off = cache.byteOffset(l, plane, head, b * o.blockTokens);
                            long len = cache.headRowBytes(Math.min(o.blockTokens, p - b * o.blockTokens));
                            from.add(local.slice(off, len));
                            to.add(pool.slice(slot * bytes + off, len));
                            kvBytes += len;
                        }
                        blocks++;
                    }
                }
            }
            TransferHandle h = agent.write(from, to, longs(REQUEST, n, p, first, r.maxNewTokens(), slot), timeout);
            h.await(); // this rank's cache is the next prompt's
            writeNanos[n] = System.nanoTime() - t1;
        }
        agent.notify(decode, longs(END, requests.size()), timeout).await();
        for (int n = Math.max(0, requests.size() - o.slots); n < requests.size(); n++) {
            awaitCredit(agent, decode, freed, n);
        }
        store.set(key("done", rank), new byte[0]);
        agent.deregister(local);
        long[] sorted = writeNanos.clone();
        Arrays.sort(sorted);
        out.printf(Locale.ROOT, "llama --pd: prefill rank %d ran %d prompts (%.1f ms each) and wrote %d KV blocks, %d bytes, "
                        + "into %s: write p50 %.3f ms, p99 %.3f ms (issue to completion, with the notification)%n", rank,
                requests.size(), prefillNanos / 1e6 / Math.max(1, requests.size()), blocks, kvBytes, decode,
                LlamaDemo.percentile(sorted, 50) / 1e6, LlamaDemo.percentile(sorted, 99) / 1e6);
        boolean ok = true;
        if (ref != null) {
            for (Map.Entry<Integer, int[]> e : firsts.entrySet()) {
                ok &= ref.requests().get(e.getKey()).tokens()[0] == e.getValue()[0];
            }
            if (rank == 0) {
                out.println("llama: torch reference (prefill job, first tokens): " + (ok ? "equal" : "DIFFER"));
            }
        }
        out.flush();
        return ok ? 0 : 1;
    }

    /** Takes decode's credits until request {@code n}'s slot is free. */
    private void awaitCredit(TransferAgent agent, String decode, boolean[] freed, int n) {
        while (!freed[n]) {
            long[] p = payload(next(agent, "decode's credit for request " + n), decode);
            if (p[0] != CREDIT || p.length != 2 || p[1] < 0 || p[1] >= freed.length) {
                throw new IllegalStateException(who("prefill") + ": unexpected notification " + Arrays.toString(p));
            }
            freed[(int) p[1]] = true;
        }
    }

    private Notification next(TransferAgent agent, String waitingFor) {
        return agent.pollNotification(timeout).orElseThrow(() -> new CommTimeoutException(
                OpContext.of("llama-pd:" + o.pd, ps.rank(), "notification"),
                who(o.pd) + ": no notification within " + timeout + " (waiting for " + waitingFor + ")"));
    }

    private byte[] awaitKey(TcpStore store, String key, String what) {
        try {
            return store.get(key, timeout);
        } catch (CommTimeoutException e) {
            throw new CommTimeoutException(OpContext.of("llama-pd:" + o.pd, ps.rank(), "store"), who(o.pd) + ": no " + what
                    + " (store key " + key + ") within " + timeout + "; is the other job running?", e);
        }
    }

    private String who(String role) {
        return "llama --pd " + role + " rank " + ps.rank();
    }

    private long[] payload(Notification n, String from) {
        byte[] b = n.payload();
        if (!n.from().equals(from) || b.length == 0 || b.length % 8 != 0 || b.length > 64) {
            throw new IllegalStateException(who(o.pd) + ": unexpected " + n + " (expected one from " + from + ")");
        }
        ByteBuffer buf = ByteBuffer.wrap(b).order(ByteOrder.LITTLE_ENDIAN);
        long[] out = new long[b.length / 8];
        for (int i = 0; i < out.length; i++) {
            out[i] = buf.getLong();
        }
        return out;
    }

    private static byte[] longs(long... values) {
        ByteBuffer b = ByteBuffer.allocate(8 * values.length).order(ByteOrder.LITTLE_ENDIAN);
        for (long v : values) {
            b.putLong(v);
        }
        return b.array();
    }
}
