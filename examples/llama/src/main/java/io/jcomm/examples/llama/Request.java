package io.jcomm.examples.llama;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * A prompt and how many tokens to generate after it (greedy, no stop token). Immutable.
 */
public record Request(int[] prompt, int maxNewTokens) {

    public Request {
        if (prompt.length < 1) {
            throw new IllegalArgumentException("a prompt needs at least one token");
        }
        if (maxNewTokens < 1) {
            throw new IllegalArgumentException("maxNewTokens must be >= 1, got " + maxNewTokens);
        }
        prompt = prompt.clone();
    }

    @Override
    public int[] prompt() {
        return prompt.clone();
    }

    /** Positions this request needs in a KV cache. */
    public int positions() {
        return prompt.length + maxNewTokens;
    }

    /**
     * The demo's requests, the rule {@code scripts/llama_reference.py} uses too: request {@code i} is a
     * prompt of {@code 4 + 3i} tokens, token {@code j} being {@code (1 + 7919 (131 i + j)) mod vocab},
     * followed by {@code tokens + 8 (i mod 2)} new tokens (unequal lengths, so that data-parallel
     * replicas finish at different steps).
     */
    public static List<Request> defaults(int count, int tokens, int vocab) {
        List<Request> out = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            int[] p = new int[4 + 3 * i];
            for (int j = 0; j < p.length; j++) {
                p[j] = (int) ((1 + 7919L * (131L * i + j)) % vocab);
            }
            out.add(new Request(p, tokens + 8 * (i % 2)));
        }
        return out;
    }

    /**
     * A shared-prefix workload (sglang's generated-shared-prefix benchmark): {@code groups} system
     * prompts of {@code systemTokens} tokens, each followed by {@code perGroup} questions of
     * {@code questionTokens} tokens, asked round-robin over the groups (question 0 of every group, then
     * question 1, ...), each answered with {@code tokens} new tokens. Deterministic.
     */
    public static List<Request> sharedPrefix(int groups, int perGroup, int systemTokens, int questionTokens, int tokens,
                                             int vocab) {
        List<Request> out = new ArrayList<>(groups * perGroup);
        for (int q = 0; q < perGroup; q++) {
            for (int g = 0; g < groups; g++) {
                int[] p = new int[systemTokens + questionTokens];
                for (int j = 0; j < systemTokens; j++) {
                    p[j] = (int) ((1 + 7919L * (977L * g + j)) % vocab);
                }
                for (int j = 0; j < questionTokens; j++) {
                    p[systemTokens + j] = (int) ((3 + 104729L * (31L * (g * perGroup + q) + j)) % vocab);
                }
                out.add(new Request(p, tokens));
            }
        }
        return out;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Request && ((Request) o).maxNewTokens == maxNewTokens && Arrays.equals(((Request) o).prompt, prompt);
    }

    @Override
    public int hashCode() {
        return 31 * Arrays.hashCode(prompt) + maxNewTokens;
    }

    @Override
    public String toString() {
        return "Request[" + prompt.length + " prompt tokens, " + maxNewTokens + " new]";
    }
}
