package io.jcomm.examples.llama;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
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
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The sharded decoder, ranks as threads of this JVM over jcomm's tcp groups (the multi-JVM jobs are
 * LlamaIT's), against torch's unsharded reference: every layout gives torch's tokens for every step
 * of every request, and its last-stage ranks logits within {@link Reference#LOGIT_TOLERANCE}.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ShardedLlamaTest {

    private static final Duration T = Duration.ofSeconds(60);

    @ParameterizedTest(name = "TP {0} x PP {1} x DP {2}")
    @CsvSource({"2, 1, 1", "1, 2, 1", "2, 2, 1", "2, 1, 2", "1, 2, 2"})
    void shardedRunsAreTokenExact(int tp, int pp, int dp) {
        check(TorchFixture.f32(), tp, pp, dp);
    }

    /** The LM head of a tied model is the embedding's vocabulary shard, on the last stage. */
    @Test
    void tiedBfloat16ModelOverTp2xPp2() {
        check(TorchFixture.bf16Tied(), 2, 2, 1);
    }

    private static void check(Path dir, int tp, int pp, int dp) {
        Reference ref = TorchFixture.reference(dir);
        List<Request> requests = ref.asRequests();
        int n = tp * pp * dp;
        ParallelStateOptions options = ParallelStateOptions.builder().tpMessageQueue(false).build();
        List<Engine.Result> results;
        List<int[]> places;
        try (ThreadJob job = ThreadJob.start(n, r -> ThreadJob.config(r, n, "host-a", T), r -> options,
                ParallelSizes.of(tp, pp, dp), T)) {
            results = job.call(ps -> new Engine(ps, LlamaModel.load(dir, ps, new CommClock()), 4)
                    .run(requests, SingleProcess.capacity(requests)), T);
            places = job.call(ps -> new int[] {ps.dp().rankInGroup(), ps.pp().rankInGroup(), ps.pp().worldSize()}, T);
        }
        Map<Integer, int[]> tokens = new LinkedHashMap<>();
        Map<Integer, List<float[]>> logits = new LinkedHashMap<>();
        for (int r = 0; r < n; r++) {
            Engine.Result res = results.get(r);
            int replica = places.get(r)[0];
            boolean last = places.get(r)[1] == places.get(r)[2] - 1;
            // each replica answers its own requests; every rank of it knows every token
            for (int i = 0; i < requests.size(); i++) {
                assertEquals(i % dp == replica, res.tokens.containsKey(i), "rank " + r + " request " + i);
            }
            for (Map.Entry<Integer, int[]> e : res.tokens.entrySet()) {
                int[] before = tokens.putIfAbsent(e.getKey(), e.getValue());
                if (before != null) {
                    assertArrayEquals(before, e.getValue(), "rank " + r + " of the replica of request " + e.getKey());
                }
            }
            assertEquals(last, !res.logits.isEmpty(), "rank " + r + ": logits on last-stage ranks only");
            logits.putAll(res.logits);
            if (dp > 1 && replica == 0) {
                // replica 0's requests are 8 tokens shorter: it waited while replica 1 finished
                assertEquals(16, res.idleIterations, "rank " + r);
            }
        }
        Reference.Comparison c = ref.compare(tokens, logits);
        System.out.println("TP " + tp + " x PP " + pp + " x DP " + dp + " against torch: " + c);
        assertEquals(requests.size(), c.requests());
        assertEquals(4 * requests.size(), c.logitRows(), c.toString());
        assertTrue(c.ok(), c.toString());
    }
}
