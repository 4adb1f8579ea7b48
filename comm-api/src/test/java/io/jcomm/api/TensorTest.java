package io.jcomm.api;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import org.junit.jupiter.api.Test;

class TensorTest {

    @Test
    void allocateIsZeroedAlignedLittleEndian() {
        Tensor t = Tensor.allocate(DType.F32, 2, 3);
        assertEquals(6, t.numel());
        assertEquals(24, t.byteSize());
        assertEquals(2, t.dim());
        assertEquals(3, t.size(-1));
        assertTrue(t.isHost());
        assertEquals(Device.CPU, t.device());
        assertEquals(ByteOrder.LITTLE_ENDIAN, t.buffer().order());
        assertEquals(0, t.buffer().alignmentOffset(0, Tensor.ALIGNMENT), "64-byte aligned");
        assertArrayEquals(new double[6], t.toDoubleArray());
        t.setDouble(4, 2.5);
        assertEquals(0x40200000, t.buffer().getInt(16)); // 2.5f little-endian
        assertEquals("Tensor(f32[2,3] cpu)", t.toString());
    }

    @Test
    void wrapSharesMemoryWithoutCopy() {
        ByteBuffer direct = ByteBuffer.allocateDirect(64).order(ByteOrder.LITTLE_ENDIAN);
        direct.position(8);
        Tensor t = Tensor.wrap(direct, DType.I64, 2);
        assertEquals(8, direct.position(), "wrap must not move the caller's buffer");
        t.setLong(1, 42);
        assertEquals(42, direct.getLong(16));
        assertThrows(IllegalArgumentException.class, () -> Tensor.wrap(ByteBuffer.allocate(16), DType.U8, 4));
        assertThrows(IllegalArgumentException.class, () -> Tensor.wrap(direct, DType.I64, 8));
    }

    @Test
    void slicesAndReshapesShareMemory() {
        Tensor t = Tensor.ofInts(0, 1, 2, 3, 4, 5).reshape(3, 2);
        Tensor rows = t.slice0(1, 2);
        assertArrayEquals(new long[] {2, 2}, rows.shape());
        assertArrayEquals(new long[] {2, 3, 4, 5}, rows.toLongArray());
        rows.setLong(0, 20);
        assertEquals(20, t.getLong(2));
        assertArrayEquals(new long[] {3, 4}, t.flatSlice(3, 2).toLongArray());
        assertThrows(IllegalArgumentException.class, () -> t.reshape(4));
        assertThrows(IndexOutOfBoundsException.class, () -> t.flatSlice(5, 2));
    }

    @Test
    void everyDtypeStoresAndLoads() {
        for (DType d : DType.values()) {
            Tensor t = Tensor.allocate(d, 3);
            t.setDouble(0, 1);
            t.setDouble(1, d == DType.BOOL ? 1 : 3);
            assertEquals(1, t.getDouble(0), d.name());
            assertEquals(d == DType.BOOL ? 1 : 3, t.getDouble(1), d.name());
            assertEquals(3L * d.byteSize(), t.byteSize());
            assertEquals(d, DType.fromCode(d.code()));
            assertEquals(d, DType.parse(d.shortName()));
            assertEquals(d, DType.parse(d.torchName()));
        }
        Tensor big = Tensor.allocate(DType.I64, 1);
        big.setLong(0, Long.MAX_VALUE - 1);
        assertEquals(Long.MAX_VALUE - 1, big.getLong(0));
        assertThrows(ProtocolException.class, () -> DType.fromCode(0));
        assertThrows(ProtocolException.class, () -> DType.fromCode(200));
    }

    @Test
    void deviceTensorsHaveAddressNotBuffer() {
        Object owner = new Object();
        Tensor d = Tensor.onDevice(Device.cuda(1), 0x1000, DType.F16, new long[] {4, 4}, owner);
        assertFalse(d.isHost());
        assertEquals(0x1000, d.address());
        assertEquals(0x1000 + 2 * 4 * 2, d.slice0(2, 1).address());
        assertEquals(owner, d.owner());
        assertThrows(IllegalStateException.class, d::buffer);
        assertThrows(IllegalStateException.class, () -> d.getDouble(0));
        assertThrows(IllegalStateException.class, () -> Tensor.ofFloats(1f).address());
        assertThrows(IllegalArgumentException.class, () -> Tensor.onDevice(Device.CPU, 1, DType.U8, new long[] {1}, null));
    }

    @Test
    void contentEqualsComparesDtypeShapeAndBytes() {
        assertTrue(Tensor.ofFloats(1, 2).contentEquals(Tensor.ofFloats(1, 2)));
        assertFalse(Tensor.ofFloats(1, 2).contentEquals(Tensor.ofFloats(1, 3)));
        assertFalse(Tensor.ofInts(1).contentEquals(Tensor.ofFloats(Float.intBitsToFloat(1))));
        Tensor c = Tensor.allocate(DType.F32, 2);
        c.copyFrom(Tensor.ofFloats(7, 8));
        assertArrayEquals(new double[] {7, 8}, c.toDoubleArray());
    }
}
