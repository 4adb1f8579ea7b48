package io.jcomm.examples.llama;

import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.parallel.ParallelState;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Runs requests to completion on one rank of a TP x PP x DP job, one sequence at a time per
 * data-parallel replica: request {@code i} goes to replica {@code i mod dp}. Each iteration every rank
 * of the job first agrees over its DP group on whether any replica still has work
 * ({@link ParallelState#dpAgree}, one int64 sum, what vLLM's DP engines do every step); while one has,
 * every replica steps: a replica with a request runs its prompt (prefill) or its next token (decode),
 * a replica without waits for the next agreement. So all replicas step until every replica is done,
 * and none leaves a DP collective behind.
 *
 * <p>Not thread safe: one per rank.
 */
public final class Engine {

    private final ParallelState ps;
    private final LlamaModel model;
    private final int logitsSteps;
    private final PrefixCache prefix;

    /**
     * @param logitsSteps how many steps of each request keep their logits (on last-stage ranks), for
     *                    comparison with a reference
     */
    public Engine(ParallelState ps, LlamaModel model, int logitsSteps) {
        this(ps, model, logitsSteps, null);
    }

    /**
     * An engine that reuses cached prefixes: before a prompt runs, the ranks of its replica agree on the
     * longest prefix of whole blocks every one of them can read (at most all but the prompt's last token,
     * which must run to give the first token), read it into the sequence's cache, and compute only the
     * rest; afterwards each stores the prompt's full blocks in its pool.
     *
     * @param prefix this rank's prefix cache, or null for none
     */
    Engine(ParallelState ps, LlamaModel model, int logitsSteps, PrefixCache prefix) {
        this.prefix = prefix;
        this.ps = Objects.requireNonNull(ps, "ps");
        this.model = Objects.requireNonNull(model, "model");
        if (logitsSteps < 0) {
            throw new IllegalArgumentException("logitsSteps must be >= 0");
        }
        this.logitsSteps = logitsSteps;
    }

    /** What one rank saw of a run. */
    public static final class Result {
        /** Request index to its generated tokens, for this rank's replica's requests. */
        public final Map<Integer, int[]> tokens = new LinkedHashMap<>();
        /** Request index to the logits of its first steps; last-stage ranks only. */
        public final Map<Integer, List<float[]>> logits = new LinkedHashMap<>();
        /** Wall time of each decode iteration of this rank (agreement, step, sampling), nanoseconds. */
        public long[] decodeStepNanos = new long[0];
        /** Of which inside jcomm calls, by {@link CommClock.Kind} (its ordinal). */
        public final long[] decodeCommNanos = new long[CommClock.Kind.values().length];
        /** Iterations spent waiting for other replicas (no request left here). */
        public int idleIterations;
        /** Prompts run and their total time. */
        public int prefills;
        public long prefillNanos;
        /** First to last iteration. */
        public long wallNanos;
        /** Prompt tokens computed, and read from cached blocks instead. */
        public long promptTokensComputed;
        public long promptTokensReused;
        /** Request index to its time to first token on this rank (lookup, reads and the prompt's step), nanoseconds. */
        public final Map<Integer, Long> ttftNanos = new LinkedHashMap<>();

        /** Decode tokens of this replica: one per decode iteration. */
        public int decodeTokens() {
            return decodeStepNanos.length;
        }

        public long decodeNanos() {
            long s = 0;
            for (long n : decodeStepNanos) {
                s += n;
            }
            return s;
        }
    }

    /**
     * Runs every request of this rank's replica to its {@link Request#maxNewTokens}; collective over
     * the whole job (every rank must call it with the same list).
     *
     * @param cacheCapacity positions of the KV cache, at least every request's {@link Request#positions()}
     */
    public Result run(List<Request> requests, int cacheCapacity) {
        int dp = ps.dp().worldSize();
        int replica = ps.dp().rankInGroup();
        for (Request r : requests) {
            if (r.positions() > cacheCapacity) {
                throw new IllegalArgumentException(r + " needs " + r.positions() + " positions, the cache has " + cacheCapacity);
            }
        }
        Deque<Integer> queue = new ArrayDeque<>();
        for (int i = replica; i < requests.size(); i += dp) {
            queue.add(i);
        }
        KvCache cache = model.newCache(cacheCapacity);
        CommClock clock = model.clock();
        Result result = new Result();
        long[] steps = new long[64];
        int nSteps = 0;
        int current = -1;
        int[] generated = null;
        int count = 0;
        List<float[]> kept = null;
        long begin = System.nanoTime();
        long[] work = new long[1];
        while (true) {
            long t0 = System.nanoTime();
            long[] comm0 = clock.snapshot();
            work[0] = current >= 0 || !queue.isEmpty() ? 1 : 0;
            long a0 = clock.start();
            long busy = ps.dpAgree(work, ReduceOp.SUM)[0];
            clock.stop(CommClock.Kind.DP, a0);
            if (busy == 0) {
                break;
            }
            if (work[0] == 0) {
                result.idleIterations++;
                continue;
            }
            int token;
            boolean decode = current >= 0;
            if (!decode) {
                current = queue.poll();
                Request r = requests.get(current);
                generated = new int[r.maxNewTokens()];
                count = 0;
                kept = new ArrayList<>();
                int[] prompt = r.prompt();
                int reused = prefix == null ? 0 : reuse(prompt, cache);
                token = model.step(reused == 0 ? prompt : Arrays.copyOfRange(prompt, reused, prompt.length), reused, cache);
                result.ttftNanos.put(current, System.nanoTime() - t0);
                result.promptTokensReused += reused;
                result.promptTokensComputed += prompt.length - reused;
                if (prefix != null) {
                    prefix.store(prompt, prompt.length, cache, false);
                }
            } else {
                Request r = requests.get(current);
                token = model.step(new int[] {generated[count - 1]}, r.prompt().length + count - 1, cache);
            }
            float[] logits = model.lastLogits();
            if (logits != null && kept.size() < logitsSteps) {
                kept.add(logits.clone());
            }
            generated[count++] = token;
            long dt = System.nanoTime() - t0;
            if (decode) {
                if (nSteps == steps.length) {
                    steps = Arrays.copyOf(steps, nSteps * 2);
                }
                steps[nSteps++] = dt;
                long[] comm1 = clock.snapshot();
                for (int k = 0; k < comm1.length; k++) {
                    result.decodeCommNanos[k] += comm1[k] - comm0[k];
                }
            } else {
                result.prefills++;
                result.prefillNanos += dt;
            }
            if (count == generated.length) {
                result.tokens.put(current, generated);
                if (model.lastLogits() != null || !kept.isEmpty()) {
                    result.logits.put(current, kept);
                }
                current = -1;
            }
        }
        result.wallNanos = System.nanoTime() - begin;
        result.decodeStepNanos = Arrays.copyOf(steps, nSteps);
        if (prefix != null) {
            prefix.release(cache);
        }
        return result;
    }

    /**
     * Reads the longest cached prefix of whole blocks every rank of this replica has into {@code cache}
     * and returns its tokens: the ranks agree (minimum over TP, then PP) on what all can read, read it,
     * and agree again on what arrived intact.
     */
    private int reuse(int[] prompt, KvCache cache) {
        int bt = prefix.hasher().blockTokens();
        int n = agreeMin(prefix.available(prompt, (prompt.length - 1) / bt));
        if (n == 0) {
            return 0;
        }
        return agreeMin(prefix.read(n, cache)) * bt;
    }

    private int agreeMin(int v) {
        Tensor t = Tensor.ofLongs(v);
        if (ps.tp().worldSize() > 1) {
            t = ps.tp().allReduce(t, ReduceOp.MIN);
        }
        if (ps.pp().worldSize() > 1) {
            t = ps.pp().allReduce(t, ReduceOp.MIN);
        }
        return (int) t.getLong(0);
    }
}
