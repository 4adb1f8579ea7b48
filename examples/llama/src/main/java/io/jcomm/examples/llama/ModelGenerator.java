package io.jcomm.examples.llama;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.SplittableRandom;

/**
 * Writes a seeded random Llama model as {@code model.safetensors} and {@code config.json}, with the
 * scales of {@code scripts/llama_reference.py} (unit embeddings, projections at 1/sqrt(fan-in), norms
 * around 1, an LM head that spreads the logits over several units) but Java's random numbers: the same
 * seed gives the same file on every machine, not torch's file. torch reads it all the same
 * ({@code llama_reference.py reference --model DIR}).
 *
 * <p>Each tensor has its own generator, seeded from the seed and the tensor's name, and is made only
 * when the writer reaches it, so that a model larger than the heap can still be written.
 */
public final class ModelGenerator {

    private ModelGenerator() {
    }

    /**
     * Writes the model into {@code directory} (created if needed); {@code config.json} last, so that a
     * directory with a config holds a complete model.
     *
     * @param dtype {@code F32}, {@code F16} or {@code BF16}
     */
    public static void write(Path directory, LlamaConfig c, long seed, String dtype) {
        try {
            Files.createDirectories(directory);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create " + directory + ": " + e.getMessage(), e);
        }
        int h = c.hidden();
        int q = c.heads() * c.headDim();
        int kv = c.kvHeads() * c.headDim();
        int ff = c.intermediate();
        SafeTensorsWriter w = new SafeTensorsWriter(dtype);
        // a tied model's embedding is its LM head too: drawn at the head's scale
        double embedStd = c.tieWordEmbeddings() ? 4.0 / Math.sqrt(h) : 1.0;
        add(w, seed, "model.embed_tokens.weight", embedStd, 0, c.vocab(), h);
        for (int i = 0; i < c.layers(); i++) {
            String p = "model.layers." + i + ".";
            add(w, seed, p + "input_layernorm.weight", 0.1, 1.0, h);
            add(w, seed, p + "self_attn.q_proj.weight", 1.0 / Math.sqrt(h), 0, q, h);
            add(w, seed, p + "self_attn.k_proj.weight", 1.0 / Math.sqrt(h), 0, kv, h);
            add(w, seed, p + "self_attn.v_proj.weight", 1.0 / Math.sqrt(h), 0, kv, h);
            add(w, seed, p + "self_attn.o_proj.weight", 1.0 / Math.sqrt(q), 0, h, q);
            add(w, seed, p + "post_attention_layernorm.weight", 0.1, 1.0, h);
            add(w, seed, p + "mlp.gate_proj.weight", 1.0 / Math.sqrt(h), 0, ff, h);
            add(w, seed, p + "mlp.up_proj.weight", 1.0 / Math.sqrt(h), 0, ff, h);
            add(w, seed, p + "mlp.down_proj.weight", 1.0 / Math.sqrt(ff), 0, h, ff);
        }
        add(w, seed, "model.norm.weight", 0.1, 1.0, h);
        if (!c.tieWordEmbeddings()) {
            add(w, seed, "lm_head.weight", 4.0 / Math.sqrt(h), 0, c.vocab(), h);
        }
        w.write(directory.resolve("model.safetensors"));
        try {
            Path tmp = Files.createTempFile(directory, "config.json", ".tmp");
            Files.writeString(tmp, c.toJson(), StandardCharsets.UTF_8);
            Files.move(tmp, directory.resolve("config.json"), StandardCopyOption.REPLACE_EXISTING,
                    StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + directory.resolve("config.json") + ": " + e.getMessage(), e);
        }
    }

    private static void add(SafeTensorsWriter w, long seed, String name, double std, double mean, long... shape) {
        long n = 1;
        for (long d : shape) {
            n *= d;
        }
        int count = Math.toIntExact(n);
        w.add(name, () -> {
            SplittableRandom r = new SplittableRandom(seed * 0x9E3779B97F4A7C15L ^ name.hashCode());
            float[] v = new float[count];
            for (int i = 0; i < count; i++) {
                v[i] = (float) (mean + std * r.nextGaussian());
            }
            return v;
        }, shape);
    }
}
