package io.jcomm.parallel;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

/**
 * The groups of one {@link ParallelState} by unique name ({@code world}, {@code tp:0},
 * {@code pp:1}, ...): the groups this process is a member of, in creation order. Owned by its
 * parallel state (there is no global registry); thread safe.
 */
public final class GroupRegistry {

    private final Map<String, GroupCoordinator> groups = new LinkedHashMap<>();

    GroupRegistry() {
    }

    /** The group called {@code name}, if this process is a member of a live one. */
    public synchronized Optional<GroupCoordinator> find(String name) {
        return Optional.ofNullable(groups.get(name));
    }

    /**
     * The group called {@code name}.
     *
     * @throws IllegalArgumentException naming the known groups when there is none of that name
     */
    public synchronized GroupCoordinator get(String name) {
        GroupCoordinator g = groups.get(name);
        if (g == null) {
            throw new IllegalArgumentException("no group named '" + name + "' (known: " + groups.keySet() + ")");
        }
        return g;
    }

    /** Names of the live groups, in creation order. */
    public synchronized List<String> names() {
        return new ArrayList<>(groups.keySet());
    }

    public synchronized int size() {
        return groups.size();
    }

    /** Adds {@code group}; its name must be new. */
    synchronized void register(GroupCoordinator group) {
        if (groups.containsKey(group.name())) {
            throw new IllegalStateException("a group named '" + group.name() + "' already exists");
        }
        groups.put(group.name(), group);
    }

    /** Fails unless {@code name} is free. */
    synchronized void requireFree(String name) {
        if (groups.containsKey(name)) {
            throw new IllegalStateException("a group named '" + name + "' already exists");
        }
    }

    synchronized void remove(String name) {
        groups.remove(name);
    }

    @Override
    public synchronized String toString() {
        return "GroupRegistry" + groups.keySet();
    }
}
