package io.jcomm.kvcache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.ProtocolException;
import io.jcomm.transfer.MemoryKind;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import org.junit.jupiter.api.Test;

class PrefixTreeTest {

    static final BlockHasher H = new BlockHasher("m@1", 4);
    static final BlockOwner OWNER = new BlockOwner(1000, 5);

    static int[] prompt(int n, int seed) {
        int[] t = new int[n];
        for (int i = 0; i < n; i++) {
            t[i] = seed * 1000 + i;
        }
        return t;
    }

    static BlockLocation at(String instance, KvSlice s, int block) {
        return new BlockLocation(instance, new RemoteDescriptor(instance + "-agent", 1, 1, MemoryKind.SHARED, 64L * block, 64,
                Set.of(Permission.READ)), s, 4, new int[s.heads()], OWNER, 1);
    }

    /** Stored events of the first {@code blocks} blocks of {@code tokens}, for one slice. */
    static List<KvEvent> stored(String instance, int[] tokens, int blocks, KvSlice slice) {
        List<BlockHash> h = H.fullBlocks(tokens);
        List<KvEvent> out = new ArrayList<>();
        for (int b = 0; b < blocks; b++) {
            out.add(new KvEvent.Stored(h.get(b), b == 0 ? H.root() : h.get(b - 1), 8, 2, at(instance, slice, b)));
        }
        return out;
    }

    @Test
    void anInstanceHoldsABlockOnlyWhenItsSlicesCoverTheModel() {
        PrefixTree t = new PrefixTree(1000);
        int[] p = prompt(24, 1); // 6 blocks
        List<BlockHash> h = H.fullBlocks(p);
        // job A at TP2: two ranks, two slices each, 4 blocks
        for (KvEvent e : stored("A", p, 4, KvSlice.ofRank(8, 2, 0, 2, 0, 1))) {
            t.apply("A-0", e);
        }
        assertEquals(Map.of(), t.longestPrefix(h), "half the heads are not a block");
        for (KvEvent e : stored("A", p, 3, KvSlice.ofRank(8, 2, 1, 2, 0, 1))) {
            t.apply("A-1", e);
        }
        // job B at TP1: 5 blocks
        for (KvEvent e : stored("B", p, 5, KvSlice.whole(8, 2))) {
            t.apply("B-0", e);
        }
        assertEquals(Map.of("A", 3, "B", 5), t.longestPrefix(h));
        assertEquals(Map.of("A", 3, "B", 5), t.longestPrefix(h.subList(0, 6)));
        assertTrue(t.locate(h.get(3), KvSlice.ofRank(8, 2, 0, 2, 0, 1)).isPresent());
        assertFalse(t.locate(h.get(3), KvSlice.ofRank(8, 2, 1, 2, 0, 1)).isPresent());
        // B removes block 2: B's prefix ends at 2
        t.apply("B-0", new KvEvent.Removed(h.get(2), KvSlice.whole(8, 2), "B"));
        assertEquals(Map.of("A", 3, "B", 2), t.longestPrefix(h));
        // A's rank 1 clears: A holds no complete block
        t.apply("A-1", new KvEvent.Cleared());
        assertEquals(Map.of("B", 2), t.longestPrefix(h));
        // a snapshot of B-0 replaces what B-0 had
        t.apply(new KvEventBatch("B-0", "h", 0, true, stored("B", p, 1, KvSlice.whole(8, 2))));
        assertEquals(Map.of("B", 1), t.longestPrefix(h));
        t.apply("A-0", new KvEvent.Cleared());
        t.apply("B-0", new KvEvent.Cleared());
        assertEquals(0, t.size(), "nodes nobody holds are pruned");
    }

    @Test
    void theTreeIsBounded() {
        PrefixTree t = new PrefixTree(3);
        for (KvEvent e : stored("A", prompt(40, 2), 10, KvSlice.whole(8, 2))) {
            t.apply("A-0", e);
        }
        assertEquals(3, t.size());
        assertEquals(7, t.dropped());
    }

    @Test
    void theRouterWeighsCachedPrefixAgainstLoad() {
        PrefixTree t = new PrefixTree(1000);
        int[] p = prompt(40, 3); // 10 blocks
        for (KvEvent e : stored("A", p, 8, KvSlice.whole(8, 2))) {
            t.apply("A-0", e);
        }
        for (KvEvent e : stored("B", p, 2, KvSlice.whole(8, 2))) {
            t.apply("B-0", e);
        }
        KvRouter r = new KvRouter(t, H, 0.5);
        KvRouter.Route route = r.route(p, List.of("A", "B", "C"));
        assertEquals("A", route.instance());
        assertEquals(32, route.cachedTokens());
        assertEquals(8.0, route.cost());
        // A busy: 40 tokens in flight cost 20; B: 32 uncached; C: 40
        r.started("A", 40);
        assertEquals("A", r.route(p, List.of("A", "B", "C")).instance(), "8 + 20 < 32");
        r.started("A", 20);
        assertEquals("B", r.route(p, List.of("A", "B", "C")).instance(), "8 + 30 > 32");
        r.finished("A", 60);
        assertEquals(0, r.load("A"));
        // a prompt nobody holds goes to the least loaded, ties by name
        r.started("B", 4);
        assertEquals("A", r.route(prompt(12, 9), List.of("B", "A")).instance());
        assertThrows(IllegalArgumentException.class, () -> r.route(p, List.of()));
    }

    @Test
    void batchesRoundTripAndMalformedOnesAreRefused() {
        List<KvEvent> events = new ArrayList<>(stored("A", prompt(12, 4), 3, KvSlice.ofRank(8, 2, 1, 2, 1, 2)));
        events.add(new KvEvent.Removed(H.fullBlocks(prompt(12, 4)).get(0), KvSlice.whole(8, 2), "A"));
        events.add(new KvEvent.Cleared());
        KvEventBatch b = new KvEventBatch("pub-0", "host-a", 7, true, events);
        byte[] bytes = b.encode();
        KvEventBatch d = KvEventBatch.decode(bytes);
        assertEquals(b, d);
        Random r = new Random(3);
        int refused = 0;
        for (int i = 0; i < 20_000; i++) {
            byte[] x = bytes.clone();
            for (int f = 0; f < 1 + r.nextInt(3); f++) {
                x[r.nextInt(x.length)] = (byte) r.nextInt(256);
            }
            if (r.nextInt(3) == 0) {
                x = java.util.Arrays.copyOf(x, r.nextInt(x.length));
            }
            try {
                KvEventBatch.decode(x);
            } catch (ProtocolException e) {
                refused++;
            }
        }
        assertTrue(refused > 1000, refused + " refused");
    }
}
