package io.jcomm.examples.llama;

import java.nio.file.Path;

/**
 * One rank's weights, read from a safetensors file with Hugging Face's Llama names, only the rows
 * and columns of this rank's shard ({@link ShardPlan}), widened to float32:
 *
 * <ul>
 *   <li>{@code qkv}: the rows of {@code q_proj}, {@code k_proj} and {@code v_proj} for the local heads,
 *       stacked into one column-parallel matrix (vLLM's {@code QKVParallelLinear});</li>
 *   <li>{@code o}: the columns of {@code o_proj} for the local heads (row-parallel: its products are
 *       partial sums, completed by an all-reduce);</li>
 *   <li>{@code gateUp}: the local rows of {@code gate_proj} then of {@code up_proj}
 *       ({@code MergedColumnParallelLinear}); {@code down}: the local columns of {@code down_proj}
 *       (row-parallel);</li>
 *   <li>{@code embed} and {@code lmHead}: the local vocabulary rows (the embedding's rows again for the
 *       head when the config ties them); norms whole.</li>
 * </ul>
 */
final class ShardWeights {

    /** One decoder layer's shard. */
    static final class Layer {
        final float[] inputNorm;
        final float[] qkv;
        final float[] o;
        final float[] postNorm;
        final float[] gateUp;
        final float[] down;

        Layer(float[] inputNorm, float[] qkv, float[] o, float[] postNorm, float[] gateUp, float[] down) {
            this.inputNorm = inputNorm;
            this.qkv = qkv;
            this.o = o;
            this.postNorm = postNorm;
            this.gateUp = gateUp;
            this.down = down;
        }
    }

    final ShardPlan plan;
    /** {@code vocabCount x hidden}, first stage only (else null). */
    final float[] embed;
    final Layer[] layers;
    /** Last stage only (else null). */
    final float[] finalNorm;
    /** {@code vocabCount x hidden}, last stage only (else null). */
    final float[] lmHead;

    private ShardWeights(ShardPlan plan, float[] embed, Layer[] layers, float[] finalNorm, float[] lmHead) {
        this.plan = plan;
        this.embed = embed;
        this.layers = layers;
        this.finalNorm = finalNorm;
        this.lmHead = lmHead;
    }

    /** Reads this rank's shard of {@code file}. */
    static ShardWeights load(Path file, ShardPlan plan) {
        try (SafeTensors st = SafeTensors.open(file)) {
            return load(st, plan);
        }
    }

    static ShardWeights load(SafeTensors st, ShardPlan plan) {
        LlamaConfig c = plan.config();
        int h = c.hidden();
        int hd = c.headDim();
        String embedName = "model.embed_tokens.weight";
        float[] embed = null;
        if (plan.firstStage()) {
            st.expect(embedName, c.vocab(), h);
            embed = st.readBlock(embedName, plan.vocabStart(), plan.vocabCount(), 0, h);
        }
        Layer[] layers = new Layer[plan.localLayers()];
        int qRows = plan.localHeads() * hd;
        int kvRows = plan.localKvHeads() * hd;
        int ff = plan.localIntermediate();
        for (int i = 0; i < layers.length; i++) {
            String p = "model.layers." + (plan.firstLayer() + i) + ".";
            String q = p + "self_attn.q_proj.weight";
            String k = p + "self_attn.k_proj.weight";
            String v = p + "self_attn.v_proj.weight";
            String o = p + "self_attn.o_proj.weight";
            String gate = p + "mlp.gate_proj.weight";
            String up = p + "mlp.up_proj.weight";
            String down = p + "mlp.down_proj.weight";
            st.expect(q, (long) c.heads() * hd, h);
            st.expect(k, (long) c.kvHeads() * hd, h);
            st.expect(v, (long) c.kvHeads() * hd, h);
            st.expect(o, h, (long) c.heads() * hd);
            st.expect(gate, c.intermediate(), h);
            st.expect(up, c.intermediate(), h);
            st.expect(down, h, c.intermediate());
            st.expect(p + "input_layernorm.weight", h);
            st.expect(p + "post_attention_layernorm.weight", h);
            float[] qkv = concat(
                    st.readBlock(q, (long) plan.tpRank() * qRows, qRows, 0, h),
                    st.readBlock(k, (long) plan.tpRank() * kvRows, kvRows, 0, h),
                    st.readBlock(v, (long) plan.tpRank() * kvRows, kvRows, 0, h));
            float[] gateUp = concat(
                    st.readBlock(gate, (long) plan.tpRank() * ff, ff, 0, h),
                    st.readBlock(up, (long) plan.tpRank() * ff, ff, 0, h));
            layers[i] = new Layer(st.read(p + "input_layernorm.weight"), qkv,
                    st.readBlock(o, 0, h, (long) plan.tpRank() * qRows, qRows),
                    st.read(p + "post_attention_layernorm.weight"), gateUp,
                    st.readBlock(down, 0, h, (long) plan.tpRank() * ff, ff));
        }
        float[] finalNorm = null;
        float[] lmHead = null;
        if (plan.lastStage()) {
            st.expect("model.norm.weight", h);
            finalNorm = st.read("model.norm.weight");
            // a tied model's file may still carry lm_head.weight (a copy); the config decides
            String head = c.tieWordEmbeddings() ? embedName : "lm_head.weight";
            if (!st.contains(head)) {
                throw new IllegalArgumentException(st.path() + " has no " + head + (c.tieWordEmbeddings() ? ""
                        : " (and the config does not tie the embeddings)"));
            }
            st.expect(head, c.vocab(), h);
            lmHead = st.readBlock(head, plan.vocabStart(), plan.vocabCount(), 0, h);
        }
        return new ShardWeights(plan, embed, layers, finalNorm, lmHead);
    }

    private static float[] concat(float[]... parts) {
        int n = 0;
        for (float[] p : parts) {
            n = Math.addExact(n, p.length);
        }
        float[] out = new float[n];
        int at = 0;
        for (float[] p : parts) {
            System.arraycopy(p, 0, out, at, p.length);
            at += p.length;
        }
        return out;
    }

    /** Floats held (the rank's share of the model). */
    long floats() {
        long n = (embed == null ? 0 : embed.length) + (lmHead == null ? 0 : lmHead.length)
                + (finalNorm == null ? 0 : finalNorm.length);
        for (Layer l : layers) {
            n += l.inputNorm.length + l.qkv.length + l.o.length + l.postNorm.length + l.gateUp.length + l.down.length;
        }
        return n;
    }
}
