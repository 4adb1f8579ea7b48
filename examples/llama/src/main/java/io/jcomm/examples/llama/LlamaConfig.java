package io.jcomm.examples.llama;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Locale;
import java.util.Map;

/**
 * The shape of a Llama model, from a Hugging Face {@code config.json}: {@code hidden_size},
 * {@code intermediate_size}, {@code num_hidden_layers}, {@code num_attention_heads},
 * {@code num_key_value_heads} (default: the heads, plain multi-head attention), {@code vocab_size},
 * {@code rms_norm_eps} (default 1e-6), {@code rope_theta} (default 10000), {@code tie_word_embeddings}
 * (default false) and the optional {@code head_dim} (default {@code hidden_size / num_attention_heads}).
 * Fields this decoder does not implement ({@code rope_scaling}, {@code attention_bias},
 * {@code mlp_bias}, a {@code hidden_act} other than silu) are refused rather than ignored, since they
 * would change the outputs.
 */
public record LlamaConfig(int hidden, int intermediate, int layers, int heads, int kvHeads, int headDim, int vocab,
                          double rmsNormEps, double ropeTheta, boolean tieWordEmbeddings) {

    /** Largest {@code config.json} read (a real one is a few KiB). */
    static final long MAX_CONFIG_BYTES = 1 << 20;

    public LlamaConfig {
        if (hidden < 1 || intermediate < 1 || layers < 1 || heads < 1 || kvHeads < 1 || headDim < 2 || vocab < 1) {
            throw new IllegalArgumentException("every size must be positive (head_dim >= 2): " + describe(hidden,
                    intermediate, layers, heads, kvHeads, headDim, vocab));
        }
        if (heads % kvHeads != 0) {
            throw new IllegalArgumentException("num_attention_heads " + heads + " is not a multiple of num_key_value_heads "
                    + kvHeads);
        }
        if (headDim % 2 != 0) {
            throw new IllegalArgumentException("head_dim " + headDim + " must be even (rotary embeddings rotate pairs)");
        }
        if (!(rmsNormEps > 0) || !(ropeTheta > 1) || Double.isInfinite(ropeTheta)) {
            throw new IllegalArgumentException("rms_norm_eps must be > 0 and rope_theta > 1: " + rmsNormEps + ", " + ropeTheta);
        }
        // every weight matrix must fit a Java array on one rank at TP 1
        long biggest = Math.max((long) vocab * hidden, Math.max((long) intermediate * hidden, (long) heads * headDim * hidden));
        if (biggest > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException("a weight matrix of " + biggest + " elements is beyond this example's arrays");
        }
    }

    /** Reads {@code config.json}. */
    public static LlamaConfig read(Path file) {
        try {
            if (Files.size(file) > MAX_CONFIG_BYTES) {
                throw new IllegalArgumentException(file + " is larger than " + MAX_CONFIG_BYTES + " bytes");
            }
            return parse(Files.readString(file, StandardCharsets.UTF_8), file.toString());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + file + ": " + e.getMessage(), e);
        }
    }

    /** Parses the text of a {@code config.json}; {@code where} names it in errors. */
    public static LlamaConfig parse(String json, String where) {
        Map<String, Object> m = Json.parseObject(json);
        Object act = m.get("hidden_act");
        if (act != null && !act.equals("silu")) {
            throw new IllegalArgumentException(where + ": hidden_act " + act + " is not implemented (silu only)");
        }
        if (m.get("rope_scaling") != null) {
            throw new IllegalArgumentException(where + ": rope_scaling is not implemented");
        }
        if (Json.booleanField(m, "attention_bias", false, where) || Json.booleanField(m, "mlp_bias", false, where)) {
            throw new IllegalArgumentException(where + ": biases are not implemented");
        }
        int hidden = Json.intField(m, "hidden_size", null, where);
        int heads = Json.intField(m, "num_attention_heads", null, where);
        return new LlamaConfig(hidden,
                Json.intField(m, "intermediate_size", null, where),
                Json.intField(m, "num_hidden_layers", null, where),
                heads,
                Json.intField(m, "num_key_value_heads", heads, where),
                Json.intField(m, "head_dim", heads > 0 ? hidden / heads : 0, where),
                Json.intField(m, "vocab_size", null, where),
                Json.doubleField(m, "rms_norm_eps", 1e-6, where),
                Json.doubleField(m, "rope_theta", 10000.0, where),
                Json.booleanField(m, "tie_word_embeddings", false, where));
    }

    /** This config as Hugging Face's {@code config.json} text. */
    public String toJson() {
        return String.format(Locale.ROOT, "{%n  \"architectures\": [\"LlamaForCausalLM\"],%n  \"model_type\": \"llama\",%n"
                        + "  \"hidden_size\": %d,%n  \"intermediate_size\": %d,%n  \"num_hidden_layers\": %d,%n"
                        + "  \"num_attention_heads\": %d,%n  \"num_key_value_heads\": %d,%n  \"head_dim\": %d,%n"
                        + "  \"vocab_size\": %d,%n  \"rms_norm_eps\": %s,%n  \"rope_theta\": %s,%n"
                        + "  \"tie_word_embeddings\": %b,%n  \"hidden_act\": \"silu\",%n  \"torch_dtype\": \"float32\"%n}%n",
                hidden, intermediate, layers, heads, kvHeads, headDim, vocab, Double.toString(rmsNormEps),
                Double.toString(ropeTheta), tieWordEmbeddings);
    }

    /** Parameters of the model (the LM head counted once when tied). */
    public long parameters() {
        long attn = (long) hidden * headDim * (2L * heads + 2L * kvHeads);
        long mlp = 3L * hidden * intermediate;
        long perLayer = attn + mlp + 2L * hidden;
        return layers * perLayer + (long) vocab * hidden * (tieWordEmbeddings ? 1 : 2) + hidden;
    }

    @Override
    public String toString() {
        return describe(hidden, intermediate, layers, heads, kvHeads, headDim, vocab) + (tieWordEmbeddings ? " tied" : "");
    }

    private static String describe(int hidden, int intermediate, int layers, int heads, int kvHeads, int headDim, int vocab) {
        return "hidden " + hidden + ", intermediate " + intermediate + ", layers " + layers + ", heads " + heads
                + ", kv heads " + kvHeads + ", head dim " + headDim + ", vocab " + vocab;
    }
}
