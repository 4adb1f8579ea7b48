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
        Path dir = TorchFixture.f32();
        Reference ref = TorchFixture.reference(dir);
        assertTrue(ref.minTop2Gap() > 2 * Reference.LOGIT_TOLERANCE, "the reference's choices are clear-cut: " + ref.minTop2Gap());
        Engine.Result r = SingleProcess.run(dir, ref.asRequests(), 4, Duration.ofSeconds(30));
        Reference.Comparison c = ref.compare(r.tokens, r.logits);
        System.out.println("TP1 against torch: " + c);
        assertEquals(4, c.requests());
        assertTrue(c.tokens() >= 4 * 64, c.toString());
        assertEquals(16, c.logitRows(), c.toString());
        assertTrue(c.ok(), c.toString());
    }
}
