package io.jcomm.parallel;

import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Which global ranks share a host: the host id of every rank ({@link io.jcomm.api.DistributedConfig#hostId()},
 * i.e. {@code JCOMM_HOST_ID} or the host name), gathered once when the world group is made. Ranks
 * with equal ids share memory (the contract of {@code JCOMM_HOST_ID}); ranks that are told they are
 * on different hosts are treated as such even when they run on one machine. Immutable.
 */
public final class HostTopology {

    private final List<String> hostIds;
    private final Map<String, List<Integer>> ranksByHost;

    private HostTopology(List<String> hostIds) {
        this.hostIds = List.copyOf(hostIds);
        Map<String, List<Integer>> byHost = new LinkedHashMap<>();
        for (int r = 0; r < this.hostIds.size(); r++) {
            byHost.computeIfAbsent(this.hostIds.get(r), h -> new ArrayList<>()).add(r);
        }
        Map<String, List<Integer>> frozen = new LinkedHashMap<>();
        byHost.forEach((h, rs) -> frozen.put(h, List.copyOf(rs)));
        this.ranksByHost = Collections.unmodifiableMap(frozen);
    }

    /** The topology of the given host ids, indexed by global rank. */
    public static HostTopology of(List<String> hostIdsByRank) {
        Objects.requireNonNull(hostIdsByRank, "hostIdsByRank");
        if (hostIdsByRank.isEmpty()) {
            throw new IllegalArgumentException("no ranks");
        }
        for (String h : hostIdsByRank) {
            if (h == null || h.isEmpty()) {
                throw new IllegalArgumentException("empty host id in " + hostIdsByRank);
            }
        }
        return new HostTopology(hostIdsByRank);
    }

    public int worldSize() {
        return hostIds.size();
    }

    /** Host id of global rank {@code rank}. */
    public String hostOf(int rank) {
        return hostIds.get(rank);
    }

    /** Number of distinct hosts (nodes). */
    public int nodeCount() {
        return ranksByHost.size();
    }

    /** Host ids in order of their lowest rank. */
    public List<String> hosts() {
        return List.copyOf(ranksByHost.keySet());
    }

    /** The global ranks on {@code rank}'s host, ascending (it included). */
    public List<Integer> ranksOnHostOf(int rank) {
        return ranksByHost.get(hostOf(rank));
    }

    /** Index of {@code rank}'s host in {@link #hosts()} (the node rank). */
    public int nodeRankOf(int rank) {
        return hosts().indexOf(hostOf(rank));
    }

    public boolean sameHost(int a, int b) {
        return hostOf(a).equals(hostOf(b));
    }

    /** True when every rank in {@code ranks} is on one host. */
    public boolean allOnOneHost(Collection<Integer> ranks) {
        String first = null;
        for (int r : ranks) {
            String h = hostOf(r);
            if (first == null) {
                first = h;
            } else if (!first.equals(h)) {
                return false;
            }
        }
        return true;
    }

    /** Host id by global rank. */
    public List<String> hostIds() {
        return hostIds;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof HostTopology && ((HostTopology) o).hostIds.equals(hostIds);
    }

    @Override
    public int hashCode() {
        return hostIds.hashCode();
    }

    @Override
    public String toString() {
        return "HostTopology{nodes=" + nodeCount() + ", " + ranksByHost + "}";
    }
}
