package io.jcomm.parallel;

/**
 * Told when a {@link ParallelState} creates or destroys one of its groups (logging, metrics,
 * tests). Called on the thread that created or destroyed the group; must not block or throw.
 */
public interface GroupListener {

    /** A listener that does nothing. */
    GroupListener NONE = new GroupListener() {
    };

    /** {@code group} is ready to use. */
    default void created(GroupCoordinator group) {
    }

    /** The group called {@code name} was destroyed. */
    default void destroyed(String name) {
    }
}
