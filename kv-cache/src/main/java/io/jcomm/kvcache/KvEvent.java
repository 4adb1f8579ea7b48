package io.jcomm.kvcache;

import java.util.Objects;

/**
 * What a host tells the others about its KV blocks (vLLM's {@code BlockStored} / {@code BlockRemoved}
 * / {@code AllBlocksCleared} KV events): carried in batches by {@link KvEventPublisher}, applied by
 * a {@link PrefixTree}.
 */
public sealed interface KvEvent permits KvEvent.Stored, KvEvent.Removed, KvEvent.Cleared {

    /**
     * A block is stored and may be read from {@code location}.
     *
     * @param prefix  its prefix hash ({@link BlockHasher#prefixHashes})
     * @param parent  the prefix hash of the block before it ({@link BlockHasher#root()} for the first)
     * @param layers  the model's layers
     * @param kvHeads the model's KV heads
     * @param location where it is; its slice says what part of the cache it holds
     */
    record Stored(BlockHash prefix, BlockHash parent, int layers, int kvHeads, BlockLocation location) implements KvEvent {
        public Stored {
            Objects.requireNonNull(prefix, "prefix");
            Objects.requireNonNull(parent, "parent");
            Objects.requireNonNull(location, "location");
            if (layers < 1 || kvHeads < 1 || (long) layers * kvHeads > PrefixTree.MAX_CELLS
                    || !KvSlice.whole(layers, kvHeads).contains(location.slice())) {
                throw new IllegalArgumentException(location.slice() + " of a model of " + layers + " layers x " + kvHeads
                        + " KV heads (at most " + PrefixTree.MAX_CELLS + " cells)");
            }
        }
    }

    /** The block of {@code slice} at {@code prefix} is gone from the publisher's instance. */
    record Removed(BlockHash prefix, KvSlice slice, String instance) implements KvEvent {
        public Removed {
            Objects.requireNonNull(prefix, "prefix");
            Objects.requireNonNull(slice, "slice");
            Objects.requireNonNull(instance, "instance");
        }
    }

    /** Everything this publisher announced before is gone (it starts over, or closes). */
    record Cleared() implements KvEvent {
    }
}
