package io.jcomm.kvcache;

import java.util.ArrayList;
import java.util.BitSet;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;

/**
 * Which instance holds which blocks, as a router sees them from the KV events of every host (Dynamo's
 * KV indexer): a tree of prefix hashes (each block's node hangs under its parent's), each node with
 * the slices each instance holds and where. Since a prefix hash names every token before it, the
 * longest cached prefix of a request is the run of its block hashes, from the first, whose nodes an
 * instance holds completely (all layers and KV heads, over however many slices its ranks stored).
 *
 * <p>Bounded: at most {@code maxNodes} nodes; a stored event beyond it is dropped and counted
 * ({@link #dropped()}). Thread safe (one lock; every operation is O(its events or its blocks)).
 */
public final class PrefixTree implements BlockLocator {

    /** Most layer x KV-head cells of a model the tree tracks. */
    public static final int MAX_CELLS = 1 << 16;

    private final int maxNodes;
    private final Map<BlockHash, Node> nodes = new HashMap<>();
    private long dropped;

    private static final class Held {
        final BlockLocation location;
        final String publisher;

        Held(BlockLocation location, String publisher) {
            this.location = location;
            this.publisher = publisher;
        }
    }

    private static final class Node {
        final BlockHash parent;
        final int layers;
        final int kvHeads;
        /** instance -> slice -> holding */
        final Map<String, Map<KvSlice, Held>> holders = new LinkedHashMap<>();
        int children;

        Node(BlockHash parent, int layers, int kvHeads) {
            this.parent = parent;
            this.layers = layers;
            this.kvHeads = kvHeads;
        }

        boolean complete(String instance) {
            Map<KvSlice, Held> s = holders.get(instance);
            if (s == null) {
                return false;
            }
            BitSet cells = new BitSet(layers * kvHeads);
            for (KvSlice k : s.keySet()) {
                for (int l = k.layerStart(); l < k.layerEnd() && l < layers; l++) {
                    cells.set(l * kvHeads + k.headStart(), l * kvHeads + Math.min(k.headEnd(), kvHeads));
                }
            }
            return cells.cardinality() == layers * kvHeads;
        }
    }

    /** @param maxNodes the bound, at least 1 */
    public PrefixTree(int maxNodes) {
        if (maxNodes < 1) {
            throw new IllegalArgumentException("maxNodes " + maxNodes);
        }
        this.maxNodes = maxNodes;
    }

    /** Applies a batch: a snapshot first forgets what its publisher announced before. */
    public synchronized void apply(KvEventBatch batch) {
        if (batch.snapshot()) {
            clear(batch.publisher());
        }
        for (KvEvent e : batch.events()) {
            apply(batch.publisher(), e);
        }
    }

    /** Applies one event of {@code publisher}. */
    public synchronized void apply(String publisher, KvEvent e) {
        if (e instanceof KvEvent.Stored s) {
            Node n = nodes.get(s.prefix());
            if (n == null) {
                if (nodes.size() >= maxNodes) {
                    dropped++;
                    return;
                }
                n = new Node(s.parent(), s.layers(), s.kvHeads());
                nodes.put(s.prefix(), n);
                Node p = nodes.get(s.parent());
                if (p != null) {
                    p.children++;
                }
            }
            n.holders.computeIfAbsent(s.location().instance(), k -> new LinkedHashMap<>())
                    .put(s.location().slice(), new Held(s.location(), publisher));
        } else if (e instanceof KvEvent.Removed r) {
            Node n = nodes.get(r.prefix());
            if (n != null) {
                Map<KvSlice, Held> s = n.holders.get(r.instance());
                if (s != null) {
                    s.remove(r.slice());
                    if (s.isEmpty()) {
                        n.holders.remove(r.instance());
                    }
                }
                prune(r.prefix(), n);
            }
        } else {
            clear(publisher);
        }
    }

    private void clear(String publisher) {
        List<BlockHash> touched = new ArrayList<>();
        for (Map.Entry<BlockHash, Node> en : nodes.entrySet()) {
            Iterator<Map<KvSlice, Held>> it = en.getValue().holders.values().iterator();
            boolean hit = false;
            while (it.hasNext()) {
                Map<KvSlice, Held> s = it.next();
                hit |= s.values().removeIf(h -> h.publisher.equals(publisher));
                if (s.isEmpty()) {
                    it.remove();
                }
            }
            if (hit) {
                touched.add(en.getKey());
            }
        }
        for (BlockHash h : touched) {
            Node n = nodes.get(h);
            if (n != null) {
                prune(h, n);
            }
        }
    }

    /** Removes a node nobody holds and that has no children, and so on up. */
    private void prune(BlockHash h, Node n) {
        while (n != null && n.holders.isEmpty() && n.children == 0) {
            nodes.remove(h);
            Node p = nodes.get(n.parent);
            if (p != null) {
                p.children--;
            }
            h = n.parent;
            n = p;
        }
    }

    /**
     * For each instance that holds the first block completely, how many of {@code prefixHashes}' blocks,
     * from the first, it holds completely.
     */
    public synchronized Map<String, Integer> longestPrefix(List<BlockHash> prefixHashes) {
        Map<String, Integer> out = new LinkedHashMap<>();
        Set<String> alive = null;
        for (int i = 0; i < prefixHashes.size(); i++) {
            Node n = nodes.get(prefixHashes.get(i));
            if (n == null) {
                break;
            }
            Set<String> next = new HashSet<>();
            for (String inst : alive == null ? n.holders.keySet() : alive) {
                if (n.complete(inst)) {
                    next.add(inst);
                    out.put(inst, i + 1);
                }
            }
            if (next.isEmpty()) {
                break;
            }
            alive = next;
        }
        return out;
    }

    /** A holder of exactly {@code slice} at {@code prefix}, if any (the first that stored it). */
    @Override
    public synchronized Optional<BlockLocation> locate(BlockHash prefix, KvSlice slice) {
        Node n = nodes.get(prefix);
        if (n == null) {
            return Optional.empty();
        }
        for (Map<KvSlice, Held> s : n.holders.values()) {
            Held h = s.get(slice);
            if (h != null) {
                return Optional.of(h.location);
            }
        }
        return Optional.empty();
    }

    /** The instances holding any slice at {@code prefix}. */
    public synchronized Collection<String> holders(BlockHash prefix) {
        Node n = nodes.get(prefix);
        return n == null ? List.of() : List.copyOf(n.holders.keySet());
    }

    public synchronized int size() {
        return nodes.size();
    }

    /** Stored events dropped at the bound. */
    public synchronized long dropped() {
        return dropped;
    }
}
