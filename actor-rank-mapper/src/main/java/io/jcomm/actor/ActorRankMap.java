package io.jcomm.actor;

import io.jcomm.api.OpContext;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.ray.ActorId;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Which actor is which rank of a group: immutable, built from every rank's actor id in rank order
 * (what {@link ActorRankMapper} gathers). Looking up an actor that is not a member is an error
 * naming the actor, never a default.
 */
public final class ActorRankMap {

    private final String group;
    private final List<ActorId> actors;
    private final Map<ActorId, Integer> ranks;

    private ActorRankMap(String group, List<ActorId> actors, Map<ActorId, Integer> ranks) {
        this.group = group;
        this.actors = actors;
        this.ranks = ranks;
    }

    /**
     * The map of {@code actorsInRankOrder} (rank r is element r).
     *
     * @throws IllegalArgumentException if the list is empty or an actor id appears twice
     */
    public static ActorRankMap of(String group, List<ActorId> actorsInRankOrder) {
        return build(group, actorsInRankOrder, false);
    }

    /**
     * The map; a duplicate id is an {@link IllegalArgumentException} in the caller's list, a
     * {@link ProtocolException} in what the ranks sent ({@code fromPeers}: two ranks claim one actor).
     */
    private static ActorRankMap build(String group, List<ActorId> actorsInRankOrder, boolean fromPeers) {
        Objects.requireNonNull(group, "group");
        List<ActorId> actors = List.copyOf(actorsInRankOrder);
        if (actors.isEmpty()) {
            throw new IllegalArgumentException("no actors");
        }
        Map<ActorId, Integer> ranks = new HashMap<>();
        for (int r = 0; r < actors.size(); r++) {
            Integer prev = ranks.putIfAbsent(actors.get(r), r);
            if (prev != null) {
                OpContext ctx = OpContext.of(group, -1, "mapActors");
                String detail = "actor " + actors.get(r) + " is claimed by ranks " + prev + " and " + r;
                throw fromPeers ? new ProtocolException(ctx, detail) : ctx.invalidArgument(detail);
            }
        }
        return new ActorRankMap(group, actors, Collections.unmodifiableMap(ranks));
    }

    /**
     * Decodes the gathered wire form: {@code worldSize} ids of {@link ActorId#HEX_LENGTH} ASCII bytes
     * each, rank r's at {@code [32r, 32r + 32)}.
     *
     * @throws ProtocolException for a wrong length, a non-hex byte, or a duplicate id
     */
    public static ActorRankMap fromGathered(String group, byte[] gathered, int worldSize) {
        Objects.requireNonNull(gathered, "gathered");
        if (worldSize < 1 || gathered.length != (long) worldSize * ActorId.HEX_LENGTH) {
            throw new ProtocolException(OpContext.of(group, -1, "mapActors"), "gathered " + gathered.length
                    + " bytes for " + worldSize + " ranks; expected " + (long) worldSize * ActorId.HEX_LENGTH);
        }
        List<ActorId> actors = new ArrayList<>(worldSize);
        for (int r = 0; r < worldSize; r++) {
            try {
                actors.add(ActorId.fromAsciiBytes(gathered, r * ActorId.HEX_LENGTH));
            } catch (IllegalArgumentException e) {
                throw new ProtocolException(OpContext.of(group, -1, "mapActors"), "rank " + r + " sent a malformed actor id: "
                        + e.getMessage(), e);
            }
        }
        return build(group, actors, true);
    }

    /** The group the map describes. */
    public String group() {
        return group;
    }

    /**
     * The rank of {@code actor}.
     *
     * @throws IllegalArgumentException naming the actor when it is not a member
     */
    public int rankOf(ActorId actor) {
        Integer r = ranks.get(Objects.requireNonNull(actor, "actor"));
        if (r == null) {
            throw OpContext.of(group, -1, "rankOf").invalidArgument("actor " + actor.toHex()
                    + " is not a member of " + group + " (members: " + actors + ")");
        }
        return r;
    }

    /** Whether {@code actor} is a member. */
    public boolean contains(ActorId actor) {
        return ranks.containsKey(actor);
    }

    /** The actor of {@code rank}. */
    public ActorId actorOf(int rank) {
        if (rank < 0 || rank >= actors.size()) {
            throw OpContext.of(group, -1, "actorOf").invalidArgument("rank " + rank + " not in [0, " + actors.size() + ")");
        }
        return actors.get(rank);
    }

    /** The members in rank order. */
    public List<ActorId> actors() {
        return actors;
    }

    public int size() {
        return actors.size();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof ActorRankMap && ((ActorRankMap) o).actors.equals(actors) && ((ActorRankMap) o).group.equals(group);
    }

    @Override
    public int hashCode() {
        return actors.hashCode() * 31 + group.hashCode();
    }

    @Override
    public String toString() {
        return "ActorRankMap{" + group + " " + actors + "}";
    }
}
