package io.jcomm.kvcache;

import java.util.Optional;

/**
 * Answers where a block of a prefix and slice is: the host's index ({@link HostBlockIndex}, blocks of
 * this host) or the blocks other hosts announced ({@link PrefixTree}, fed by their KV events).
 */
@FunctionalInterface
public interface BlockLocator {

    /** Where the block of {@code slice} at prefix hash {@code prefix} can be read, if anyone has it. */
    Optional<BlockLocation> locate(BlockHash prefix, KvSlice slice);

    /** The host index as a locator. */
    static BlockLocator of(HostBlockIndex index) {
        return (prefix, slice) -> index.lookup(BlockHasher.blockKey(prefix, slice));
    }

    /** This locator, then {@code next} where this one has nothing. */
    default BlockLocator orElse(BlockLocator next) {
        return (prefix, slice) -> {
            Optional<BlockLocation> l = locate(prefix, slice);
            return l.isPresent() ? l : next.locate(prefix, slice);
        };
    }
}
