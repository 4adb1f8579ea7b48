package io.jcomm.examples.llama;

import io.jcomm.api.DType;
import io.jcomm.api.Tensor;
import io.jcomm.parallel.GroupCoordinator;
import io.jcomm.parallel.ParallelState;
import java.nio.file.Path;
import java.util.Arrays;
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
    private Buffers decodeBuffers;
    private Map<String, Object> received;
    // the last stage's logits: the final norm's row, this rank's slice, the gathered vocabulary
    private final float[] lastRow;
    private final float[] normedRow;
    private final float[] localLogits;
    private final float[] fullLogits;
    private final Tensor logitsBuffer;
    // the last stage's token, broadcast over PP
    private final Tensor nextToken = Tensor.ofLongs(0);
    private final Map<String, Object> tokenDict = Map.of(NEXT_TOKEN, nextToken);

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
        this.lastRow = new float[c.hidden()];
        this.normedRow = new float[c.hidden()];
        this.localLogits = new float[plan.vocabPerRank()];
        this.fullLogits = new float[c.vocab()];
        this.logitsBuffer = Tensor.allocate(DType.F32, 1, plan.vocabPerRank());
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
        Buffers b = buffers(t);
        boolean haveResidual;
        if (plan.firstStage()) {
            embed(tokens, b);
            haveResidual = false;
        } else {
            long c0 = clock.start();
            Map<String, Object> in = pp.recvTensorDict(pp.prevInGroup(), tp, received);
            clock.stop(CommClock.Kind.PP, c0);
            received = in; // the next hand-off of the same shape lands in these tensors
            read((Tensor) in.get(HIDDEN), b.hidden, t * h);
            read((Tensor) in.get(RESIDUAL), b.residual, t * h);
            haveResidual = true;
        }
        for (int l = 0; l < weights.layers.length; l++) {
            layer(l, weights.layers[l], b, haveResidual, t, start, cache);
            haveResidual = true;
        }
        int token;
        if (!plan.lastStage()) {
            b.sendHidden.buffer().asFloatBuffer().put(b.hidden, 0, t * h);
            b.sendResidual.buffer().asFloatBuffer().put(b.residual, 0, t * h);
            long c0 = clock.start();
            pp.sendTensorDict(b.handOff, pp.nextInGroup(), tp);
            Map<String, Object> next = pp.broadcastTensorDict(null, pp.worldSize() - 1);
            clock.stop(CommClock.Kind.PP, c0);
            token = (int) ((Tensor) next.get(NEXT_TOKEN)).getLong(0);
            lastLogits = null;
        } else {
            lastLogits = logits(b, t);
            token = Kernels.argmax(lastLogits, lastLogits.length);
            if (plan.ppSize() > 1) {
                nextToken.setLong(0, token);
                long c0 = clock.start();
                pp.broadcastTensorDict(tokenDict, pp.worldSize() - 1);
                clock.stop(CommClock.Kind.PP, c0);
            }
        }
        return token;
    }

    /**
     * The activations of a step of {@code tokens} tokens, reused from step to step: a decode step
     * allocates no array and no tensor of its own (the groups' receives land in tensors handed back to
     * them). A longer prompt than any before grows them once.
     */
    private static final class Buffers {
        final int tokens;
        /** The layer's output (vLLM's {@code hidden_states}) and the residual stream, {@code tokens x hidden}. */
        final float[] hidden;
        final float[] residual;
        /** Normed input of a projection, {@code tokens x hidden}. */
        final float[] x;
        final float[] qkv;
        final float[] attn;
        /** A row-parallel projection's partial sums, {@code tokens x hidden}. */
        final float[] partial;
        final float[] gateUp;
        final float[] act;
        /** The TP all-reduce's tensor, {@code tokens x hidden}. */
        final Tensor reduce;
        /** What a stage hands on: {hidden_states, residual}. */
        final Tensor sendHidden;
        final Tensor sendResidual;
        final Map<String, Object> handOff = new LinkedHashMap<>();

        Buffers(ShardPlan plan, int tokens) {
            int h = plan.config().hidden();
            int hd = plan.config().headDim();
            this.tokens = tokens;
            hidden = new float[tokens * h];
            residual = new float[tokens * h];
            x = new float[tokens * h];
            qkv = new float[tokens * (plan.localHeads() + 2 * plan.localKvHeads()) * hd];
            attn = new float[tokens * plan.localHeads() * hd];
            partial = new float[tokens * h];
            gateUp = new float[tokens * 2 * plan.localIntermediate()];
            act = new float[tokens * plan.localIntermediate()];
            reduce = Tensor.allocate(DType.F32, tokens, h);
            sendHidden = Tensor.allocate(DType.F32, tokens, h);
            sendResidual = Tensor.allocate(DType.F32, tokens, h);
            handOff.put(HIDDEN, sendHidden);
            handOff.put(RESIDUAL, sendResidual);
        }
    }

    /** The buffers for {@code t} tokens: the decode step's (t = 1) are kept, a prompt's made for it. */
    private Buffers buffers(int t) {
        if (t == 1) {
            if (decodeBuffers == null) {
                decodeBuffers = new Buffers(plan, 1);
            }
            return decodeBuffers;
        }
        return new Buffers(plan, t);
    }

    /** Vocabulary-parallel embedding into {@code b.hidden}: local rows, zeros for other ranks' tokens, summed over TP. */
    private void embed(int[] tokens, Buffers b) {
        float[] x = b.hidden;
        int h = plan.config().hidden();
        int v0 = plan.vocabStart();
        int vn = plan.vocabCount();
        for (int t = 0; t < tokens.length; t++) {
            int id = tokens[t];
            if (id < 0 || id >= plan.config().vocab()) {
                throw new IllegalArgumentException("token " + id + " is not in the vocabulary [0, " + plan.config().vocab() + ")");
            }
            if (id >= v0 && id < v0 + vn) {
                System.arraycopy(weights.embed, (id - v0) * h, x, t * h, h);
            } else {
                Arrays.fill(x, t * h, (t + 1) * h, 0f);
            }
        }
        allReduce(b, x);
    }

    /**
     * One decoder layer on vLLM's {@code (hidden_states, residual)} pair in {@code b}, updated in place:
     * the sum of the two is the layer's output in Hugging Face's formulation. Without a residual yet
     * (the first layer of the first stage), the input is the residual.
     */
    private void layer(int l, ShardWeights.Layer w, Buffers b, boolean haveResidual, int t, int start, KvCache cache) {
        LlamaConfig c = plan.config();
        int h = c.hidden();
        int hd = c.headDim();
        int qh = plan.localHeads();
        int kvh = plan.localKvHeads();
        int qkvWidth = (qh + 2 * kvh) * hd;

        // input_layernorm(hidden, residual): residual += hidden; x = norm(residual)
        if (haveResidual) {
            Kernels.addInto(b.residual, b.hidden, t * h);
        } else {
            System.arraycopy(b.hidden, 0, b.residual, 0, t * h);
        }
        Kernels.rmsNorm(b.residual, w.inputNorm, eps, t, h, b.x);

        Kernels.matmul(w.qkv, qkvWidth, h, b.x, t, b.qkv);
        int row = plan.kvRowFloats();
        for (int i = 0; i < t; i++) {
            int pos = start + i;
            int o = i * qkvWidth;
            Kernels.rope(b.qkv, o, qh, hd, pos, invFreq, cos, sin);
            Kernels.rope(b.qkv, o + qh * hd, kvh, hd, pos, invFreq, cos, sin);
            cache.put(l, KvCache.KEYS, pos, b.qkv, o + qh * hd);
            cache.put(l, KvCache.VALUES, pos, b.qkv, o + qh * hd + row);
        }
        attention(l, b.qkv, qkvWidth, t, start, cache, b.attn);

        Kernels.matmul(w.o, h, qh * hd, b.attn, t, b.partial);
        allReduce(b, b.partial);

        // post_attention_layernorm(hidden, residual)
        Kernels.addInto(b.residual, b.partial, t * h);
        Kernels.rmsNorm(b.residual, w.postNorm, eps, t, h, b.x);

        int ff = plan.localIntermediate();
        Kernels.matmul(w.gateUp, 2 * ff, h, b.x, t, b.gateUp);
        Kernels.swiglu(b.gateUp, t, ff, b.act);
        Kernels.matmul(w.down, h, ff, b.act, t, b.hidden);
        allReduce(b, b.hidden);
    }

    /** Causal grouped-query attention of the {@code t} new positions over the cache, local heads, into {@code out}. */
    private void attention(int l, float[] qkv, int qkvWidth, int t, int start, KvCache cache, float[] out) {
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
        Arrays.fill(out, 0, t * qh * hd, 0f);
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
    }

    /** Final norm of the last position, this rank's logits, gathered over TP; the whole vocabulary. */
    private float[] logits(Buffers b, int t) {
        int h = plan.config().hidden();
        int o = (t - 1) * h;
        for (int i = 0; i < h; i++) {
            lastRow[i] = b.residual[o + i] + b.hidden[o + i];
        }
        Kernels.rmsNorm(lastRow, weights.finalNorm, eps, 1, h, normedRow);
        // rows past the vocabulary (the last shard's padding) stay 0 and are cut off below
        Kernels.matmul(weights.lmHead, plan.vocabCount(), h, normedRow, 1, localLogits);
        int vocab = plan.config().vocab();
        if (plan.tpSize() == 1) {
            System.arraycopy(localLogits, 0, fullLogits, 0, vocab);
            return fullLogits;
        }
        logitsBuffer.buffer().asFloatBuffer().put(localLogits);
        long c0 = clock.start();
        Tensor all = tp.allGather(logitsBuffer, -1);
        clock.stop(CommClock.Kind.TP, c0);
        all.buffer().asFloatBuffer().get(fullLogits, 0, vocab);
        return fullLogits;
    }

    /** Sums {@code x} ({@code b.tokens x hidden}) over the TP group, in place, through {@code b.reduce}. */
    private void allReduce(Buffers b, float[] x) {
        if (plan.tpSize() == 1) {
            return;
        }
        int n = b.tokens * plan.config().hidden();
        b.reduce.buffer().asFloatBuffer().put(x, 0, n);
        long c0 = clock.start();
        tp.allReduce(b.reduce);
        clock.stop(CommClock.Kind.TP, c0);
        b.reduce.buffer().asFloatBuffer().get(x, 0, n);
    }

    private static void read(Tensor t, float[] into, int n) {
        if (t == null || t.dtype() != DType.F32 || t.numel() != n) {
            throw new IllegalStateException("the previous stage sent " + t + ", expected " + n + " float32 values");
        }
        t.buffer().asFloatBuffer().get(into, 0, n);
    }

}
