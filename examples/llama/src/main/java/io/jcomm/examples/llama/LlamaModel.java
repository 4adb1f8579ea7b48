package io.jcomm.examples.llama;

import io.jcomm.api.DType;
import io.jcomm.api.Tensor;
import io.jcomm.parallel.GroupCoordinator;
import io.jcomm.parallel.ParallelState;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;

/**
 * One rank's part of a Llama decoder, run the way vLLM runs a sharded {@code LlamaForCausalLM}, with
 * every exchange through jcomm's {@link GroupCoordinator}s:
 *
 * <ol>
 *   <li>first stage: the vocabulary-parallel embedding (each TP rank looks up the tokens in its range,
 *       zeros elsewhere) and a TP all-reduce; other stages: {@code {hidden_states, residual}} from the
 *       previous stage ({@link GroupCoordinator#recvTensorDict}, sliced over TP and gathered, as vLLM's
 *       {@code IntermediateTensors});</li>
 *   <li>each local layer: RMSNorm fused with the residual add, the column-parallel QKV projection, rotary
 *       embeddings, grouped-query attention over the KV cache, the row-parallel {@code o_proj} and a TP
 *       all-reduce, RMSNorm, the column-parallel gate/up projection, SwiGLU, the row-parallel
 *       {@code down_proj} and a TP all-reduce;</li>
 *   <li>not the last stage: {@code {hidden_states, residual}} to the next stage; the last stage: the final
 *       norm of the last position, this rank's slice of the logits and a TP all-gather of the slices;
 *       greedy sampling; the token broadcast from the last stage to every stage, which the first stage
 *       embeds next.</li>
 * </ol>
 *
 * <p>Every rank of a replica (its TP x PP ranks) calls {@link #step} with the same arguments; every one
 * returns the same token. Not thread safe: one per rank.
 */
public final class LlamaModel {

    static final String HIDDEN = "hidden_states";
    static final String RESIDUAL = "residual";
    static final String NEXT_TOKEN = "next_token";

    private final ShardPlan plan;
    private final ShardWeights weights;
    private final GroupCoordinator tp;
    private final GroupCoordinator pp;
    private final CommClock clock;
    private final float[] invFreq;
    private final float[] cos;
    private final float[] sin;
    private final float eps;
    private float[] keys = new float[0];
    private float[] values = new float[0];
    private float[] scores = new float[0];
    private float[] lastLogits;
    private Tensor reduceBuffer;
    private Tensor logitsBuffer;
    private Map<String, Object> received;

    /**
     * @param weights this rank's shard ({@link ShardWeights#plan} says which)
     * @param tp      this rank's TP group; its size and rank must be the plan's
     * @param pp      this rank's PP group; likewise
     * @param clock   where time inside jcomm calls is added
     */
    LlamaModel(ShardWeights weights, GroupCoordinator tp, GroupCoordinator pp, CommClock clock) {
        this.plan = weights.plan;
        this.weights = weights;
        this.tp = Objects.requireNonNull(tp, "tp");
        this.pp = Objects.requireNonNull(pp, "pp");
        this.clock = Objects.requireNonNull(clock, "clock");
        if (tp.worldSize() != plan.tpSize() || tp.rankInGroup() != plan.tpRank() || pp.worldSize() != plan.ppSize()
                || pp.rankInGroup() != plan.ppRank()) {
            throw new IllegalArgumentException("the plan (" + plan + ") is not this rank's place in " + tp + " and " + pp);
        }
        LlamaConfig c = plan.config();
        this.invFreq = Kernels.inverseFrequencies(c.ropeTheta(), c.headDim());
        this.cos = new float[c.headDim() / 2];
        this.sin = new float[c.headDim() / 2];
        this.eps = (float) c.rmsNormEps();
    }

    /**
     * Loads this rank's shard of the model in {@code directory} ({@code config.json} and
     * {@code model.safetensors}) for its place in {@code ps}'s TP and PP groups.
     */
    public static LlamaModel load(Path directory, ParallelState ps, CommClock clock) {
        LlamaConfig config = LlamaConfig.read(directory.resolve("config.json"));
        GroupCoordinator tp = ps.tp();
        GroupCoordinator pp = ps.pp();
        ShardPlan plan = new ShardPlan(config, tp.rankInGroup(), tp.worldSize(), pp.rankInGroup(), pp.worldSize());
        return new LlamaModel(ShardWeights.load(directory.resolve("model.safetensors"), plan), tp, pp, clock);
    }

    public ShardPlan plan() {
        return plan;
    }

    CommClock clock() {
        return clock;
    }

    /** Floats of weights this rank holds. */
    long weightFloats() {
        return weights.floats();
    }

    /** A KV cache for one sequence of up to {@code capacity} positions on this rank. */
    KvCache newCache(int capacity) {
        return KvCache.allocate(plan, capacity);
    }

    /**
     * The logits (the whole vocabulary) of the last {@link #step} on a last-stage rank, null elsewhere.
     * The array is this model's; the next step replaces it.
     */
    float[] lastLogits() {
        return lastLogits;
    }

    /**
     * Runs {@code tokens} at positions {@code start, start + 1, ...} through the model (a prompt at once,
     * or one token when decoding), appending their keys and values to {@code cache}, and returns the
     * greedy choice after the last of them, on every rank of the replica.
     */
    public int step(int[] tokens, int start, KvCache cache) {
        int t = tokens.length;
        if (t < 1 || start < 0 || start + t > cache.capacity()) {
            throw new IllegalArgumentException(t + " tokens at position " + start + " do not fit a KV cache of "
                    + cache.capacity() + " positions");
        }
        int h = plan.config().hidden();
        float[] hidden;
        float[] residual;
        if (plan.firstStage()) {
            hidden = embed(tokens);
            residual = null;
        } else {
            long c0 = clock.start();
            Map<String, Object> in = pp.recvTensorDict(pp.prevInGroup(), tp, received);
            clock.stop(CommClock.Kind.PP, c0);
            received = in;
            hidden = floats((Tensor) in.get(HIDDEN), t * h);
            residual = floats((Tensor) in.get(RESIDUAL), t * h);
        }
        for (int l = 0; l < weights.layers.length; l++) {
            residual = layer(l, weights.layers[l], hidden, residual, t, start, cache);
            hidden = lastOutput;
        }
        int token;
        if (!plan.lastStage()) {
            Map<String, Object> out = new LinkedHashMap<>();
            out.put(HIDDEN, tensorOf(hidden, t, h));
            out.put(RESIDUAL, tensorOf(residual, t, h));
            long c0 = clock.start();
            pp.sendTensorDict(out, pp.nextInGroup(), tp);
            Map<String, Object> next = pp.broadcastTensorDict(null, pp.worldSize() - 1);
            clock.stop(CommClock.Kind.PP, c0);
            token = (int) ((Tensor) next.get(NEXT_TOKEN)).getLong(0);
            lastLogits = null;
        } else {
            lastLogits = logits(hidden, residual, t);
            token = Kernels.argmax(lastLogits, lastLogits.length);
            if (plan.ppSize() > 1) {
                Map<String, Object> out = new LinkedHashMap<>();
                out.put(NEXT_TOKEN, Tensor.ofLongs(token));
                long c0 = clock.start();
                pp.broadcastTensorDict(out, pp.worldSize() - 1);
                clock.stop(CommClock.Kind.PP, c0);
            }
        }
        return token;
    }

    /** The output of the last {@link #layer} call (its return value is the residual). */
    private float[] lastOutput;

    /** Vocabulary-parallel embedding: local rows, zeros for tokens of other ranks, then summed over TP. */
    private float[] embed(int[] tokens) {
        int h = plan.config().hidden();
        int v0 = plan.vocabStart();
        int vn = plan.vocabCount();
        float[] x = new float[tokens.length * h];
        for (int t = 0; t < tokens.length; t++) {
            int id = tokens[t];
            if (id < 0 || id >= plan.config().vocab()) {
                throw new IllegalArgumentException("token " + id + " is not in the vocabulary [0, " + plan.config().vocab() + ")");
            }
            if (id >= v0 && id < v0 + vn) {
                System.arraycopy(weights.embed, (id - v0) * h, x, t * h, h);
            }
        }
        allReduce(x, tokens.length, h);
        return x;
    }

    /**
     * One decoder layer; returns the residual stream and leaves the layer's output in
     * {@link #lastOutput}, vLLM's {@code (hidden_states, residual)} pair: the sum of the two is the
     * layer's output in Hugging Face's formulation.
     */
    private float[] layer(int l, ShardWeights.Layer w, float[] hidden, float[] residual, int t, int start, KvCache cache) {
        LlamaConfig c = plan.config();
        int h = c.hidden();
        int hd = c.headDim();
        int qh = plan.localHeads();
        int kvh = plan.localKvHeads();
        int qkvWidth = (qh + 2 * kvh) * hd;

        // input_layernorm(hidden, residual): residual += hidden; x = norm(residual)
        if (residual == null) {
            residual = hidden.clone();
        } else {
            Kernels.addInto(residual, hidden, t * h);
        }
        float[] x = new float[t * h];
        Kernels.rmsNorm(residual, w.inputNorm, eps, t, h, x);

        float[] qkv = new float[t * qkvWidth];
        Kernels.matmul(w.qkv, qkvWidth, h, x, t, qkv);
        int row = plan.kvRowFloats();
        for (int i = 0; i < t; i++) {
            int pos = start + i;
            int o = i * qkvWidth;
            Kernels.rope(qkv, o, qh, hd, pos, invFreq, cos, sin);
            Kernels.rope(qkv, o + qh * hd, kvh, hd, pos, invFreq, cos, sin);
            cache.put(l, KvCache.KEYS, pos, qkv, o + qh * hd);
            cache.put(l, KvCache.VALUES, pos, qkv, o + qh * hd + row);
        }
        float[] attn = attention(l, qkv, qkvWidth, t, start, cache);

        float[] o = new float[t * h];
        Kernels.matmul(w.o, h, qh * hd, attn, t, o);
        allReduce(o, t, h);

        // post_attention_layernorm(hidden, residual)
        Kernels.addInto(residual, o, t * h);
        Kernels.rmsNorm(residual, w.postNorm, eps, t, h, x);

        int ff = plan.localIntermediate();
        float[] gateUp = new float[t * 2 * ff];
        Kernels.matmul(w.gateUp, 2 * ff, h, x, t, gateUp);
        float[] act = new float[t * ff];
        Kernels.swiglu(gateUp, t, ff, act);
        float[] down = new float[t * h];
        Kernels.matmul(w.down, h, ff, act, t, down);
        allReduce(down, t, h);
        lastOutput = down;
        return residual;
    }

    /** Causal grouped-query attention of the {@code t} new positions over the cache, local heads. */
    private float[] attention(int l, float[] qkv, int qkvWidth, int t, int start, KvCache cache) {
        int hd = plan.config().headDim();
        int qh = plan.localHeads();
        int group = plan.config().heads() / plan.config().kvHeads();
        int row = plan.kvRowFloats();
        int positions = start + t;
        if (keys.length < positions * row) {
            keys = new float[positions * row * 2];
            values = new float[positions * row * 2];
        }
        if (scores.length < positions) {
            scores = new float[positions * 2];
        }
        cache.read(l, KvCache.KEYS, positions, keys);
        cache.read(l, KvCache.VALUES, positions, values);
        float scale = (float) Math.sqrt(hd);
        float[] out = new float[t * qh * hd];
        for (int i = 0; i < t; i++) {
            int pos = start + i;
            for (int head = 0; head < qh; head++) {
                int q = i * qkvWidth + head * hd;
                int kv = (head / group) * hd;
                float max = Float.NEGATIVE_INFINITY;
                for (int j = 0; j <= pos; j++) {
                    float s = Kernels.dot(qkv, q, keys, j * row + kv, hd) / scale;
                    scores[j] = s;
                    max = Math.max(max, s);
                }
                float sum = 0;
                for (int j = 0; j <= pos; j++) {
                    float e = (float) Math.exp(scores[j] - max);
                    scores[j] = e;
                    sum += e;
                }
                int o = i * qh * hd + head * hd;
                for (int j = 0; j <= pos; j++) {
                    float p = scores[j] / sum;
                    int v = j * row + kv;
                    for (int d = 0; d < hd; d++) {
                        out[o + d] += p * values[v + d];
                    }
                }
            }
        }
        return out;
    }

    /** Final norm of the last position, this rank's logits, gathered over TP; the whole vocabulary. */
    private float[] logits(float[] hidden, float[] residual, int t) {
        int h = plan.config().hidden();
        float[] last = new float[h];
        int o = (t - 1) * h;
        for (int i = 0; i < h; i++) {
            last[i] = residual[o + i] + hidden[o + i];
        }
        float[] x = new float[h];
        Kernels.rmsNorm(last, weights.finalNorm, eps, 1, h, x);
        int per = plan.vocabPerRank();
        float[] local = new float[per]; // rows past the vocabulary stay 0 and are cut off below
        Kernels.matmul(weights.lmHead, plan.vocabCount(), h, x, 1, local);
        int vocab = plan.config().vocab();
        if (plan.tpSize() == 1) {
            return local.length == vocab ? local : java.util.Arrays.copyOf(local, vocab);
        }
        if (logitsBuffer == null) {
            logitsBuffer = Tensor.allocate(DType.F32, 1, per);
        }
        logitsBuffer.buffer().asFloatBuffer().put(local);
        long c0 = clock.start();
        Tensor all = tp.allGather(logitsBuffer, -1);
        clock.stop(CommClock.Kind.TP, c0);
        float[] full = new float[vocab];
        all.buffer().asFloatBuffer().get(full, 0, vocab);
        return full;
    }

    /** Sums {@code x} ({@code t x width}) over the TP group, in place. */
    private void allReduce(float[] x, int t, int width) {
        if (plan.tpSize() == 1) {
            return;
        }
        Tensor b = reduceBuffer;
        if (b == null || b.size(0) != t) {
            b = Tensor.allocate(DType.F32, t, width);
            if (t == 1) {
                reduceBuffer = b; // decode steps reuse one; a prompt's size comes once
            }
        }
        b.buffer().asFloatBuffer().put(x, 0, t * width);
        long c0 = clock.start();
        tp.allReduce(b);
        clock.stop(CommClock.Kind.TP, c0);
        b.buffer().asFloatBuffer().get(x, 0, t * width);
    }

    private static float[] floats(Tensor t, int n) {
        if (t == null || t.dtype() != DType.F32 || t.numel() != n) {
            throw new IllegalStateException("the previous stage sent " + t + ", expected " + n + " float32 values");
        }
        float[] out = new float[n];
        t.buffer().asFloatBuffer().get(out);
        return out;
    }

    private static Tensor tensorOf(float[] x, int t, int h) {
        Tensor out = Tensor.allocate(DType.F32, t, h);
        out.buffer().asFloatBuffer().put(x, 0, t * h);
        return out;
    }
}
