package io.jcomm.kvcache;

import io.jcomm.api.ProtocolException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Predicate;
import net.openhft.chronicle.map.ChronicleMap;
import net.openhft.chronicle.map.ChronicleMapBuilder;
import net.openhft.chronicle.map.ExternalMapQueryContext;
import net.openhft.chronicle.map.MapEntry;
import net.openhft.chronicle.map.MapSegmentContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The host's index of KV blocks: block key ({@link BlockHasher#blockKey}) to where its bytes are
 * ({@link BlockLocation}), in one Chronicle Map file shared by every process of the host that offers
 * or reuses blocks, and kept when they exit (a process that restarts finds it, with the entries of the
 * processes still alive).
 *
 * <p><b>Never served stale.</b> {@link #lookup} returns an entry only when its owner process is alive
 * (pid and start time, {@link BlockOwner#alive}); an entry of a dead owner is removed on the spot, and
 * a background sweep ({@link IndexOptions#sweepInterval()}) removes the rest. An owner removes its
 * entries before it frees or recycles their memory ({@link #remove}, {@link #removeIf}); a reader
 * still checks the bytes it transferred against the entry's head checksums, since an owner may
 * recycle a block between a lookup and the read. Undecodable values are removed, never returned.
 *
 * <p><b>Bound and eviction.</b> The file holds at most {@link #bound()} entries: the bound given when
 * the file was made ({@link IndexOptions#maxEntries()}, kept in the file), spread evenly over the
 * map's segments. An insert into a full segment first evicts that segment's least recently used
 * eighth (by the time of the last {@link #publish} or {@link #lookup} hit, in microseconds), under the
 * segment's lock, which every process shares: so the bound holds whatever number of processes insert
 * at once, and eviction is LRU within a segment (approximately LRU over the map, as a sharded cache is).
 * Entries of dead owners go first.
 *
 * <p><b>Opening.</b> The first Chronicle Map a JVM opens costs seconds (it generates and compiles code);
 * {@link #openInBackground} returns at once and opens on a daemon thread: until it is open, lookups
 * miss and publishes wait in a bounded queue ({@link IndexOptions#pendingPublishes()}; beyond it they
 * are dropped and counted). Nothing of jcomm opens the index on a start-up path.
 *
 * <p>Thread safe; every call is bounded (a segment's lock is held for one entry, or for one scan of
 * a segment when evicting or sweeping).
 */
public final class HostBlockIndex implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(HostBlockIndex.class);
    private static final byte[] META_KEY = new byte[BlockHash.BYTES];
    private static final long META_MAGIC = 0x31766b6d6d6f636aL; // "jcommkv1"
    private static final int AVERAGE_VALUE_BYTES = 8 + 200;
    private static final long VERIFY_NANOS = TimeUnit.SECONDS.toNanos(1);
    private static final int VERIFIED_MAX = 4096;

    private final IndexOptions options;
    private final CountDownLatch opened = new CountDownLatch(1);
    private final ArrayDeque<Object[]> pending = new ArrayDeque<>();
    private final ConcurrentHashMap<BlockOwner, Long> verified = new ConcurrentHashMap<>();
    private final BlockOwner self = BlockOwner.self();
    private final LongAdder hits = new LongAdder();
    private final LongAdder misses = new LongAdder();
    private final LongAdder deadRemoved = new LongAdder();
    private final LongAdder evicted = new LongAdder();
    private final LongAdder dropped = new LongAdder();
    private final LongAdder corrupt = new LongAdder();
    private volatile ChronicleMap<byte[], byte[]> map;
    private volatile RuntimeException openFailure;
    private volatile long openNanos = -1;
    private volatile long bound;
    private volatile long perSegment;
    private volatile int metaSegment;
    private volatile boolean closed;
    private ScheduledExecutorService sweeper;

    private HostBlockIndex(IndexOptions options) {
        this.options = Objects.requireNonNull(options, "options");
    }

    /**
     * Opens (or creates) the index in {@code options.file()}, blocking until it is open: the first
     * open in a JVM takes seconds.
     *
     * @throws UncheckedIOException when the file cannot be created or mapped
     */
    public static HostBlockIndex open(IndexOptions options) {
        HostBlockIndex i = new HostBlockIndex(options);
        i.doOpen();
        if (i.openFailure != null) {
            throw i.openFailure;
        }
        return i;
    }

    /** Returns at once and opens the index on a daemon thread ({@link #awaitOpen}, {@link #isOpen}). */
    public static HostBlockIndex openInBackground(IndexOptions options) {
        HostBlockIndex i = new HostBlockIndex(options);
        Thread t = new Thread(i::doOpen, "jcomm-kv-index-open");
        t.setDaemon(true);
        t.start();
        return i;
    }

    private void doOpen() {
        long t0 = System.nanoTime();
        try {
            Path file = options.file().toAbsolutePath();
            Path parent = file.getParent();
            if (parent == null || !Files.isDirectory(parent)) {
                throw new UncheckedIOException(new IOException("the directory of " + file + " does not exist"));
            }
            try {
                Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
            } catch (FileAlreadyExistsException e) {
                // another process made it: open it
            }
            long want = options.maxEntries();
            int segments = Integer.highestOneBit((int) Math.max(1, Math.min(1024, want / 1024)));
            ChronicleMap<byte[], byte[]> m = ChronicleMapBuilder.of(byte[].class, byte[].class)
                    .name("jcomm-kv-index")
                    .constantKeySizeBySample(new byte[BlockHash.BYTES])
                    .averageValueSize(AVERAGE_VALUE_BYTES)
                    .entries(want + want / 4 + 64)
                    .actualSegments(segments)
                    .maxBloatFactor(2.0)
                    .createPersistedTo(file.toFile());
            ByteBuffer meta = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN).putLong(META_MAGIC).putLong(want);
            byte[] have = m.putIfAbsent(META_KEY, meta.array());
            long b = want;
            if (have != null) {
                ByteBuffer h = ByteBuffer.wrap(have).order(ByteOrder.LITTLE_ENDIAN);
                if (have.length != 16 || h.getLong() != META_MAGIC) {
                    m.close();
                    throw new UncheckedIOException(new IOException(file + " is not a jcomm KV-block index"));
                }
                b = h.getLong();
            }
            try (ExternalMapQueryContext<byte[], byte[], ?> q = m.queryContext(META_KEY)) {
                this.metaSegment = q.segmentIndex();
            }
            this.perSegment = Math.max(1, b / m.segments());
            this.bound = perSegment * m.segments();
            this.map = m;
            this.openNanos = System.nanoTime() - t0;
            LOG.debug("KV-block index {} open in {} ms: {} entries of at most {}", file, openNanos / 1_000_000, size(), bound);
            Object[][] queued;
            synchronized (pending) {
                queued = pending.toArray(new Object[0][]);
                pending.clear();
            }
            for (Object[] p : queued) {
                publish((BlockHash) p[0], (BlockLocation) p[1]);
            }
            if (!options.sweepInterval().isZero()) {
                sweeper = Executors.newSingleThreadScheduledExecutor(r -> {
                    Thread t = new Thread(r, "jcomm-kv-index-sweep");
                    t.setDaemon(true);
                    return t;
                });
                long ms = Math.max(1, options.sweepInterval().toMillis());
                sweeper.scheduleWithFixedDelay(this::backgroundSweep, ms, ms, TimeUnit.MILLISECONDS);
            }
        } catch (IOException | RuntimeException e) {
            openFailure = e instanceof UncheckedIOException u ? u
                    : new UncheckedIOException(new IOException("cannot open the KV-block index " + options.file() + ": " + e, e));
            LOG.warn("KV-block index {} not opened: {}", options.file(), e.toString());
        } finally {
            opened.countDown();
            if (closed) {
                close();
            }
        }
    }

    private void backgroundSweep() {
        try {
            sweep();
        } catch (RuntimeException e) {
            LOG.debug("KV-block index sweep failed: {}", e.toString());
        }
    }

    /** Whether the map is open (lookups hit). */
    public boolean isOpen() {
        return map != null && !closed;
    }

    /**
     * Waits up to {@code timeout} for the map to open.
     *
     * @return whether it is open
     * @throws UncheckedIOException when opening failed
     */
    public boolean awaitOpen(Duration timeout) {
        try {
            opened.await(timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (openFailure != null) {
            throw openFailure;
        }
        return isOpen();
    }

    /** How long opening took (empty until it is open). */
    public Optional<Duration> openTime() {
        long n = openNanos;
        return n < 0 ? Optional.empty() : Optional.of(Duration.ofNanos(n));
    }

    public IndexOptions options() {
        return options;
    }

    /** The file's bound in entries ({@code 0} until open). */
    public long bound() {
        return bound;
    }

    private static long nowMicros() {
        return ChronoUnit.MICROS.between(Instant.EPOCH, Instant.now());
    }

    private static byte[] value(long lastUsed, byte[] location) {
        byte[] v = new byte[8 + location.length];
        ByteBuffer.wrap(v).order(ByteOrder.LITTLE_ENDIAN).putLong(lastUsed).put(location);
        return v;
    }

    private static long lastUsed(byte[] v) {
        return v.length < 8 ? Long.MIN_VALUE : ByteBuffer.wrap(v).order(ByteOrder.LITTLE_ENDIAN).getLong();
    }

    /** The location in a value, or null when the value is not a valid one. */
    private static BlockLocation location(byte[] v) {
        if (v == null || v.length < 9) {
            return null;
        }
        try {
            return BlockLocation.decode(Arrays.copyOfRange(v, 8, v.length));
        } catch (ProtocolException e) {
            return null;
        }
    }

    /**
     * Enters {@code key -> location} (replacing an entry of the key), evicting first when the key's
     * segment is full. While the map is still opening, the publish is queued (up to
     * {@link IndexOptions#pendingPublishes()}).
     *
     * @return false when it was dropped (the queue was full) or the index is closed
     */
    public boolean publish(BlockHash key, BlockLocation location) {
        Objects.requireNonNull(key, "key");
        Objects.requireNonNull(location, "location");
        ChronicleMap<byte[], byte[]> m = map;
        if (closed) {
            return false;
        }
        if (m == null) {
            synchronized (pending) {
                if (map == null) {
                    if (pending.size() >= options.pendingPublishes()) {
                        dropped.increment();
                        return false;
                    }
                    pending.add(new Object[] {key, location});
                    return true;
                }
            }
            m = map;
        }
        byte[] k = key.unsafeBytes();
        if (Arrays.equals(k, META_KEY)) {
            throw new IllegalArgumentException("the all-zero hash is reserved");
        }
        byte[] v = value(nowMicros(), location.encode());
        try (ExternalMapQueryContext<byte[], byte[], ?> q = m.queryContext(k)) {
            q.updateLock().lock();
            MapEntry<byte[], byte[]> e = q.entry();
            if (e != null) {
                q.replaceValue(e, q.wrapValueAsData(v));
                return true;
            }
            int segment = q.segmentIndex();
            try (MapSegmentContext<byte[], byte[], ?> sc = m.segmentContext(segment)) {
                if (sc.size() - (segment == metaSegment ? 1 : 0) >= perSegment) {
                    evict(sc, Math.max(1, perSegment / 8));
                }
            }
            q.insert(q.absentEntry(), q.wrapValueAsData(v));
            return true;
        }
    }

    /** Removes the {@code n} least recently used entries of a segment (dead owners' first), under its lock. */
    private void evict(MapSegmentContext<byte[], byte[], ?> sc, long n) {
        long[] times = new long[(int) Math.min(Integer.MAX_VALUE - 8, sc.size() + 8)];
        int[] count = {0};
        Liveness live = new Liveness();
        long[] removedDead = {0};
        sc.forEachSegmentEntry(e -> {
            byte[] k = e.key().get();
            if (Arrays.equals(k, META_KEY)) {
                return;
            }
            byte[] v = e.value().get();
            BlockLocation l = location(v);
            if (l == null || !live.alive(l.owner())) {
                e.doRemove();
                removedDead[0]++;
                return;
            }
            if (count[0] < times.length) {
                times[count[0]++] = lastUsed(v);
            }
        });
        deadRemoved.add(removedDead[0]);
        long need = n - removedDead[0];
        if (need <= 0 || count[0] == 0) {
            return;
        }
        long[] sorted = Arrays.copyOf(times, count[0]);
        Arrays.sort(sorted);
        long threshold = sorted[(int) Math.min(sorted.length - 1, need - 1)];
        long[] left = {need};
        sc.forEachSegmentEntryWhile(e -> {
            if (Arrays.equals(e.key().get(), META_KEY)) {
                return true;
            }
            if (lastUsed(e.value().get()) <= threshold) {
                e.doRemove();
                evicted.increment();
                left[0]--;
            }
            return left[0] > 0;
        });
    }

    /**
     * The location of {@code key}, when an entry exists and its owner is alive (an entry of a dead owner
     * is removed now). A hit counts as a use for the eviction order. Misses while the map is opening.
     */
    public Optional<BlockLocation> lookup(BlockHash key) {
        ChronicleMap<byte[], byte[]> m = map;
        if (m == null || closed) {
            misses.increment();
            return Optional.empty();
        }
        byte[] k = key.unsafeBytes();
        try (ExternalMapQueryContext<byte[], byte[], ?> q = m.queryContext(k)) {
            q.updateLock().lock();
            MapEntry<byte[], byte[]> e = q.entry();
            if (e == null || Arrays.equals(k, META_KEY)) {
                misses.increment();
                return Optional.empty();
            }
            byte[] v = e.value().get();
            BlockLocation l = location(v);
            if (l == null) {
                q.remove(e);
                corrupt.increment();
                misses.increment();
                return Optional.empty();
            }
            if (!alive(l.owner())) {
                q.remove(e);
                deadRemoved.increment();
                misses.increment();
                return Optional.empty();
            }
            long now = nowMicros();
            if (now - lastUsed(v) > 1000) {
                ByteBuffer.wrap(v).order(ByteOrder.LITTLE_ENDIAN).putLong(0, now);
                q.replaceValue(e, q.wrapValueAsData(v));
            }
            hits.increment();
            return Optional.of(l);
        }
    }

    /**
     * Removes {@code key}'s entry if it is {@code expected} (an owner removing its own entry leaves
     * another owner's newer one in place).
     *
     * @return whether it was removed
     */
    public boolean remove(BlockHash key, BlockLocation expected) {
        ChronicleMap<byte[], byte[]> m = map;
        if (m == null || closed) {
            synchronized (pending) {
                return pending.removeIf(p -> p[0].equals(key) && p[1].equals(expected));
            }
        }
        try (ExternalMapQueryContext<byte[], byte[], ?> q = m.queryContext(key.unsafeBytes())) {
            q.updateLock().lock();
            MapEntry<byte[], byte[]> e = q.entry();
            if (e == null) {
                return false;
            }
            BlockLocation l = location(e.value().get());
            if (l == null || !l.equals(expected)) {
                return false;
            }
            q.remove(e);
            return true;
        }
    }

    /** Removes every entry whose location matches (a closing owner's, say); returns how many. */
    public long removeIf(Predicate<BlockLocation> match) {
        synchronized (pending) {
            pending.removeIf(p -> match.test((BlockLocation) p[1]));
        }
        return scan(l -> l == null || match.test(l));
    }

    /**
     * Removes the entries of dead owners and undecodable entries now (the background sweep does this
     * every {@link IndexOptions#sweepInterval()}); returns how many.
     */
    public long sweep() {
        Liveness live = new Liveness();
        long n = scan(l -> l == null || !live.alive(l.owner()));
        deadRemoved.add(n);
        return n;
    }

    private long scan(Predicate<BlockLocation> remove) {
        ChronicleMap<byte[], byte[]> m = map;
        if (m == null || closed) {
            return 0;
        }
        long[] n = {0};
        for (int s = 0; s < m.segments(); s++) {
            try (MapSegmentContext<byte[], byte[], ?> sc = m.segmentContext(s)) {
                sc.forEachSegmentEntry(e -> {
                    if (Arrays.equals(e.key().get(), META_KEY)) {
                        return;
                    }
                    if (remove.test(location(e.value().get()))) {
                        e.doRemove();
                        n[0]++;
                    }
                });
            }
        }
        return n[0];
    }

    /** Whether {@code owner} is alive: a full check (pid and start time) at most once a second per owner, its /proc entry in between. */
    private boolean alive(BlockOwner owner) {
        if (owner.equals(self)) {
            return true;
        }
        long now = System.nanoTime();
        Long at = verified.get(owner);
        if (at != null && now - at < VERIFY_NANOS) {
            if (Files.exists(Path.of("/proc", Long.toString(owner.pid())))) {
                return true;
            }
            verified.remove(owner);
            return false;
        }
        boolean a = owner.alive();
        if (a) {
            if (verified.size() >= VERIFIED_MAX) {
                verified.clear();
            }
            verified.put(owner, now);
        } else {
            verified.remove(owner);
        }
        return a;
    }

    /** One scan's liveness verdicts: each owner checked once (full check). */
    private final class Liveness {
        private final java.util.HashMap<BlockOwner, Boolean> seen = new java.util.HashMap<>();

        boolean alive(BlockOwner o) {
            return o.equals(self) || seen.computeIfAbsent(o, BlockOwner::alive);
        }
    }

    /** Entries now (0 until open). */
    public long size() {
        ChronicleMap<byte[], byte[]> m = map;
        if (m == null || closed) {
            return 0;
        }
        return Math.max(0, m.longSize() - (m.containsKey(META_KEY) ? 1 : 0));
    }

    /** Counters and sizes of this process's view. */
    public Stats stats() {
        ChronicleMap<byte[], byte[]> m = map;
        long fileBytes = -1;
        try {
            fileBytes = Files.size(options.file());
        } catch (IOException e) {
            // not there yet
        }
        return new Stats(size(), bound, m == null || closed ? 0 : m.offHeapMemoryUsed(), fileBytes, hits.sum(),
                misses.sum(), deadRemoved.sum(), evicted.sum(), dropped.sum(), corrupt.sum(), openTime().orElse(null));
    }

    /**
     * What an index holds and did (this process's counters).
     *
     * @param entries        entries now
     * @param bound          the bound
     * @param offHeapBytes   Chronicle's memory in use for the map (its mapping of the file)
     * @param fileBytes      the file's length (a sparse file: the pages in use may be fewer)
     * @param hits           lookups served
     * @param misses         lookups not served
     * @param deadRemoved    entries removed because their owner was dead
     * @param evicted        entries evicted by this process to keep the bound
     * @param dropped        publishes dropped while opening
     * @param corrupt        undecodable entries removed
     * @param openTime       how long opening took, null until open
     */
    public record Stats(long entries, long bound, long offHeapBytes, long fileBytes, long hits, long misses,
                        long deadRemoved, long evicted, long dropped, long corrupt, Duration openTime) {
    }

    /** Stops the sweep and unmaps the file (which stays, with its entries, for the other processes). Idempotent. */
    @Override
    public synchronized void close() {
        closed = true;
        if (sweeper != null) {
            sweeper.shutdownNow();
            try {
                sweeper.awaitTermination(2, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            sweeper = null;
        }
        ChronicleMap<byte[], byte[]> m = map;
        if (m != null && m.isOpen()) {
            m.close();
        }
    }

    @Override
    public String toString() {
        return "HostBlockIndex[" + options.file() + (isOpen() ? ", " + size() + " of " + bound + " entries" : ", not open") + "]";
    }
}
