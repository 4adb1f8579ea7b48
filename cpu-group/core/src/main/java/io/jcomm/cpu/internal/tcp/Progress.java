package io.jcomm.cpu.internal.tcp;

import io.jcomm.api.internal.Entropy;
import java.util.concurrent.CopyOnWriteArrayList;
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
 * A group kicks the thread when a call leaves bytes waiting for the socket; while any group has such
 * bytes the thread passes every {@value #BUSY_MIN_MICROS} us, backing off to {@value #BUSY_MAX_MICROS} us;
 * otherwise every {@value #IDLE_MILLIS} ms (so a dead link is noticed within about that long, at a cost of
 * about a microsecond per group per pass). With no group registered it parks until one is.
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
    private final CopyOnWriteArrayList<Engine> engines = new CopyOnWriteArrayList<>();
    private final Thread thread;
    private volatile boolean kicked;

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

    /** A group left bytes waiting for the socket: pass soon. */
    void kick() {
        kicked = true;
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
        while (true) {
            try {
                if (engines.isEmpty()) {
                    LockSupport.park(this);
                    continue;
                }
                if (kicked) {
                    kicked = false;
                    busy = TimeUnit.MICROSECONDS.toNanos(BUSY_MIN_MICROS);
                }
                boolean pending = false;
                for (Engine e : engines) {
                    pending |= e.progressInBackground();
                }
                long sleep;
                if (pending) {
                    sleep = busy;
                    busy = Math.min(TimeUnit.MICROSECONDS.toNanos(BUSY_MAX_MICROS), busy * 2);
                } else {
                    sleep = TimeUnit.MILLISECONDS.toNanos(IDLE_MILLIS);
                    busy = TimeUnit.MICROSECONDS.toNanos(BUSY_MIN_MICROS);
                }
                LockSupport.parkNanos(this, sleep);
            } catch (Throwable t) { // never let the thread die: every group depends on it
                LOG.error("tcp progress thread: unexpected error (continuing)", t);
                LockSupport.parkNanos(this, TimeUnit.MILLISECONDS.toNanos(IDLE_MILLIS));
            }
        }
    }
}
