package io.jcomm.runtime.recorder;

import io.jcomm.api.HostIdentity;
import io.jcomm.runtime.recorder.RecorderReader.GroupState;
import io.jcomm.runtime.recorder.RecorderReader.Snapshot;
import io.jcomm.api.store.Store;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Publishes what this process's {@link FlightRecorder} says to the job's store, for peers on other
 * hosts, which cannot read the recorder file: their timeouts then name what a missing rank there is
 * doing, as same-host timeouts do from the file ({@code "rank 2 on host B: in pp:0 recvObject #412 for
 * 9.8 s"}).
 *
 * <h2>Cost</h2>
 * Nothing on the operations' path. One daemon thread per process ({@code jcomm-state-publisher}),
 * started by the first group that has a member on another host, reads the process's own recorder
 * mapping once a second and writes a {@link RecorderSummary} under its key only when what it says has
 * changed, and then only when it has not changed for one second (a rank that is stuck or idle is
 * published 1 to 2 s after it stopped) or the last write is {@value #REFRESH_SECONDS} s old (a busy rank:
 * one write per {@value #REFRESH_SECONDS} s). A job whose ranks keep running operations makes a few
 * writes per process per minute; a job on one host makes none.
 *
 * <h2>Targets</h2>
 * A target is a store and a key ({@link #publishTo}); several groups of the process may register the
 * same store (the process's summary is written once per distinct store key). A target whose store
 * fails (closed with its job) is dropped.
 */
public final class StatePublisher {

    private static final Logger LOG = LoggerFactory.getLogger(StatePublisher.class);
    static final long PERIOD_MILLIS = 1000;
    static final long REFRESH_SECONDS = 10;

    private static final class Holder {
        static final StatePublisher PROCESS = new StatePublisher(true);
    }

    /** One store and key this process publishes to; closed by the group that registered it. */
    public final class Target implements AutoCloseable {
        private final Store store;
        private final String key;
        private final String identity;
        private long publishedSignature = -1;
        private long publishedAt;

        Target(Store store, String key, String identity) {
            this.store = store;
            this.key = key;
            this.identity = identity;
        }

        @Override
        public void close() {
            targets.remove(this);
        }
    }

    private final CopyOnWriteArrayList<Target> targets = new CopyOnWriteArrayList<>();
    private final boolean background;
    private final Object starting = new Object();
    private Thread thread; // guarded by starting
    private long previousSignature = -1; // guarded by this (one pass at a time)

    /** @param background whether {@link #publishTo} starts the thread (tests drive {@link #pass} themselves) */
    StatePublisher(boolean background) {
        this.background = background;
    }

    /** The process's publisher. */
    public static StatePublisher process() {
        return Holder.PROCESS;
    }

    /** Whether this process has a recorder to publish (false with {@code JCOMM_RECORDER=off}). */
    public static boolean enabled() {
        return FlightRecorder.process() != null;
    }

    /**
     * Publishes this process's state under {@code key} of {@code store} from now on (see the class
     * documentation for when), until the returned target is closed; null when this process has no
     * recorder. {@code identity} says which registrations are the same store and key (one write for all).
     */
    public Target publishTo(Store store, String key, String identity) {
        if (!enabled()) {
            return null;
        }
        Target t = new Target(store, key, identity);
        targets.add(t);
        synchronized (starting) {
            if (!background) {
                return t;
            }
            if (thread == null) {
                thread = new Thread(this::run, "jcomm-state-publisher");
                thread.setDaemon(true);
                thread.start();
            } else {
                LockSupport.unpark(thread);
            }
        }
        return t;
    }

    private void run() {
        while (true) {
            try {
                if (targets.isEmpty()) {
                    LockSupport.park(this);
                    continue;
                }
                pass(System.nanoTime());
            } catch (RuntimeException e) {
                LOG.debug("state publisher: {}", e.toString());
            }
            LockSupport.parkNanos(this, TimeUnit.MILLISECONDS.toNanos(PERIOD_MILLIS));
        }
    }

    /** One look at the recorder: writes to the targets whose summary is out of date. */
    synchronized void pass(long now) {
        FlightRecorder rec = FlightRecorder.process();
        if (rec == null) {
            return;
        }
        Snapshot snap = rec.snapshot();
        long sig = signature(snap.groups());
        boolean stable = sig == previousSignature;
        previousSignature = sig;
        String text = null;
        List<String> written = new ArrayList<>();
        for (Target t : targets) {
            if (t.publishedSignature == sig
                    || !(stable || now - t.publishedAt >= TimeUnit.SECONDS.toNanos(REFRESH_SECONDS))) {
                continue;
            }
            if (!written.contains(t.identity)) {
                if (text == null) {
                    text = RecorderSummary.encode(snap, HostIdentity.displayName());
                }
                try {
                    t.store.set(t.key, text.getBytes(StandardCharsets.UTF_8));
                } catch (RuntimeException e) {
                    LOG.debug("state publisher: dropping {} ({})", t.key, e.toString());
                    targets.remove(t);
                    continue;
                }
                written.add(t.identity);
            }
            t.publishedSignature = sig;
            t.publishedAt = now;
        }
    }

    /** Changes whenever an operation of any group starts or finishes. */
    static long signature(List<GroupState> groups) {
        long sig = 17;
        for (GroupState g : groups) {
            sig = sig * 31 + g.started() * 7 + g.finished();
        }
        return sig;
    }
}
