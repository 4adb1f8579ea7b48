package io.jcomm.runtime.mem;

import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;
import java.lang.management.GarbageCollectorMXBean;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryPoolMXBean;
import java.lang.management.MemoryType;
import java.lang.ref.WeakReference;

/**
 * A young collection on request, where the JVM's collector makes one cheap: the JDK offers only
 * {@code System.gc()}, a full collection, and what the receive pool needs back is almost always young (a
 * tensor received a few steps ago and dropped).
 *
 * <p>How: fill what is left of the young generation's eden with arrays that are allocated without being
 * zeroed ({@code jdk.internal.misc.Unsafe.allocateUninitializedArray}, exported by the SDK's JVM flags) and
 * dropped at once, until a weakly held sentinel made before is cleared, which says that a collection ran.
 * Measured on the 2-core VM in a pipeline stage's JVM (serial collector, the one a JVM picks when its rank
 * is pinned to one CPU, eden about 100 MB): a full collection paused 9-11 ms (marking, class unloading,
 * adjusting every pointer); the filled eden's young collection paused 0.2-0.7 ms and the fill itself took
 * about 0.5 ms of CPU once compiled (an interpreted fill zeroes what it allocates, like a plain array).
 *
 * <p>Used only with the serial and parallel collectors, whose eden is fixed between collections and small
 * enough to fill in a millisecond; G1's eden grows to hundreds of megabytes while its pauses stay short, so
 * filling it costs more than its full collection, which is parallel. Elsewhere, or when the JVM refuses the
 * access, {@link #run()} returns false and the caller asks for a full collection.
 */
final class YoungCollection {

    /**
     * Fill arrays: small enough for a thread's allocation buffer, so each is a pointer bump (256 KiB ones went
     * through the allocation slow path: 6 ms of CPU per fill instead of 0.5).
     */
    private static final int CHUNK = 16 << 10;

    private static final MethodHandle ALLOCATE = findAllocate();
    private static final MemoryPoolMXBean EDEN = findEden();

    /** Where the fill goes, so that the compiler keeps each allocation. */
    @SuppressWarnings("unused")
    private static volatile Object sink;

    private YoungCollection() {
    }

    /** Whether {@link #run()} can work in this JVM. */
    static boolean available() {
        return ALLOCATE != null && EDEN != null;
    }

    /**
     * Runs a young collection by filling eden (at most twice its current capacity); true when one ran, false
     * when this JVM cannot, its eden is larger than {@link #MAX_EDEN} or no collection came (then nothing is
     * left allocated). The first few fills, before the JIT compiles this, zero what they allocate (about 8 ms
     * each here).
     */
    static boolean run() {
        if (!available()) {
            return false;
        }
        long eden = EDEN.getUsage().getCommitted();
        if (eden > MAX_EDEN) {
            return false;
        }
        WeakReference<Object> sentinel = new WeakReference<>(new Object());
        try {
            fill(sentinel, 2 * Math.max(eden, CHUNK));
        } catch (Throwable t) { // OutOfMemoryError included: a collection ran before it
            sink = null;
        }
        return sentinel.get() == null;
    }

    /** Above this eden, a fill would cost more than a full collection; then the caller asks for one. */
    static final long MAX_EDEN = 256L << 20;

    /** Allocates {@link #CHUNK}-byte arrays, up to {@code cap} bytes, until {@code sentinel} is cleared. */
    private static void fill(WeakReference<Object> sentinel, long cap) throws Throwable {
        for (long n = 0; sentinel.get() != null && n < cap; n += CHUNK) {
            sink = (byte[]) ALLOCATE.invokeExact(byte.class, CHUNK);
        }
        sink = null;
    }

    private static MethodHandle findAllocate() {
        if (!youngCollectorIsCopying()) {
            return null;
        }
        try {
            Class<?> unsafeClass = Class.forName("jdk.internal.misc.Unsafe");
            Object unsafe = unsafeClass.getMethod("getUnsafe").invoke(null);
            MethodHandle mh = MethodHandles.lookup().findVirtual(unsafeClass, "allocateUninitializedArray",
                    MethodType.methodType(Object.class, Class.class, int.class));
            return mh.bindTo(unsafe).asType(MethodType.methodType(byte[].class, Class.class, int.class));
        } catch (ReflectiveOperationException | RuntimeException | LinkageError e) {
            return null; // not exported to this module: full collections only
        }
    }

    /** The serial ("Copy") or parallel ("PS Scavenge") young collector. */
    private static boolean youngCollectorIsCopying() {
        for (GarbageCollectorMXBean gc : ManagementFactory.getGarbageCollectorMXBeans()) {
            String n = gc.getName();
            if (n.equals("Copy") || n.equals("PS Scavenge")) {
                return true;
            }
        }
        return false;
    }

    private static MemoryPoolMXBean findEden() {
        for (MemoryPoolMXBean p : ManagementFactory.getMemoryPoolMXBeans()) {
            if (p.getType() == MemoryType.HEAP && p.getName().endsWith("Eden Space")) {
                return p;
            }
        }
        return null;
    }
}
