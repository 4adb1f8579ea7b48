package io.jcomm.kvcache;

import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Picks the instance to send a request to, from what the {@link PrefixTree} knows of every instance's
 * cached blocks and from the load the router itself sent (tokens of requests routed and not finished),
 * the rule of Dynamo's KV-aware router:
 *
 * <pre>
 * cost(i) = (prompt tokens - tokens of the longest prefix instance i holds) + loadWeight x in-flight tokens(i)
 * </pre>
 *
 * The instance of least cost wins; ties go to the longer cached prefix, then to the name. With
 * {@code loadWeight = 0} it is pure prefix affinity; large, pure load balancing. {@link #started} and
 * {@link #finished} keep the load; {@link #route} does not change it. Thread safe.
 */
public final class KvRouter {

    private final PrefixTree tree;
    private final BlockHasher hasher;
    private final double loadWeight;
    private final Map<String, Long> inFlight = new ConcurrentHashMap<>();

    /**
     * @param tree       what the instances hold
     * @param hasher     the model's block hashes (block size, identity)
     * @param loadWeight tokens of prefill a token in flight is worth, {@code >= 0}
     */
    public KvRouter(PrefixTree tree, BlockHasher hasher, double loadWeight) {
        this.tree = Objects.requireNonNull(tree, "tree");
        this.hasher = Objects.requireNonNull(hasher, "hasher");
        if (!(loadWeight >= 0)) {
            throw new IllegalArgumentException("loadWeight " + loadWeight);
        }
        this.loadWeight = loadWeight;
    }

    /**
     * The decision for one request.
     *
     * @param instance     where to send it
     * @param cachedTokens tokens of its prompt that instance holds (whole blocks from the start)
     * @param cost         its cost by the rule
     * @param cached       every candidate's cached tokens
     */
    public record Route(String instance, int cachedTokens, double cost, Map<String, Integer> cached) {
    }

    /** Cached tokens of {@code prompt} for each instance that holds its first block. */
    public Map<String, Integer> cachedTokens(int[] prompt) {
        List<BlockHash> hashes = hasher.fullBlocks(prompt);
        Map<String, Integer> blocks = tree.longestPrefix(hashes);
        Map<String, Integer> out = new java.util.LinkedHashMap<>();
        blocks.forEach((k, v) -> out.put(k, v * hasher.blockTokens()));
        return out;
    }

    /** Routes {@code prompt} to one of {@code instances} (not empty) by the rule. */
    public Route route(int[] prompt, Collection<String> instances) {
        if (instances.isEmpty()) {
            throw new IllegalArgumentException("no instance to route to");
        }
        Map<String, Integer> cached = cachedTokens(prompt);
        Comparator<String> order = Comparator.<String>comparingDouble(i -> cost(prompt.length, cached.getOrDefault(i, 0), i))
                .thenComparing(i -> -cached.getOrDefault(i, 0)).thenComparing(Comparator.naturalOrder());
        String best = instances.stream().min(order).orElseThrow();
        int c = cached.getOrDefault(best, 0);
        return new Route(best, c, cost(prompt.length, c, best), Map.copyOf(cached));
    }

    private double cost(int promptTokens, int cachedTokens, String instance) {
        return (promptTokens - cachedTokens) + loadWeight * inFlight.getOrDefault(instance, 0L);
    }

    /** A request of {@code tokens} (prompt and expected new tokens) went to {@code instance}. */
    public void started(String instance, long tokens) {
        inFlight.merge(instance, tokens, Long::sum);
    }

    /** It finished. */
    public void finished(String instance, long tokens) {
        inFlight.compute(instance, (k, v) -> v == null || v - tokens <= 0 ? null : v - tokens);
    }

    /** Tokens in flight on {@code instance}. */
    public long load(String instance) {
        return inFlight.getOrDefault(instance, 0L);
    }
}
