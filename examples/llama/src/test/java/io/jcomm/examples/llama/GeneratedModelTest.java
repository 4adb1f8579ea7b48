package io.jcomm.examples.llama;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelStateOptions;
import io.jcomm.parallel.testkit.ThreadJob;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The demo's own path without torch: a model written by {@link ModelGenerator}, sharded over TP2 x PP2
 * (threads), against one process running the same weights; a vocabulary that TP does not divide.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class GeneratedModelTest {

    private static final Duration T = Duration.ofSeconds(30);

    @TempDir
    Path dir;

    @Test
    void shardedEqualsOneProcessWithAnUnevenVocabulary() {
        // 1,001 rows over TP2: 501 and 500, the last shard's padding row cut off after the gather
        LlamaConfig c = new LlamaConfig(64, 96, 3, 4, 2, 16, 1001, 1e-5, 500000.0, false);
        ModelGenerator.write(dir, c, 7, "BF16");
        assertEquals(c, LlamaConfig.read(dir.resolve("config.json")));
        List<Request> requests = Request.defaults(2, 20, c.vocab());
        Engine.Result single = SingleProcess.run(dir, requests, 3, T);
        int n = 4;
        ParallelStateOptions options = ParallelStateOptions.builder().tpMessageQueue(false).build();
        List<Engine.Result> results;
        try (ThreadJob job = ThreadJob.start(n, r -> ThreadJob.config(r, n, "host-a", T), r -> options,
                ParallelSizes.of(2, 2), T)) {
            results = job.call(ps -> new Engine(ps, LlamaModel.load(dir, ps, new CommClock()), 3)
                    .run(requests, SingleProcess.capacity(requests)), T);
        }
        List<Reference.Entry> entries = new java.util.ArrayList<>();
        for (int i = 0; i < requests.size(); i++) {
            entries.add(new Reference.Entry(requests.get(i), single.tokens.get(i), single.logits.get(i), Double.NaN));
        }
        Reference ref = new Reference(entries, Double.NaN);
        Map<Integer, List<float[]>> logits = new LinkedHashMap<>(results.get(3).logits); // a last-stage rank
        Reference.Comparison cmp = ref.compare(results.get(0).tokens, logits);
        System.out.println("TP2 x PP2 against one process: " + cmp);
        assertEquals(20 + 28, cmp.tokens()); // the second request has 8 tokens more
        assertEquals(6, cmp.logitRows());
        assertTrue(cmp.ok(), cmp.toString());
        assertEquals(1001, logits.get(0).get(0).length);
        assertTrue(results.get(0).logits.isEmpty(), "stage 0 has no logits");
    }

    @Test
    void shardPlansFollowVllm() {
        LlamaConfig c = new LlamaConfig(64, 96, 5, 4, 2, 16, 1001, 1e-5, 1e4, false);
        ShardPlan s = new ShardPlan(c, 1, 2, 1, 2);
        assertEquals(2, s.firstLayer()); // 5 layers over PP2: [0, 2) and [2, 5), the last stage the remainder
        assertEquals(5, s.endLayer());
        assertEquals(501, s.vocabPerRank());
        assertEquals(501, s.vocabStart());
        assertEquals(500, s.vocabCount());
        assertEquals(2, s.localHeads());
        assertEquals(1, s.localKvHeads());
        assertFalse(s.firstStage());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> new ShardPlan(c, 0, 4, 0, 1));
        assertTrue(e.getMessage().contains("KV heads"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> new ShardPlan(c, 0, 1, 0, 6));
    }
}
