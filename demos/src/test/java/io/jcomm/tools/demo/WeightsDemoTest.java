package io.jcomm.tools.demo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.ProtocolException;
import io.jcomm.transfer.MemoryKind;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.List;
import java.util.Set;
import java.util.stream.IntStream;
import org.junit.jupiter.api.Test;

/** The weight-update demo's pure parts: tensor sizes, shards, placement in regions, the pattern, descriptor lists. */
class WeightsDemoTest {

    @Test
    void tensorSizesAreUnevenMultiplesOfEightThatAddUp() {
        for (long total : new long[] {2048L << 20, 80L << 20, 1 << 12, 1000 * 8}) {
            for (int tensors : new int[] {1, 3, 64, 100}) {
                if (total / 8 < 2L * tensors) {
                    continue;
                }
                long[] sizes = WeightsDemo.tensorSizes(total, tensors);
                assertEquals(tensors, sizes.length);
                assertEquals(total, Arrays.stream(sizes).sum(), total + " in " + tensors);
                assertTrue(Arrays.stream(sizes).allMatch(s -> s > 0 && s % 8 == 0), Arrays.toString(sizes));
                if (tensors >= 8 && total >= 1 << 20) {
                    long max = Arrays.stream(sizes).max().orElseThrow();
                    long min = Arrays.stream(sizes).min().orElseThrow();
                    assertTrue(max >= 3 * min, "uneven: " + min + ".." + max);
                }
            }
        }
    }

    @Test
    void everyTensorHasOneOwnerAndShardsAreBalancedByBytes() {
        long[] sizes = WeightsDemo.tensorSizes(2048L << 20, 64);
        long largest = Arrays.stream(sizes).max().orElseThrow();
        for (int trainers : new int[] {1, 2, 3, 7, 64}) {
            int[] owner = WeightsDemo.owners(sizes, trainers);
            assertArrayEquals(owner, WeightsDemo.owners(sizes.clone(), trainers), "deterministic");
            long[] load = new long[trainers];
            int tensors = 0;
            for (int t = 0; t < trainers; t++) {
                int[] shard = WeightsDemo.shard(owner, t);
                assertTrue(shard.length > 0, "rank " + t + " of " + trainers + " owns a tensor");
                tensors += shard.length;
                for (int i : shard) {
                    assertEquals(t, owner[i]);
                    load[t] += sizes[i];
                }
            }
            assertEquals(64, tensors);
            long spread = Arrays.stream(load).max().orElseThrow() - Arrays.stream(load).min().orElseThrow();
            assertTrue(spread <= largest, trainers + " ranks: " + Arrays.toString(load));
        }
    }

    @Test
    void placementKeepsEachTensorInOneRegionWithinTheLimit() {
        long[] sizes = WeightsDemo.tensorSizes(96L << 20, 13);
        long limit = 24L << 20;
        int[] all = IntStream.range(0, sizes.length).toArray();
        WeightsDemo.Placement p = WeightsDemo.place(sizes, all, limit);
        assertTrue(p.regionBytes().length >= 4, Arrays.toString(p.regionBytes()));
        assertEquals(96L << 20, Arrays.stream(p.regionBytes()).sum());
        long[] used = new long[p.regionBytes().length];
        for (int k = 0; k < all.length; k++) {
            assertEquals(used[p.region()[k]], p.offset()[k], "tensor " + k + " follows the one before in its region");
            used[p.region()[k]] += sizes[k];
        }
        assertArrayEquals(p.regionBytes(), used);
        assertTrue(Arrays.stream(p.regionBytes()).allMatch(b -> b <= limit));
        // a shard: its own tensors only, in order
        int[] shard = {1, 4, 7};
        WeightsDemo.Placement s = WeightsDemo.place(sizes, shard, 1L << 30);
        assertArrayEquals(new long[] {sizes[1] + sizes[4] + sizes[7]}, s.regionBytes());
        assertArrayEquals(new long[] {0, sizes[1], sizes[1] + sizes[4]}, s.offset());
        assertThrows(IllegalArgumentException.class, () -> WeightsDemo.place(sizes, all, 8));
    }

    @Test
    void shapeProblemsNameTheOption() {
        assertNull(new WeightsDemo.Shape(2048L << 20, 64, 3, 1L << 30).problem());
        assertNull(new WeightsDemo.Shape(80L << 20, 13, 2, 16L << 20).problem());
        assertTrue(new WeightsDemo.Shape(64L << 20, 2, 3, 16L << 20).problem().contains("--region-mib"));
        assertTrue(new WeightsDemo.Shape(64, 64, 3, 1L << 30).problem().contains("--weights-mib"));
        assertTrue(new WeightsDemo.Shape(64L << 20, 0, 3, 1L << 30).problem().contains("--tensors"));
        assertTrue(new WeightsDemo.Shape(64L << 20, 4, 0, 1L << 30).problem().contains("--versions"));
        assertNotNull(new WeightsDemo.Shape(64L << 20, 4, 1, 4L << 30).problem());
    }

    @Test
    void theVersionsPatternsTellEveryWordApart() {
        ByteBuffer b = ByteBuffer.allocate(4096).order(ByteOrder.LITTLE_ENDIAN);
        BytePattern.fill(b, 64, 1024, WeightsDemo.seed(2, 5));
        assertEquals(0, BytePattern.wrongBytes(b, 64, 1024, WeightsDemo.seed(2, 5)));
        assertTrue(BytePattern.wrongBytes(b, 64, 1024, WeightsDemo.seed(1, 5)) > 1000, "the version before");
        assertTrue(BytePattern.wrongBytes(b, 64, 1024, WeightsDemo.seed(2, 6)) > 1000, "another tensor");
        assertTrue(BytePattern.wrongBytes(b, 72, 1016, WeightsDemo.seed(2, 5)) > 1000, "shifted by a word");
        b.put(100, (byte) (b.get(100) ^ 1));
        assertEquals(1, BytePattern.wrongBytes(b, 64, 1024, WeightsDemo.seed(2, 5)));
    }

    @Test
    void descriptorListsRoundTripAndRejectGarbage() {
        List<RemoteDescriptor> ds = List.of(
                new RemoteDescriptor("weights-engine-0", 0, 7, MemoryKind.SHARED, 0, 1L << 30, Set.of(Permission.WRITE)),
                new RemoteDescriptor("weights-engine-0", 1, 8, MemoryKind.SHARED, 0, 12345, Set.of(Permission.WRITE)));
        byte[] enc = WeightsDemo.encodeDescriptors(ds);
        assertEquals(ds, WeightsDemo.decodeDescriptors(enc));
        assertThrows(ProtocolException.class, () -> WeightsDemo.decodeDescriptors(Arrays.copyOf(enc, enc.length - 1)));
        assertThrows(ProtocolException.class, () -> WeightsDemo.decodeDescriptors(Arrays.copyOf(enc, enc.length + 1)));
        assertThrows(ProtocolException.class, () -> WeightsDemo.decodeDescriptors(new byte[] {(byte) 0xff, 0, 0, 0x7f}));
        assertThrows(ProtocolException.class, () -> WeightsDemo.decodeDescriptors(new byte[2]));
    }
}
