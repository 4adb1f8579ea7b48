package io.jcomm.kvcache;

import io.jcomm.runtime.shm.ProcessIdentity;

/**
 * The process that owns a block's memory, as another process on the same host can check it: its pid
 * and its start time (clock ticks since boot), so that a recycled pid is not taken for the owner.
 * An index never serves an entry whose owner is not {@link #alive()}. Immutable.
 *
 * @param pid        the process id, {@code > 0}
 * @param startTicks its start time in clock ticks since boot, {@code -1} where unknown
 */
public record BlockOwner(long pid, long startTicks) {

    public BlockOwner {
        if (pid <= 0) {
            throw new IllegalArgumentException("pid " + pid);
        }
    }

    /** This process. */
    public static BlockOwner self() {
        ProcessIdentity p = ProcessIdentity.self();
        return new BlockOwner(p.pid(), p.startTicks());
    }

    /** False when the process is gone, a zombie, or its pid belongs to another process now. */
    public boolean alive() {
        return new ProcessIdentity(pid, startTicks).alive();
    }
}
