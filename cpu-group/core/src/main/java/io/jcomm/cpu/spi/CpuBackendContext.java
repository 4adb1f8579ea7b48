package io.jcomm.cpu.spi;

import io.jcomm.api.store.Store;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Everything a {@link CpuBackendProvider} needs to create a backend for one group.
 *
 * @param store       rendezvous store, already prefixed for this group (keys are private to it)
 * @param groupName   unique group name (for error messages)
 * @param rank        this process's rank in the group
 * @param size        group size ({@code > 1}; the group handles size 1 without a backend)
 * @param globalRanks global rank of each group rank
 * @param hostname    address peers should use to reach this process (e.g. {@code 127.0.0.1})
 * @param timeout     deadline for connection set-up
 * @param options     backend-specific options, e.g. {@code gloo.devices}, {@code gloo.ifname},
 *                    {@code tcp.transport} (immutable copy)
 * @param generation  the group's generation ({@link io.jcomm.api.ProcessGroup#generation()}: 0 as
 *                    created, +1 per shrink); a backend that identifies its connections binds them
 *                    to it, so that a peer of another generation is refused
 * @param memberTag   a short ASCII text (at most {@link #MAX_MEMBER_TAG} characters; empty: none) that a
 *                    backend which publishes each member's address in the store may publish beside it,
 *                    so that every member learns every other's at creation without a collective
 *                    ({@link CpuBackend#memberTags()}); the group puts its codec's fingerprint here
 */
public record CpuBackendContext(Store store, String groupName, int rank, int size, List<Integer> globalRanks,
                                String hostname, Duration timeout, Map<String, String> options, int generation,
                                String memberTag) {

    /** The longest {@link #memberTag()}. */
    public static final int MAX_MEMBER_TAG = 256;

    public CpuBackendContext {
        Objects.requireNonNull(store, "store");
        Objects.requireNonNull(groupName, "groupName");
        Objects.requireNonNull(hostname, "hostname");
        Objects.requireNonNull(timeout, "timeout");
        globalRanks = List.copyOf(globalRanks);
        options = Map.copyOf(options);
        if (size < 1 || rank < 0 || rank >= size || globalRanks.size() != size) {
            throw new IllegalArgumentException("inconsistent group: rank " + rank + " size " + size + " ranks " + globalRanks);
        }
        if (generation < 0) {
            throw new IllegalArgumentException("generation must be >= 0, got " + generation);
        }
        Objects.requireNonNull(memberTag, "memberTag");
        if (!isMemberTag(memberTag)) {
            throw new IllegalArgumentException("a member tag is at most " + MAX_MEMBER_TAG
                    + " printable ASCII characters without spaces, got \"" + memberTag + "\"");
        }
    }

    /** Whether {@code s} can be a {@link #memberTag()}: at most {@link #MAX_MEMBER_TAG} printable ASCII characters, no space. */
    public static boolean isMemberTag(String s) {
        return s.length() <= MAX_MEMBER_TAG && s.chars().allMatch(c -> c > 0x20 && c < 0x7f);
    }

    /** A context without a member tag. */
    public CpuBackendContext(Store store, String groupName, int rank, int size, List<Integer> globalRanks,
                             String hostname, Duration timeout, Map<String, String> options, int generation) {
        this(store, groupName, rank, size, globalRanks, hostname, timeout, options, generation, "");
    }

    /** A context of generation 0 (a group as created). */
    public CpuBackendContext(Store store, String groupName, int rank, int size, List<Integer> globalRanks,
                             String hostname, Duration timeout, Map<String, String> options) {
        this(store, groupName, rank, size, globalRanks, hostname, timeout, options, 0);
    }

    /** An option's value or {@code def}. */
    public String option(String key, String def) {
        return options.getOrDefault(key, def);
    }
}
