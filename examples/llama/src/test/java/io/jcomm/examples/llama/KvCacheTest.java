package io.jcomm.examples.llama;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.ByteBuffer;
import java.util.List;
import org.junit.jupiter.api.Test;

class KvCacheTest {

    @Test
    void rowsGoInHeadMajorRunsAndComeBackPositionMajor() {
        int layers = 2;
        int capacity = 5;
        int heads = 3;
        int dim = 4;
        KvCache c = new KvCache(ByteBuffer.allocateDirect((int) KvCache.bytes(layers, capacity, heads * dim)), layers, capacity,
                heads, dim);
        float[] row = new float[heads * dim];
        for (int p = 0; p < capacity; p++) {
            for (int i = 0; i < row.length; i++) {
                row[i] = 1000 * p + i;
            }
            c.put(1, KvCache.VALUES, p, row, 0);
        }
        float[] back = new float[capacity * heads * dim];
        c.read(1, KvCache.VALUES, capacity, back);
        for (int p = 0; p < capacity; p++) {
            for (int i = 0; i < heads * dim; i++) {
                assertEquals(1000 * p + i, back[p * heads * dim + i]);
            }
        }
        // head 2's run of positions 1..3 is contiguous: positions' dims 8..11
        ByteBuffer m = c.memory();
        int o = (int) c.byteOffset(1, KvCache.VALUES, 2, 1);
        float[] run = new float[3 * dim];
        m.position(o);
        m.asFloatBuffer().get(run);
        assertArrayEquals(new float[] {1008, 1009, 1010, 1011, 2008, 2009, 2010, 2011, 3008, 3009, 3010, 3011}, run);
        assertEquals(3L * dim * Float.BYTES, c.headRowBytes(3));
    }

    @Test
    void aSharedPrefixWorkloadAsksEachGroupsQuestionsRoundRobin() {
        List<Request> r = Request.sharedPrefix(3, 2, 10, 4, 5, 8000);
        assertEquals(6, r.size());
        for (int i = 0; i < 6; i++) {
            int g = i % 3;
            assertArrayEquals(java.util.Arrays.copyOf(r.get(g).prompt(), 10), java.util.Arrays.copyOf(r.get(i).prompt(), 10));
            assertEquals(14, r.get(i).prompt().length);
            assertEquals(5, r.get(i).maxNewTokens());
        }
        assertEquals(false, java.util.Arrays.equals(r.get(0).prompt(), r.get(3).prompt()), "questions differ");
        assertEquals(false, r.get(0).prompt()[0] == r.get(1).prompt()[0], "system prompts differ");
    }
}
