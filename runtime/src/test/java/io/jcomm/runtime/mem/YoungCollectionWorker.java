package io.jcomm.runtime.mem;

import io.jcomm.api.DType;
import io.jcomm.api.Tensor;
import java.util.ArrayList;
import java.util.List;

/**
 * Run in its own JVM by {@link YoungCollectionTest} (with a chosen collector): streams dropped tensors through a
 * 16 MiB pool, first with one tensor held throughout, then after a set of tensors held long enough to be
 * promoted to the old generation is dropped; prints the pool's counters after each phase and checks that
 * nothing held was overwritten.
 */
public final class YoungCollectionWorker {

    private static final int MIB = 1 << 20;

    public static void main(String[] args) {
        ReceivePool pool = new ReceivePool(16L * MIB);
        Tensor kept = pool.allocate(DType.U8, MIB);
        kept.fill(7);
        for (int i = 0; i < 400; i++) {
            Tensor t = pool.allocate(DType.U8, MIB);
            t.fill(i & 0x7f);
            check(pool.leasedBytes() + pool.pooledBytes() <= 18L * MIB, "over the budget at " + i);
        }
        check(kept.getDouble(0) == 7 && kept.getDouble(MIB - 1) == 7, "the held tensor was overwritten");
        System.out.println("stream young=" + pool.youngCollections() + " full=" + pool.fullCollections()
                + " blocks=" + pool.blocksAllocated());
        // 12 MiB held across many young collections (promoted), then dropped: only a full collection finds them
        List<Tensor> old = new ArrayList<>();
        for (int i = 0; i < 12; i++) {
            old.add(pool.allocate(DType.U8, MIB));
        }
        for (int i = 0; i < 40; i++) {
            YoungCollection.run();
        }
        old.clear();
        long fullBefore = pool.fullCollections();
        for (int i = 0; i < 100; i++) {
            pool.allocate(DType.U8, MIB).fill(1);
            check(pool.leasedBytes() + pool.pooledBytes() <= 18L * MIB, "over the budget after the old ones at " + i);
        }
        check(kept.getDouble(MIB / 2) == 7, "the held tensor was overwritten");
        // the default pool's budget settles once it holds 64 MiB: half the default where young collections work
        ReceivePool byDefault = new ReceivePool(128L * MIB, 64L * MIB);
        List<Tensor> held = new ArrayList<>();
        for (int i = 0; i < 70; i++) {
            held.add(byDefault.allocate(DType.U8, MIB));
        }
        System.out.println("old young=" + pool.youngCollections() + " full=" + (pool.fullCollections() - fullBefore)
                + " available=" + YoungCollection.available() + " budget=" + (byDefault.budget() >> 20) + " held=" + held.size());
    }

    private static void check(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }
}
