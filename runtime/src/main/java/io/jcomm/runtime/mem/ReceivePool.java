package io.jcomm.runtime.mem;

import io.jcomm.api.config.Settings;
import io.jcomm.api.DType;
import io.jcomm.api.Tensor;
import java.lang.ref.PhantomReference;
import java.lang.ref.Reference;
import java.lang.ref.ReferenceQueue;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.slf4j.LoggerFactory;

/**
 * Host memory for the tensors the SDK allocates on a caller's behalf (what {@code recvTensorDict()} and the
 * other receives return): recycled instead of allocated and freed, and bounded.
 *
 * <p>Why: a fresh direct buffer per received tensor costs its zeroing and its page faults every step, and
 * is freed only when a collection notices that its buffer object is unreachable. A pipeline stage allocates
 * almost nothing on the heap, so no collection comes for a long time, and its resident memory grew by
 * gigabytes before the JDK's own direct-memory limit forced one.
 *
 * <p>How: memory comes in blocks of power-of-two classes, kept after use. Each tensor handed out gets a
 * direct buffer object of its own over its block (the lease), and every view derived from the tensor's
 * memory (slices, duplicates, {@code hostBuffer()}) refers to that lease: the block returns to the pool only
 * once the lease and every such view are unreachable, which a collection reports through a phantom
 * reference. A tensor a caller still holds is therefore never handed out again. When leased and pooled
 * memory would pass the budget ({@code jcomm.receivePool.mib}, default {@value #DEFAULT_BUDGET_MB} MiB, or
 * {@value #YOUNG_BUDGET_MB} MiB where young collections work), the pool asks for a collection (a young one
 * where the JVM makes that cheap, see {@link YoungCollection}, else a full one, as the JDK does at its
 * direct-memory limit) and takes back what it freed. Memory a caller really holds beyond the budget is
 * allocated anyway (never overwritten) and collections are not asked for again until another budget's worth
 * was leased.
 *
 * <p>Blocks are not zeroed: every byte of a receive destination is written by the receive. Thread safe.
 */
public final class ReceivePool {

    public static final int DEFAULT_BUDGET_MB = 128;
    /** Smallest block class; smaller tensors take a block of this size. */
    static final int MIN_CLASS_BYTES = 4096;
    /** Largest pooled class; larger tensors are plain direct buffers. */
    static final long MAX_CLASS_BYTES = 256L << 20;
    private static final int ALIGN = Tensor.ALIGNMENT;

    /**
     * The default budget where the pool asks for young collections: the eden they fill (about 100 MB on a
     * 24 GB host) becomes resident too, so the blocks get half the default; measured, 64 MiB streamed as fast
     * as 128 at 1 MiB and within the noise at 4 MiB.
     */
    public static final int YOUNG_BUDGET_MB = 64;

    private static final class Shared {
        static final ReceivePool POOL = create(budgetFromProperty());

        private static ReceivePool create(long given) {
            return given > 0 ? new ReceivePool(given)
                    : new ReceivePool((long) DEFAULT_BUDGET_MB << 20, (long) YOUNG_BUDGET_MB << 20);
        }
    }

    /** The budget, settled when the pool first reaches {@link #youngBudget} (until then the default one). */
    private long budget;
    /** The budget to settle on if young collections work here, or 0 when the budget was given. */
    private long youngBudget;
    private final ReferenceQueue<ByteBuffer> returned = new ReferenceQueue<>();
    /** Leases not yet returned (kept reachable here so that their phantom references are enqueued). */
    private final Set<Lease> leases = new HashSet<>();
    /** Free blocks by class (index = log2 of the class size). */
    private final java.util.List<ArrayDeque<Block>> free = new java.util.ArrayList<>();
    private long leasedBytes;
    private long pooledBytes;
    /** Leased bytes above which the next collection may be asked for. */
    private long collectAbove;
    private long collections;
    private long youngCollections;
    private long fullCollections;
    private long blocks;
    private boolean warned;

    ReceivePool(long budget) {
        this(budget, 0);
    }

    /** A pool of {@code budget} bytes, or {@code youngBudget} (when not 0) where young collections work. */
    ReceivePool(long budget, long youngBudget) {
        this.budget = budget;
        this.youngBudget = youngBudget;
        for (int c = 0; c < 64; c++) {
            free.add(new ArrayDeque<>());
        }
    }

    /** The process's pool (the SDK's host allocator for received tensors). */
    public static ReceivePool shared() {
        return Shared.POOL;
    }

    /** The budget {@code jcomm.receivePool.mib} gives, or 0 when it is not set. */
    private static long budgetFromProperty() {
        String v = Settings.RECEIVE_POOL_MIB.fromProcess().orElse(null);
        if (v == null) {
            return 0;
        }
        try {
            return Math.max(1, Long.parseLong(v)) << 20;
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(Settings.RECEIVE_POOL_MIB.name() + " is not a number of MiB: '" + v + "'", e);
        }
    }

    /** Whether leases can be made here (the JVM lets the SDK make a direct buffer over given memory). */
    public static boolean available() {
        return DirectBuffers.available();
    }

    /**
     * A host tensor of {@code dtype} and {@code shape} whose contents are undefined (a receive destination:
     * the caller writes every byte), from the pool.
     */
    public Tensor allocate(DType dtype, long... shape) {
        long n = 1;
        for (long d : shape) {
            n = Math.multiplyExact(n, d);
        }
        long bytes = Math.multiplyExact(n, (long) dtype.byteSize());
        if (bytes == 0 || bytes > MAX_CLASS_BYTES || !available()) {
            return Tensor.allocate(dtype, shape);
        }
        int cls = classOf(bytes);
        Block b = take(cls);
        ByteBuffer lease = DirectBuffers.over(b.aligned, (int) bytes);
        synchronized (this) {
            leases.add(new Lease(lease, returned, b));
        }
        return Tensor.wrap(lease, dtype, shape);
    }

    static int classOf(long bytes) {
        long c = Math.max(MIN_CLASS_BYTES, Long.highestOneBit(bytes - 1) << 1);
        return Long.numberOfTrailingZeros(c);
    }

    private synchronized Block take(int cls) {
        long size = 1L << cls;
        drain();
        if (youngBudget != 0 && leasedBytes + pooledBytes + size > youngBudget) {
            // settled here rather than at the first receive: what the collector is costs a management lookup
            if (YoungCollection.available()) {
                budget = youngBudget;
            }
            youngBudget = 0;
        }
        Block b = pop(cls);
        if (b == null && leasedBytes + pooledBytes + size > budget) {
            trim(size);
            if (leasedBytes + size > budget && leasedBytes >= collectAbove) {
                collect(size);
                b = pop(cls);
                if (b == null) {
                    trim(size);
                }
                // what a collection could not take back is held by callers: ask again half a budget later
                collectAbove = leasedBytes + budget / 2;
                if (leasedBytes + size > budget && !warned) {
                    warned = true;
                    LoggerFactory.getLogger(ReceivePool.class).warn("{} MiB of received tensors are still reachable, "
                            + "more than the receive pool's budget of {} MiB ({}): they stay valid, the pool allocates "
                            + "beyond its budget; hand a received dict back (recvTensorDict(src, group, previous)) or "
                            + "drop the references to let it recycle", leasedBytes >> 20, budget >> 20, Settings.RECEIVE_POOL_MIB.name());
                }
            }
        }
        if (b == null) {
            ByteBuffer root = ByteBuffer.allocateDirect((int) size + ALIGN);
            long raw = DirectBuffers.address(root);
            b = new Block(root, (raw + ALIGN - 1) & -ALIGN, cls);
            blocks++;
        }
        leasedBytes += size;
        return b;
    }

    /** A free block of class {@code cls}, or null. Lock held. */
    private Block pop(int cls) {
        Block b = free.get(cls).pollFirst();
        if (b != null) {
            pooledBytes -= 1L << cls;
        }
        return b;
    }

    /** Takes back the blocks of leases a collection found unreachable. Lock held. */
    private void drain() {
        Reference<? extends ByteBuffer> r;
        while ((r = returned.poll()) != null) {
            giveBack((Lease) r);
        }
    }

    private void giveBack(Lease l) {
        if (!leases.remove(l)) {
            return;
        }
        Block b = l.block;
        long size = 1L << b.cls;
        leasedBytes -= size;
        free.get(b.cls).addFirst(b);
        pooledBytes += size;
    }

    /** Frees pooled blocks (largest classes first) until {@code need} more bytes fit the budget. Lock held. */
    private void trim(long need) {
        for (int c = free.size() - 1; c >= 0 && leasedBytes + pooledBytes + need > budget; c--) {
            ArrayDeque<Block> q = free.get(c);
            while (!q.isEmpty() && leasedBytes + pooledBytes + need > budget) {
                Block b = q.pollLast();
                DirectBuffers.free(b.root);
                pooledBytes -= 1L << c;
            }
        }
    }

    /**
     * Asks for a collection and takes back what it freed, {@code need} bytes being wanted: first a young
     * collection where the JVM makes one cheap ({@link YoungCollection}: what the pool waits for is almost
     * always a tensor dropped a few steps ago); then a full one when, 5 ms after it, more than half the budget
     * (or more than leaves room for {@code need}) is still leased: tensors held long enough to be promoted
     * and dropped since are found only by a full collection. The reference handler enqueues the leases a
     * little after a collection, so this waits for them, at most 100 ms after a full one. Lock held.
     */
    private void collect(long need) {
        collections++;
        long before = leasedBytes;
        if (YoungCollection.run()) {
            youngCollections++;
            long enough = Math.min(budget / 2, budget - need);
            if (awaitReturns(() -> leasedBytes <= enough, 5)) {
                return;
            }
        }
        fullCollections++;
        System.gc();
        awaitReturns(() -> leasedBytes < before / 2 || leases.isEmpty(), 100);
    }

    /** Takes back returned leases until {@code done} holds (true) or {@code millis} passed (false). Lock held. */
    private boolean awaitReturns(BooleanSupplier done, long millis) {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(millis);
        while (true) {
            drain();
            if (done.getAsBoolean()) {
                return true;
            }
            long left = end - System.nanoTime();
            if (left <= 0) {
                return false;
            }
            try {
                Reference<? extends ByteBuffer> r = returned.remove(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                if (r != null) {
                    giveBack((Lease) r);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
    }

    /** Collections this pool asked for that were young ones (see {@link #collect}). */
    public synchronized long youngCollections() {
        return youngCollections;
    }

    /** Full collections ({@code System.gc()}) this pool asked for. */
    public synchronized long fullCollections() {
        return fullCollections;
    }

    /** Bytes of blocks handed out and not yet taken back. */
    public synchronized long leasedBytes() {
        return leasedBytes;
    }

    /** Bytes of free blocks kept for reuse. */
    public synchronized long pooledBytes() {
        return pooledBytes;
    }

    /** Collections this pool asked for. */
    public synchronized long collections() {
        return collections;
    }

    /** Blocks this pool allocated so far (each is then reused). */
    public synchronized long blocksAllocated() {
        return blocks;
    }

    /** The budget of leased and pooled memory together, in bytes. */
    public synchronized long budget() {
        return budget;
    }

    /** A block of a class: memory of the JDK's own allocation (its root buffer, freed by trimming), kept. */
    private static final class Block {
        final ByteBuffer root;
        final long aligned;
        final int cls;

        Block(ByteBuffer root, long aligned, int cls) {
            this.root = root;
            this.aligned = aligned;
            this.cls = cls;
        }
    }

    private static final class Lease extends PhantomReference<ByteBuffer> {
        final Block block;

        Lease(ByteBuffer lease, ReferenceQueue<ByteBuffer> q, Block block) {
            super(lease, q);
            this.block = block;
        }
    }
}
