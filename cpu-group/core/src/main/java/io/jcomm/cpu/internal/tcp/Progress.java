package io.jcomm.cpu.internal.tcp;

import io.jcomm.runtime.Entropy;
import java.util.Iterator;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The process's tcp progress thread ({@code jcomm-tcp-progress}), shared by every tcp group of the
 * process, and the place where one group's discovery of a dead peer process reaches the others.
 *
 * <h2>Why it exists</h2>
 * A caller drives the I/O of a group only while it is inside one of that group's calls (the fast path:
 * no thread hand-off). Bytes a finished call left for the socket, credit a peer waits for, and the EOF of
 * a peer that died would otherwise wait until the caller enters that group again, which in a pipeline may
 * be never (a stage that only sends). The progress thread drives every registered group that no caller is
 * driving: it takes the group's driver lock only if it is free ({@code tryLock}), runs one non-blocking
 * pass over its sockets and shared-memory rings, and lets go.
 *
 * <h2>Cadence</h2>
 * A group kicks the thread when a call leaves bytes waiting for the socket, and joins its busy set; while
 * that set is not empty the thread passes over its groups only, every {@value #BUSY_MIN_MICROS} us, backing
 * off to {@value #BUSY_MAX_MICROS} us, and a group leaves the set once nothing of it waits. Every group is
 * passed every {@value #IDLE_MILLIS} ms (so a dead link is noticed within about that long, at a cost of
 * about a microsecond per group per pass). So a process with thousands of groups (ranks as threads) pays
 * for the groups with bytes in flight, not for all of them, at the busy cadence. With no group registered
 * the thread parks until one is.
 *
 * <h2>Dead peers</h2>
 * Each process has a random identity that its groups publish with their addresses. When a group loses a
 * connection without a goodbye, every other group of this process with a member in that process fails
 * too, at once (a rank that learns of a death in {@code tp:1} fails its next {@code pp:0} call as well).
 * Peers that live in this very process (ranks as threads, in tests) are left out.
 */
final class Progress {

    private static final Logger LOG = LoggerFactory.getLogger(Progress.class);
    static final long IDLE_MILLIS = 20;
    static final long BUSY_MIN_MICROS = 50;
    static final long BUSY_MAX_MICROS = 2000;

    private static final class Holder {
        static final Progress SHARED = new Progress(Entropy.nextLong() | 1L);
    }

    private final long processId;
    private final Set<Engine> engines = ConcurrentHashMap.newKeySet();
    /** Groups kicked since the thread last looked (each once until it leaves the busy set). */
    private final ConcurrentLinkedQueue<Engine> kickedQueue = new ConcurrentLinkedQueue<>();
    /** Groups with bytes waiting for a socket: the progress thread's own. */
    private final Set<Engine> busySet = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
    private final Thread thread;

    private Progress(long processId) {
        this.processId = processId;
        this.thread = new Thread(this::run, "jcomm-tcp-progress");
        thread.setDaemon(true);
        thread.start();
    }

    /** The process's progress thread (started on first use). */
    static Progress shared() {
        return Holder.SHARED;
    }

    /** This process's identity, published with every group address (never 0). */
    long processId() {
        return processId;
    }

    void register(Engine e) {
        engines.add(e);
        LockSupport.unpark(thread);
    }

    void unregister(Engine e) {
        engines.remove(e);
    }

    /** {@code e} left bytes waiting for the socket: pass over it soon (once per busy spell of it). */
    void kick(Engine e) {
        kickedQueue.add(e);
        LockSupport.unpark(thread);
    }

    /**
     * {@code from} lost its connection to a member that lives in process {@code pid} without a goodbye:
     * every other group of this process with a member there fails.
     */
    void peerProcessDied(Engine from, long pid, String how) {
        if (pid == processId || pid == 0) {
            return;
        }
        for (Engine e : engines) {
            if (e != from) {
                e.peerProcessDied(pid, how);
            }
        }
    }

    private void run() {
        long busy = TimeUnit.MICROSECONDS.toNanos(BUSY_MIN_MICROS);
        long idle = TimeUnit.MILLISECONDS.toNanos(IDLE_MILLIS);
        long nextFull = System.nanoTime();
        while (true) {
            try {
                if (engines.isEmpty()) {
                    busySet.clear();
                    kickedQueue.clear();
                    LockSupport.park(this);
                    nextFull = System.nanoTime();
                    continue;
                }
                boolean kicked = false;
                for (Engine e; (e = kickedQueue.poll()) != null; ) {
                    kicked |= busySet.add(e);
                }
                if (kicked) {
                    busy = TimeUnit.MICROSECONDS.toNanos(BUSY_MIN_MICROS);
                }
                long now = System.nanoTime();
                if (now - nextFull >= 0) {
                    for (Engine e : engines) {
                        if (e.progressInBackground()) {
                            busySet.add(e);
                        }
                    }
                    nextFull = System.nanoTime() + idle;
                }
                for (Iterator<Engine> it = busySet.iterator(); it.hasNext(); ) {
                    Engine e = it.next();
                    if (!e.progressInBackground() && !e.kicked()) {
                        it.remove(); // a later kick brings it back
                    }
                }
                long sleep;
                if (!busySet.isEmpty()) {
                    sleep = busy;
                    busy = Math.min(TimeUnit.MICROSECONDS.toNanos(BUSY_MAX_MICROS), busy * 2);
                } else {
                    sleep = Math.max(0, nextFull - System.nanoTime());
                    busy = TimeUnit.MICROSECONDS.toNanos(BUSY_MIN_MICROS);
                }
                if (sleep > 0 && kickedQueue.isEmpty()) {
                    LockSupport.parkNanos(this, sleep);
                }
            } catch (Throwable t) { // never let the thread die: every group depends on it
                LOG.error("tcp progress thread: unexpected error (continuing)", t);
                LockSupport.parkNanos(this, TimeUnit.MILLISECONDS.toNanos(IDLE_MILLIS));
            }
        }
    }
}
