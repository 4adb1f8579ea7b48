package io.jcomm.examples.llama;

import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.OpContext;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import io.jcomm.kvcache.BlockHasher;
import io.jcomm.kvcache.HostBlockIndex;
import io.jcomm.kvcache.IndexOptions;
import io.jcomm.parallel.ParallelState;
import io.jcomm.transfer.TransferAgent;
import io.jcomm.transfer.TransferOptions;
import java.io.IOException;
import java.io.InputStream;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.Locale;
import java.util.Optional;

/**
 * What one rank of the demo opens to reuse cached prefixes ({@code --prefix-cache}): a connection to
 * the store the jobs sharing blocks meet in ({@code --store}, else the job's own), its transfer agents
 * (one for its block pool and reads, one for the KV events of other hosts), the host's block index
 * (opened in the background: {@link IndexOptions#fromEnvironment()}), the model's identity, and the
 * {@link PrefixCache}. Closing it withdraws this rank's blocks everywhere and closes all of them.
 */
final class KvReuse implements AutoCloseable {

    private final TcpStore store;
    private final TransferAgent agent;
    private final TransferAgent subscriberAgent;
    private final HostBlockIndex index;
    private final PrefixCache cache;
    private final Duration timeout;
    private final String instance;

    private KvReuse(TcpStore store, TransferAgent agent, TransferAgent subscriberAgent, HostBlockIndex index, PrefixCache cache,
                    Duration timeout, String instance) {
        this.store = store;
        this.agent = agent;
        this.subscriberAgent = subscriberAgent;
        this.index = index;
        this.cache = cache;
        this.timeout = timeout;
        this.instance = instance;
    }

    static KvReuse open(DemoOptions o, DistributedConfig cfg, ParallelState ps, LlamaModel model, Path modelDir) {
        String host = cfg.masterAddr();
        int port = cfg.masterPort();
        if (o.store != null) {
            int colon = o.store.lastIndexOf(':');
            if (colon <= 0 || !o.store.substring(colon + 1).matches("[0-9]{1,5}")) {
                throw new IllegalArgumentException("--store is HOST:PORT, not " + o.store);
            }
            host = o.store.substring(0, colon);
            port = Integer.parseInt(o.store.substring(colon + 1));
        }
        String instance = o.kvInstance != null ? o.kvInstance : cfg.jobId();
        if (!instance.matches("[A-Za-z0-9_.:-]{1,64}")) {
            throw new IllegalArgumentException("the KV instance name (--kv-instance, else the job id) is 1..64 characters of "
                    + "[A-Za-z0-9_.:-], not " + instance);
        }
        Duration timeout = cfg.timeout();
        // the index opens on its own thread while the rest is set up (its first open takes seconds)
        HostBlockIndex index = IndexOptions.fromEnvironment().map(HostBlockIndex::openInBackground).orElse(null);
        TcpStore store = null;
        TransferAgent agent = null;
        TransferAgent sub = null;
        try {
            TcpStoreConfig.Builder sc = TcpStoreConfig.builder().host(host).port(port).timeout(timeout);
            cfg.tokenFile().ifPresent(sc::tokenFile);
            store = TcpStore.connect(sc.build());
            String listen = cfg.toBuilder().masterAddr(host).build().hostname();
            agent = TransferAgent.open(store, agentOptions("llama-kv-" + instance + "-" + ps.rank(), listen, cfg));
            if (o.kvEvents) {
                sub = TransferAgent.open(store, agentOptions("llama-kvsub-" + instance + "-" + ps.rank(), listen, cfg));
            }
            BlockHasher hasher = new BlockHasher(identity(modelDir), o.blockTokens);
            PrefixCache cache = new PrefixCache(model.plan(), hasher, agent, o.kvBlocks, instance, index, sub, store,
                    cfg.hostId(), timeout);
            return new KvReuse(store, agent, sub, index, cache, timeout, instance);
        } catch (RuntimeException e) {
            closeQuietly(sub);
            closeQuietly(agent);
            closeQuietly(store);
            closeQuietly(index);
            throw e;
        }
    }

    private static TransferOptions agentOptions(String name, String listen, DistributedConfig cfg) {
        TransferOptions.Builder b = TransferOptions.builder(name).namespace(PrefixCache.NAMESPACE + "/agents").listenHost(listen)
                .timeout(cfg.timeout());
        cfg.tokenFile().ifPresent(b::tokenFile);
        return b.build();
    }

    PrefixCache cache() {
        return cache;
    }

    /**
     * Before a timed run: waits (within the job's deadline) for the host index to be open and for the
     * snapshots of every publisher listed now, so that the run sees every block already stored; prints
     * what it waited for on {@code out} when {@code print}.
     */
    void ready(PrintStream out, boolean print) {
        long t0 = System.nanoTime();
        boolean indexOpen = index == null || index.awaitOpen(timeout);
        long t1 = System.nanoTime();
        int publishers = 0;
        boolean snapshots = true;
        if (cache.subscriber() != null) {
            List<String> p = cache.subscriber().publishers(timeout);
            publishers = p.size();
            snapshots = cache.subscriber().awaitSnapshots(p, timeout);
        }
        if (print) {
            out.printf(Locale.ROOT, "llama: kv: host index %s%s; waited %.2f s for it, %.2f s for the snapshots of %d "
                            + "publishers%s%n", index == null ? "off" : index.options().file(),
                    index == null ? "" : indexOpen ? index.openTime().map(d -> String.format(Locale.ROOT,
                            " (its first open here took %.2f s, off the start-up path)", d.toNanos() / 1e9)).orElse("")
                            : " NOT OPEN", (t1 - t0) / 1e9, (System.nanoTime() - t1) / 1e9, publishers,
                    snapshots ? "" : " (not all came)");
        }
    }

    /** Keeps serving this rank's blocks until a job run with {@code --kv-release} ends, within the deadline. */
    void hold(PrintStream out, int rank) {
        out.println("llama: kv: rank " + rank + " holds " + cache.held() + " blocks until released");
        out.flush();
        // polled, not one blocking get: the event publisher shares this store connection meanwhile
        long end = System.nanoTime() + timeout.toNanos();
        while (!store.check(List.of(releaseKey()))) {
            if (System.nanoTime() - end > 0) {
                throw new CommTimeoutException(OpContext.of("llama-kv", rank, "hold"), "no --kv-release job ended within "
                        + timeout + " (store key " + releaseKey() + ")");
            }
            try {
                Thread.sleep(50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CommTimeoutException(OpContext.of("llama-kv", rank, "hold"), "interrupted while holding");
            }
        }
    }

    /** Lets the jobs holding their blocks ({@code --kv-hold}) end. */
    void release() {
        store.set(releaseKey(), new byte[0]);
    }

    private static String releaseKey() {
        return PrefixCache.NAMESPACE + "/release";
    }

    String instance() {
        return instance;
    }

    @Override
    public void close() {
        try {
            cache.close();
        } finally {
            closeQuietly(subscriberAgent);
            closeQuietly(agent);
            closeQuietly(index);
            closeQuietly(store);
        }
    }

    private static void closeQuietly(AutoCloseable c) {
        if (c == null) {
            return;
        }
        try {
            c.close();
        } catch (Exception e) {
            // closing the rest matters more
        }
    }

    /**
     * The model's identity for block names: {@code llama:} and the SHA-256 of {@code config.json} and of
     * {@code model.safetensors} (cached next to the weights in {@code model.safetensors.sha256}, keyed by the
     * file's size and modification time, written atomically).
     */
    static String identity(Path dir) {
        try {
            Path weights = dir.resolve("model.safetensors");
            String stamp = Files.size(weights) + " " + Files.getLastModifiedTime(weights).toMillis();
            Path side = dir.resolve("model.safetensors.sha256");
            String weightsHash = null;
            if (Files.isRegularFile(side) && Files.size(side) < 256) {
                String[] f = Files.readString(side, StandardCharsets.US_ASCII).trim().split(" ");
                if (f.length == 3 && (f[0] + " " + f[1]).equals(stamp) && f[2].matches("[0-9a-f]{64}")) {
                    weightsHash = f[2];
                }
            }
            if (weightsHash == null) {
                weightsHash = sha256(weights);
                Path tmp = Files.createTempFile(dir, "sha256", ".tmp");
                Files.writeString(tmp, stamp + " " + weightsHash + "\n", StandardCharsets.US_ASCII);
                Files.move(tmp, side, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            }
            return "llama:" + sha256(dir.resolve("config.json")).substring(0, 16) + ":" + weightsHash;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot name the model in " + dir, e);
        }
    }

    private static String sha256(Path file) throws IOException {
        try (InputStream in = Files.newInputStream(file)) {
            MessageDigest d = MessageDigest.getInstance("SHA-256");
            byte[] buf = new byte[1 << 20];
            int n;
            while ((n = in.read(buf)) > 0) {
                d.update(buf, 0, n);
            }
            return HexFormat.of().formatHex(d.digest());
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JVM has SHA-256", e);
        }
    }

    static Optional<String> describe(PrefixCache.Stats s) {
        return Optional.of(String.format(Locale.ROOT, "stored %d blocks (evicted %d), read %d from this rank's pool and %d "
                        + "from others (%d re-split over KV heads, %.1f KB), %d checksum and %d transfer failures",
                s.blocksStored, s.blocksEvicted, s.blocksReadLocal, s.blocksReadRemote, s.resplitBlocks, s.bytesRead / 1e3,
                s.checksumFailures, s.transferFailures));
    }
}
