package io.jcomm.examples.llama;

import io.jcomm.api.CommException;
import io.jcomm.api.store.Store;
import io.jcomm.kvcache.BlockHash;
import io.jcomm.kvcache.BlockHasher;
import io.jcomm.kvcache.BlockLayout;
import io.jcomm.kvcache.BlockLocation;
import io.jcomm.kvcache.BlockLocator;
import io.jcomm.kvcache.BlockOwner;
import io.jcomm.kvcache.HostBlockIndex;
import io.jcomm.kvcache.KvEvent;
import io.jcomm.kvcache.KvEventPublisher;
import io.jcomm.kvcache.KvEventSubscriber;
import io.jcomm.kvcache.KvSlice;
import io.jcomm.kvcache.PrefixTree;
import io.jcomm.transfer.LocalDescriptor;
import io.jcomm.transfer.MemoryRegion;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import io.jcomm.transfer.TransferAgent;
import io.jcomm.transfer.TransferHandle;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.zip.CRC32C;

/**
 * One rank's prefix cache: the KV blocks of the prompts it ran, kept in a pool of registered shared
 * memory and announced to the host's block index and, as KV events, to other hosts; and the reads of
 * a new prompt's cached prefix from wherever its blocks are (this pool, another process or job of
 * this host, another host) straight into the sequence's KV cache with kv-transfer.
 *
 * <p>A block is {@code blockTokens} positions of this rank's slice of the cache (its pipeline stage's
 * layers, its share of the KV heads), named by its prefix hash and that slice
 * ({@link BlockHasher#blockKey}), laid out as {@link BlockLayout} says. A rank that needs other heads
 * than the blocks' owner had (another TP size) reads each head it owns from the block that holds it:
 * for a block it looks for the slices of its own TP size first, then of every other TP size that
 * divides the KV heads, and takes the first set that covers its heads ("the re-split"). Layer ranges
 * must be equal (the same PP layout).
 *
 * <p>Each read is checked against the head checksums the owner published: a block recycled between
 * the lookup and the read fails the check and is computed instead. The pool evicts its least recently
 * used block when full, withdrawing it from the index and announcing its removal first.
 *
 * <p>Not thread safe: one per rank, used by its engine thread (the event publisher reads
 * {@link #snapshot()} under the same lock).
 */
final class PrefixCache implements AutoCloseable {

    static final String NAMESPACE = "jcomm/llama-kv";

    private final ShardPlan plan;
    private final BlockHasher hasher;
    private final KvSlice slice;
    private final BlockLayout layout;
    private final TransferAgent agent;
    private final MemoryRegion pool;
    private final String instance;
    private final HostBlockIndex index;
    private final KvEventPublisher publisher;
    private final KvEventSubscriber subscriber;
    private final TransferAgent subscriberAgent;
    private final BlockLocator locator;
    private final Duration timeout;
    private final int slots;
    private final LinkedHashMap<BlockHash, Slot> byKey = new LinkedHashMap<>(16, 0.75f, true);
    private final ArrayDeque<Integer> free = new ArrayDeque<>();
    private final IdentityHashMap<KvCache, MemoryRegion> registered = new IdentityHashMap<>();
    private List<List<BlockLocation>> planned = List.of();
    private List<BlockHash> plannedHashes = List.of();
    private final Stats stats = new Stats();

    /** One stored block of the pool. */
    private record Slot(int index, BlockHash prefix, BlockHash parent, BlockLocation location) {
    }

    /** What the cache did. */
    static final class Stats {
        long blocksStored;
        long blocksEvicted;
        long blocksReadLocal;
        long blocksReadRemote;
        long bytesRead;
        long checksumFailures;
        long transferFailures;
        long resplitBlocks;
    }

    /**
     * @param hasher     the model's block names
     * @param agent      this rank's agent: owns the pool, reads, publishes events (its store is the one the
     *                   jobs sharing blocks meet in)
     * @param slots      blocks the pool holds
     * @param instance   the serving instance (job) this rank is part of
     * @param index      the host's index, or null
     * @param subscriberAgent an agent of its own for the KV events of other hosts, or null for none
     * @param store      the store the agents are listed in (events use it too)
     */
    PrefixCache(ShardPlan plan, BlockHasher hasher, TransferAgent agent, int slots, String instance, HostBlockIndex index,
                TransferAgent subscriberAgent, Store store, String host, Duration timeout) {
        this.plan = Objects.requireNonNull(plan, "plan");
        this.hasher = Objects.requireNonNull(hasher, "hasher");
        this.agent = Objects.requireNonNull(agent, "agent");
        this.instance = Objects.requireNonNull(instance, "instance");
        this.index = index;
        this.timeout = timeout;
        this.slots = slots;
        LlamaConfig c = plan.config();
        this.slice = KvSlice.ofRank(c.layers(), c.kvHeads(), plan.tpRank(), plan.tpSize(), plan.ppRank(), plan.ppSize());
        this.layout = new BlockLayout(slice, hasher.blockTokens(), c.headDim(), Float.BYTES);
        if ((long) slots * layout.bytes() > Integer.MAX_VALUE - 64 || slots < 1) {
            throw new IllegalArgumentException(slots + " blocks of " + layout.bytes() + " bytes do not fit one region (2 GiB)");
        }
        this.pool = agent.allocateShared(slots * layout.bytes(), Set.of(Permission.READ));
        for (int i = 0; i < slots; i++) {
            free.add(i);
        }
        this.subscriberAgent = subscriberAgent;
        if (subscriberAgent != null) {
            PrefixTree tree = new PrefixTree(1 << 20);
            this.subscriber = KvEventSubscriber.start(subscriberAgent, store, NAMESPACE, tree);
            this.publisher = KvEventPublisher.start(agent, store, NAMESPACE, host, this::snapshot, Duration.ofMillis(20), 1 << 16);
        } else {
            this.subscriber = null;
            this.publisher = null;
        }
        BlockLocator l = this::own;
        if (index != null) {
            l = l.orElse(BlockLocator.of(index));
        }
        if (subscriber != null) {
            l = l.orElse(subscriber.tree());
        }
        this.locator = l;
    }

    KvSlice slice() {
        return slice;
    }

    BlockHasher hasher() {
        return hasher;
    }

    Stats stats() {
        return stats;
    }

    KvEventSubscriber subscriber() {
        return subscriber;
    }

    KvEventPublisher publisher() {
        return publisher;
    }

    HostBlockIndex index() {
        return index;
    }

    private synchronized Optional<BlockLocation> own(BlockHash prefix, KvSlice s) {
        if (!s.equals(slice)) {
            return Optional.empty();
        }
        Slot sl = byKey.get(BlockHasher.blockKey(prefix, s));
        return sl == null ? Optional.empty() : Optional.of(sl.location);
    }

    /** The stored blocks, as events: what a new subscriber gets first. */
    synchronized List<KvEvent> snapshot() {
        List<KvEvent> out = new ArrayList<>(byKey.size());
        LlamaConfig c = plan.config();
        for (Slot s : byKey.values()) {
            out.add(new KvEvent.Stored(s.prefix, s.parent, c.layers(), c.kvHeads(), s.location));
        }
        return out;
    }

    // ------------------------------------------------------------------ lookup and read

    /**
     * How many of the first {@code maxBlocks} full blocks of {@code prompt} this rank can read (its
     * heads, from anyone); remembers where, for {@link #read}.
     */
    int available(int[] prompt, int maxBlocks) {
        int n = Math.min(maxBlocks, prompt.length / hasher.blockTokens());
        List<BlockHash> hashes = hasher.prefixHashes(prompt, n * hasher.blockTokens(), false);
        List<List<BlockLocation>> covers = new ArrayList<>(n);
        int preferred = plan.tpSize();
        for (BlockHash h : hashes) {
            List<BlockLocation> cover = null;
            for (int tp : tpOrder(preferred)) {
                cover = cover(h, tp);
                if (cover != null) {
                    preferred = tp;
                    break;
                }
            }
            if (cover == null) {
                break;
            }
            covers.add(cover);
        }
        planned = covers;
        plannedHashes = hashes.subList(0, covers.size());
        return covers.size();
    }

    /** TP sizes to try: {@code first}, then every divisor of the KV heads, smallest first. */
    private List<Integer> tpOrder(int first) {
        List<Integer> out = new ArrayList<>();
        out.add(first);
        int kv = plan.config().kvHeads();
        for (int t = 1; t <= kv; t++) {
            if (kv % t == 0 && t != first) {
                out.add(t);
            }
        }
        return out;
    }

    /** The blocks of a TP-{@code tp} layout (same layers) holding this rank's heads at {@code prefix}, or null. */
    private List<BlockLocation> cover(BlockHash prefix, int tp) {
        int per = plan.config().kvHeads() / tp;
        List<BlockLocation> out = new ArrayList<>();
        for (int k = 0; k < tp; k++) {
            KvSlice s = new KvSlice(slice.layerStart(), slice.layerEnd(), k * per, (k + 1) * per);
            if (s.intersect(slice) == null) {
                continue;
            }
            Optional<BlockLocation> l = locator.locate(prefix, s);
            if (l.isEmpty() || !l.get().slice().equals(s) || l.get().tokens() != hasher.blockTokens()
                    || l.get().where().length() < new BlockLayout(s, hasher.blockTokens(), layout.headDim(), Float.BYTES).bytes()) {
                return null;
            }
            out.add(l.get());
        }
        return out;
    }

    /**
     * Reads the first {@code blocks} blocks found by {@link #available} into {@code cache} (positions
     * {@code [0, blocks x blockTokens)}), checks them, and returns how many blocks, from the first, arrived
     * intact. Blocks of this rank's own pool are copied; others are read with kv-transfer (one transfer per
     * owning agent).
     */
    int read(int blocks, KvCache cache) {
        if (blocks > planned.size()) {
            throw new IllegalArgumentException(blocks + " blocks, " + planned.size() + " planned");
        }
        MemoryRegion dst = region(cache);
        int bt = hasher.blockTokens();
        Map<String, List<LocalDescriptor>> locals = new LinkedHashMap<>();
        Map<String, List<RemoteDescriptor>> remotes = new LinkedHashMap<>();
        Map<String, Integer> firstBlockOf = new LinkedHashMap<>();
        for (int b = 0; b < blocks; b++) {
            for (BlockLocation l : planned.get(b)) {
                KvSlice part = l.slice().intersect(slice);
                BlockLayout src = new BlockLayout(l.slice(), bt, layout.headDim(), Float.BYTES);
                boolean mine = l.where().agent().equals(agent.name()) && l.where().regionId() == pool.id()
                        && l.where().generation() == pool.generation();
                if (!l.slice().equals(slice)) {
                    stats.resplitBlocks++;
                }
                for (int layer = part.layerStart(); layer < part.layerEnd(); layer++) {
                    for (int plane = 0; plane < 2; plane++) {
                        for (int h = part.headStart(); h < part.headEnd(); h++) {
                            long to = cache.byteOffset(layer - slice.layerStart(), plane, h - slice.headStart(), b * bt);
                            int from = src.runOffset(layer, plane, h);
                            int len = src.rowsBytes(bt);
                            if (mine) {
                                ByteBuffer s = pool.buffer().duplicate();
                                s.limit((int) (l.where().offset() - pool.descriptor().offset()) + from + len)
                                        .position((int) (l.where().offset() - pool.descriptor().offset()) + from);
                                ByteBuffer d = cache.memory();
                                d.position((int) to);
                                d.put(s);
                            } else {
                                locals.computeIfAbsent(l.where().agent(), k -> new ArrayList<>()).add(dst.slice(to, len));
                                remotes.computeIfAbsent(l.where().agent(), k -> new ArrayList<>()).add(l.where().slice(from, len));
                                firstBlockOf.putIfAbsent(l.where().agent(), b);
                            }
                        }
                    }
                }
                if (mine) {
                    stats.blocksReadLocal++;
                } else {
                    stats.blocksReadRemote++;
                }
            }
        }
        int ok = blocks;
        List<TransferHandle> handles = new ArrayList<>();
        List<String> agents = new ArrayList<>(locals.keySet());
        for (String a : agents) {
            try {
                handles.add(agent.read(locals.get(a), remotes.get(a), timeout));
            } catch (CommException | IllegalArgumentException e) {
                handles.add(null);
            }
        }
        for (int i = 0; i < agents.size(); i++) {
            TransferHandle h = handles.get(i);
            boolean failed = h == null;
            if (!failed) {
                try {
                    h.await();
                    for (LocalDescriptor d : locals.get(agents.get(i))) {
                        stats.bytesRead += d.length();
                    }
                } catch (CommException e) {
                    failed = true;
                }
            }
            if (failed) {
                stats.transferFailures++;
                ok = Math.min(ok, firstBlockOf.get(agents.get(i)));
            }
        }
        for (int b = 0; b < ok; b++) {
            for (BlockLocation l : planned.get(b)) {
                if (!intact(cache, b, l)) {
                    stats.checksumFailures++;
                    if (index != null) {
                        index.remove(BlockHasher.blockKey(plannedHashes.get(b), l.slice()), l);
                    }
                    ok = b;
                    break;
                }
            }
        }
        return ok;
    }

    /** Whether the heads of {@code l} this rank read for block {@code b} match the owner's checksums. */
    private boolean intact(KvCache cache, int b, BlockLocation l) {
        KvSlice part = l.slice().intersect(slice);
        int bt = hasher.blockTokens();
        ByteBuffer mem = cache.memory();
        for (int h = part.headStart(); h < part.headEnd(); h++) {
            CRC32C crc = new CRC32C();
            for (int layer = part.layerStart(); layer < part.layerEnd(); layer++) {
                for (int plane = 0; plane < 2; plane++) {
                    int o = (int) cache.byteOffset(layer - slice.layerStart(), plane, h - slice.headStart(), b * bt);
                    crc.update(mem.duplicate().limit(o + (int) cache.headRowBytes(bt)).position(o));
                }
            }
            if ((int) crc.getValue() != l.headChecksum(h)) {
                return false;
            }
        }
        return true;
    }

    private MemoryRegion region(KvCache cache) {
        return registered.computeIfAbsent(cache, c -> agent.register(c.memory(), Set.of()));
    }

    /** Deregisters {@code cache} if reads went into it. */
    void release(KvCache cache) {
        MemoryRegion r = registered.remove(cache);
        if (r != null) {
            agent.deregister(r);
        }
    }

    // ------------------------------------------------------------------ store

    /**
     * Stores the full blocks of {@code prompt} among positions {@code [0, count)} of {@code cache} that
     * the pool does not hold yet (and, with {@code partialTail}, a last partial block), publishing each.
     *
     * @return blocks newly stored
     */
    int store(int[] prompt, int count, KvCache cache, boolean partialTail) {
        List<BlockHash> hashes = hasher.prefixHashes(prompt, count, partialTail);
        int bt = hasher.blockTokens();
        LlamaConfig c = plan.config();
        int stored = 0;
        for (int b = 0; b < hashes.size(); b++) {
            BlockHash key = BlockHasher.blockKey(hashes.get(b), slice);
            synchronized (this) {
                if (byKey.get(key) != null) {
                    continue; // held: now the most recently used
                }
            }
            int n = Math.min(bt, count - b * bt);
            int slot = acquire();
            ByteBuffer block = pool.buffer().duplicate().order(java.nio.ByteOrder.LITTLE_ENDIAN);
            int base = slot * layout.bytes();
            ByteBuffer src = cache.memory();
            for (int layer = slice.layerStart(); layer < slice.layerEnd(); layer++) {
                for (int plane = 0; plane < 2; plane++) {
                    for (int h = slice.headStart(); h < slice.headEnd(); h++) {
                        int from = (int) cache.byteOffset(layer - slice.layerStart(), plane, h - slice.headStart(), b * bt);
                        src.limit(from + layout.rowsBytes(n)).position(from);
                        block.limit(block.capacity()).position(base + layout.runOffset(layer, plane, h));
                        block.put(src);
                        src.limit(src.capacity());
                    }
                }
            }
            int[] crc = layout.headChecksums(block.limit(base + layout.bytes()).position(base), n);
            BlockLocation loc = new BlockLocation(instance, pool.descriptor(base, layout.bytes()), slice, n, crc,
                    BlockOwner.self(), ChronoUnit.MICROS.between(Instant.EPOCH, Instant.now()));
            BlockHash parent = b == 0 ? hasher.root() : hashes.get(b - 1);
            synchronized (this) {
                byKey.put(key, new Slot(slot, hashes.get(b), parent, loc));
            }
            if (index != null) {
                index.publish(key, loc);
            }
            if (publisher != null) {
                publisher.publish(new KvEvent.Stored(hashes.get(b), parent, c.layers(), c.kvHeads(), loc));
            }
            stats.blocksStored++;
            stored++;
        }
        return stored;
    }

    /** A free slot, evicting the least recently used block when there is none. */
    private int acquire() {
        Integer f = free.poll();
        if (f != null) {
            return f;
        }
        Slot victim;
        BlockHash key;
        synchronized (this) {
            Map.Entry<BlockHash, Slot> eldest = byKey.entrySet().iterator().next();
            key = eldest.getKey();
            victim = eldest.getValue();
            byKey.remove(key);
        }
        if (index != null) {
            index.remove(key, victim.location);
        }
        if (publisher != null) {
            publisher.publish(new KvEvent.Removed(victim.prefix, slice, instance));
        }
        stats.blocksEvicted++;
        return victim.index;
    }

    /** Blocks held. */
    synchronized int held() {
        return byKey.size();
    }

    int slots() {
        return slots;
    }

    /**
     * Withdraws every block (index entries, a cleared event), stops the events, frees the pool. The agents
     * are the caller's.
     */
    @Override
    public void close() {
        if (publisher != null) {
            publisher.close();
        }
        if (subscriber != null) {
            subscriber.close();
        }
        if (index != null) {
            String me = agent.name();
            index.removeIf(l -> l.where().agent().equals(me) && l.owner().equals(BlockOwner.self()));
        }
        for (KvCache c : new ArrayList<>(registered.keySet())) {
            release(c);
        }
        agent.deregister(pool);
    }
}
