package io.jcomm.runtime.mem;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.jcomm.api.DType;
import io.jcomm.api.Tensor;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** The receive pool: bounded, recycling, and never handing out memory a caller can still reach. */
class ReceivePoolTest {

    private static final int MIB = 1 << 20;

    @BeforeEach
    void needsTheJvmFlags() {
        assumeTrue(ReceivePool.available(), "the SDK's JVM flags (--add-opens java.base/java.nio) are missing");
    }

    private static long address(Tensor t) {
        return DirectBuffers.address(t.buffer());
    }

    @Test
    void classesArePowersOfTwoFrom4KiB() {
        assertEquals(12, ReceivePool.classOf(1));
        assertEquals(12, ReceivePool.classOf(4096));
        assertEquals(13, ReceivePool.classOf(4097));
        assertEquals(20, ReceivePool.classOf(MIB));
        assertEquals(21, ReceivePool.classOf(MIB + 1));
    }

    @Test
    void aStreamOfDroppedTensorsStaysWithinTheBudgetAndReusesMemory() {
        ReceivePool pool = new ReceivePool(16L * MIB);
        for (int i = 0; i < 400; i++) {
            Tensor t = pool.allocate(DType.F32, MIB / 4);
            assertEquals(MIB, t.byteSize());
            assertEquals(0, address(t) % Tensor.ALIGNMENT);
            t.setDouble(0, i);
            assertTrue(pool.leasedBytes() + pool.pooledBytes() <= 17L * MIB,
                    "leased " + pool.leasedBytes() + " + pooled " + pool.pooledBytes());
        }
        assertTrue(pool.collections() >= 1, "the pool asked for collections");
        assertTrue(pool.blocksAllocated() <= 24, "400 tensors of 1 MiB used " + pool.blocksAllocated() + " blocks");
    }

    @Test
    void aTensorStillHeldIsNeverHandedOutAgain() {
        ReceivePool pool = new ReceivePool(8L * MIB);
        Tensor kept = pool.allocate(DType.F32, MIB / 4);
        kept.fill(7);
        ByteBuffer view = pool.allocate(DType.F32, MIB / 4).buffer().slice(); // only a view is kept
        view.putFloat(0, 3f);
        long keptAddress = address(kept);
        long viewAddress = DirectBuffers.address(view);
        for (int i = 0; i < 200; i++) {
            Tensor t = pool.allocate(DType.F32, MIB / 4);
            assertNotEquals(keptAddress, address(t), "a held tensor's memory was handed out at " + i);
            assertNotEquals(viewAddress, address(t), "a held view's memory was handed out at " + i);
            t.fill(-1);
        }
        for (long i = 0; i < kept.numel(); i += 997) {
            assertEquals(7.0, kept.getDouble(i));
        }
        assertEquals(3f, view.getFloat(0));
    }

    @Test
    void memoryHeldBeyondTheBudgetIsAllocatedNotReused() {
        ReceivePool pool = new ReceivePool(4L * MIB);
        List<Tensor> held = new ArrayList<>();
        Set<Long> addresses = new HashSet<>();
        for (int i = 0; i < 12; i++) {
            Tensor t = pool.allocate(DType.U8, MIB);
            t.fill(i);
            held.add(t);
            assertTrue(addresses.add(address(t)), "block reused while held");
        }
        for (int i = 0; i < held.size(); i++) {
            assertEquals(i, held.get(i).getDouble(MIB - 1));
        }
        assertEquals(12L * MIB, pool.leasedBytes());
    }

    @Test
    void largeOrEmptyTensorsAreThePlainAllocation() {
        ReceivePool pool = new ReceivePool(4L * MIB);
        assertEquals(0, pool.allocate(DType.F32, 0).numel());
        assertEquals(0, pool.leasedBytes());
    }
}
