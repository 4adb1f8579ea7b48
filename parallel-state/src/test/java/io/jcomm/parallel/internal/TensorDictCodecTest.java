package io.jcomm.parallel.internal;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.ObjectCodec;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.codec.ForyCodec;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import org.junit.jupiter.api.Test;

class TensorDictCodecTest {

    /** A registered application type, as a plain value in a dict. */
    public record Step(int index, String phase) {
    }

    private static final ObjectCodec CODEC = ForyCodec.builder().register(Step.class).build();

    private static Map<String, Object> sample() {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("hidden", Tensor.allocate(DType.BF16, 2, 3, 4));
        d.put("positions", Tensor.ofLongs(1, 2, 3));
        d.put("gpu", Tensor.onDevice(Device.cuda(1), 0x1000, DType.F16, new long[] {8}, null));
        d.put("scalar", Tensor.allocate(DType.F32));
        d.put("empty", Tensor.allocate(DType.I32, 0, 5));
        d.put("step", new Step(3, "decode"));
        d.put("names", List.of("a", "b"));
        d.put("nothing", null);
        d.put("ключ", 42); // keys are UTF-8
        return d;
    }

    @Test
    void roundTripKeepsOrderDescriptionsAndValues() {
        byte[] bytes = TensorDictCodec.encode(sample(), CODEC);
        List<TensorDictCodec.Entry> entries = TensorDictCodec.decode(bytes, CODEC);
        assertEquals(List.of("hidden", "positions", "gpu", "scalar", "empty", "step", "names", "nothing", "ключ"),
                entries.stream().map(TensorDictCodec.Entry::key).toList());
        assertEquals(new TensorDictCodec.TensorEntry("hidden", "cpu", DType.BF16, new long[] {2, 3, 4}), entries.get(0));
        TensorDictCodec.TensorEntry gpu = (TensorDictCodec.TensorEntry) entries.get(2);
        assertEquals("cuda", gpu.deviceType()); // the device type travels, not the sender's ordinal
        assertTrue(!gpu.isHost() && gpu.numel() == 8);
        assertArrayEquals(new long[0], ((TensorDictCodec.TensorEntry) entries.get(3)).shape());
        assertEquals(0, ((TensorDictCodec.TensorEntry) entries.get(4)).numel());
        assertEquals(new Step(3, "decode"), ((TensorDictCodec.ValueEntry) entries.get(5)).value());
        assertEquals(List.of("a", "b"), ((TensorDictCodec.ValueEntry) entries.get(6)).value());
        assertNull(((TensorDictCodec.ValueEntry) entries.get(7)).value());
        assertEquals(42, ((TensorDictCodec.ValueEntry) entries.get(8)).value());
    }

    @Test
    void exactBytesOfASmallDict() {
        Map<String, Object> d = new LinkedHashMap<>();
        d.put("x", Tensor.allocate(DType.F32, 2, 3));
        byte[] bytes = TensorDictCodec.encode(d, CODEC);
        ByteBuffer b = ByteBuffer.allocate(4 + 4 + 2 + 1 + 1 + 1 + 3 + 1 + 1 + 16).order(ByteOrder.LITTLE_ENDIAN);
        b.put(new byte[] {'J', 'T', 'D', '1'}).putInt(1).putShort((short) 1).put((byte) 'x').put((byte) 1)
                .put((byte) 3).put(new byte[] {'c', 'p', 'u'}).put(DType.F32.code()).put((byte) 2).putLong(2).putLong(3);
        assertArrayEquals(b.array(), bytes);
    }

    @Test
    void refusesBadInputBeforeAllocating() {
        byte[] good = TensorDictCodec.encode(sample(), CODEC);
        // truncated anywhere
        for (int n = 0; n < good.length; n += 7) {
            byte[] cut = java.util.Arrays.copyOf(good, n);
            assertThrows(ProtocolException.class, () -> TensorDictCodec.decode(cut, CODEC), "cut at " + n);
        }
        // trailing bytes
        assertThrows(ProtocolException.class, () -> TensorDictCodec.decode(java.util.Arrays.copyOf(good, good.length + 1), CODEC));
        // bad magic
        byte[] magic = good.clone();
        magic[0] = 'X';
        assertThrows(ProtocolException.class, () -> TensorDictCodec.decode(magic, CODEC));
        // a huge entry count in a few bytes
        ByteBuffer lie = ByteBuffer.allocate(12).order(ByteOrder.LITTLE_ENDIAN).putInt(TensorDictCodec.MAGIC).putInt(60_000).putInt(0);
        ProtocolException e = assertThrows(ProtocolException.class, () -> TensorDictCodec.decode(lie.array(), CODEC));
        assertTrue(e.getMessage().contains("60000"), e.getMessage());
        // negative dimension, overflowing shape, unknown dtype, duplicate key, unregistered value type
        assertThrows(ProtocolException.class, () -> TensorDictCodec.decode(tensor("a", (byte) 3, -1L), CODEC));
        assertThrows(ProtocolException.class, () -> TensorDictCodec.decode(tensor("a", (byte) 3, 1L << 40, 1L << 40), CODEC));
        assertThrows(ProtocolException.class, () -> TensorDictCodec.decode(tensor("a", (byte) 99, 1L), CODEC));
        ByteBuffer dup = ByteBuffer.allocate(64).order(ByteOrder.LITTLE_ENDIAN).putInt(TensorDictCodec.MAGIC).putInt(2);
        dup.putShort((short) 1).put((byte) 'k').put((byte) 3).putShort((short) 1).put((byte) 'k').put((byte) 3);
        byte[] dupBytes = java.util.Arrays.copyOf(dup.array(), dup.position());
        assertTrue(assertThrows(ProtocolException.class, () -> TensorDictCodec.decode(dupBytes, CODEC)).getMessage()
                .contains("duplicate"));
        byte[] foreign = TensorDictCodec.encode(Map.of("s", new Step(1, "p")), CODEC);
        assertThrows(ProtocolException.class, () -> TensorDictCodec.decode(foreign, ForyCodec.defaults()));
        // encoding refuses values the codec does not know
        assertThrows(IllegalArgumentException.class, () -> TensorDictCodec.encode(Map.of("t", new Thread()), CODEC));
    }

    private static byte[] tensor(String key, byte dtype, long... dims) {
        ByteBuffer b = ByteBuffer.allocate(64 + 8 * dims.length).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(TensorDictCodec.MAGIC).putInt(1).putShort((short) key.length()).put(key.getBytes()).put((byte) 1)
                .put((byte) 3).put(new byte[] {'c', 'p', 'u'}).put(dtype).put((byte) dims.length);
        for (long d : dims) {
            b.putLong(d);
        }
        return java.util.Arrays.copyOf(b.array(), b.position());
    }

    @Test
    void randomBytesOnlyEverGiveProtocolExceptions() {
        Random rnd = new Random(1234);
        byte[] good = TensorDictCodec.encode(sample(), CODEC);
        for (int i = 0; i < 5000; i++) {
            byte[] b = good.clone();
            int flips = 1 + rnd.nextInt(4);
            for (int f = 0; f < flips; f++) {
                b[8 + rnd.nextInt(b.length - 8)] = (byte) rnd.nextInt(256);
            }
            try {
                TensorDictCodec.decode(b, CODEC);
            } catch (ProtocolException expected) {
                // the only acceptable failure
            }
        }
    }
}
