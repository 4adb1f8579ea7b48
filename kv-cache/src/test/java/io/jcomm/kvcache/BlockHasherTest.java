package io.jcomm.kvcache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.List;
import org.junit.jupiter.api.Test;

class BlockHasherTest {

    private static int[] tokens(int n, int seed) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = (seed * 7919 + i * 31) % 32000;
        }
        return t;
    }

    @Test
    void equalPrefixesNameEqualBlocksAndTheChainDivergesAtTheFirstDifference() {
        BlockHasher a = new BlockHasher("llama@abc", 16);
        BlockHasher b = new BlockHasher("llama@abc", 16); // another process, another host
        int[] x = tokens(70, 1);
        int[] y = x.clone();
        y[40] += 1; // in block 2
        List<BlockHash> hx = a.fullBlocks(x);
        List<BlockHash> hy = b.fullBlocks(y);
        assertEquals(4, hx.size());
        assertEquals(hx.subList(0, 2), hy.subList(0, 2));
        assertNotEquals(hx.get(2), hy.get(2));
        assertNotEquals(hx.get(3), hy.get(3), "every later block names its whole prefix");
        assertEquals(hx, a.prefixHashes(x, 64, false));
        assertEquals(5, a.prefixHashes(x, 70, true).size());
    }

    @Test
    void modelBlockSizeSaltAndPartialTailsNameOtherBlocks() {
        int[] x = tokens(32, 2);
        BlockHash base = new BlockHasher("m@1", 16).fullBlocks(x).get(0);
        assertNotEquals(base, new BlockHasher("m@2", 16).fullBlocks(x).get(0));
        assertNotEquals(base, new BlockHasher("m@1", 16, "tenant-a").fullBlocks(x).get(0));
        assertNotEquals(base, new BlockHasher("m@1", 8).prefixHashes(x, 16, false).get(1));
        BlockHasher h = new BlockHasher("m@1", 16);
        BlockHash partial = h.prefixHashes(x, 15, true).get(0);
        assertNotEquals(base, partial);
        assertEquals(h.next(h.root(), x, 0, 15), partial);
    }

    @Test
    void aSliceIsPartOfABlocksName() {
        BlockHash p = new BlockHasher("m", 16).fullBlocks(tokens(16, 3)).get(0);
        KvSlice rank0 = KvSlice.ofRank(8, 2, 0, 2, 0, 1);
        KvSlice rank1 = KvSlice.ofRank(8, 2, 1, 2, 0, 1);
        assertEquals(new KvSlice(0, 8, 0, 1), rank0);
        assertEquals(new KvSlice(0, 8, 1, 2), rank1);
        assertNotEquals(BlockHasher.blockKey(p, rank0), BlockHasher.blockKey(p, rank1));
        assertNotEquals(BlockHasher.blockKey(p, rank0), BlockHasher.blockKey(p, KvSlice.whole(8, 2)));
        assertEquals(BlockHasher.blockKey(p, rank0), BlockHasher.blockKey(p, new KvSlice(0, 8, 0, 1)));
        assertEquals(new KvSlice(4, 8, 1, 2), KvSlice.ofRank(8, 2, 1, 2, 1, 2));
        assertEquals(new KvSlice(0, 8, 1, 2), KvSlice.whole(8, 2).intersect(rank1));
        assertThrows(IllegalArgumentException.class, () -> KvSlice.ofRank(8, 2, 0, 4, 0, 1));
    }
}
