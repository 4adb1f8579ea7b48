package io.jcomm.examples.llama;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The decoder in one process (TP 1) against torch 1.13's greedy continuations and logits. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class LlamaTorchReferenceTest {

    @Test
    void float32ModelIsTokenExact() {
        check("float32", TorchFixture.f32(), 4);
    }

    @Test
    void bfloat16TiedModelIsTokenExact() {
        LlamaConfig c = LlamaConfig.read(TorchFixture.bf16Tied().resolve("config.json"));
        assertTrue(c.tieWordEmbeddings());
        try (SafeTensors st = SafeTensors.open(TorchFixture.bf16Tied().resolve("model.safetensors"))) {
            assertEquals("BF16", st.entry("model.norm.weight").dtype());
            assertTrue(!st.contains("lm_head.weight"), "a tied model's file has no LM head");
        }
        check("bfloat16, tied", TorchFixture.bf16Tied(), 2);
    }

    @Test
    void float16ModelIsTokenExact() {
        check("float16", TorchFixture.f16(), 2);
    }

    private static void check(String what, Path dir, int requests) {
        Reference ref = TorchFixture.reference(dir);
        assertTrue(ref.minTop2Gap() > 2 * Reference.LOGIT_TOLERANCE, "the reference's choices are clear-cut: " + ref.minTop2Gap());
        Engine.Result r = SingleProcess.run(dir, ref.asRequests(), 4, Duration.ofSeconds(30));
        Reference.Comparison c = ref.compare(r.tokens, r.logits);
        System.out.println("TP 1, " + what + ", against torch: " + c);
        assertEquals(requests, c.requests());
        assertTrue(c.tokens() >= requests * 64, c.toString());
        assertEquals(requests * 4, c.logitRows(), c.toString());
        assertTrue(c.ok(), c.toString());
    }
}
