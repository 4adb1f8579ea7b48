package io.jcomm.cpu.internal.tcp;

import io.jcomm.runtime.recorder.RecorderReader;
import io.jcomm.runtime.recorder.RecorderSummary;
import io.jcomm.runtime.recorder.StatePublisher;
import io.jcomm.api.store.PrefixStore;
import io.jcomm.api.store.Store;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * What a group's members are doing, for the failure messages of the tcp backend: a member on this host
 * from its flight recorder file (by pid), a member on another host from the summary its process
 * publishes to the job's store ({@link StatePublisher}), which this process publishes too as soon as one
 * member is elsewhere. Filled by {@link MeshBootstrap}; read by the thread that writes a failure message.
 */
final class PeerStates {

    /** Longest the store lookups of one failure message wait, in all, for summaries not there yet. */
    static final long REMOTE_WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(500);
    /** Lookups this long after the first one of a message belong to another message. */
    private static final long MESSAGE_WINDOW_NANOS = TimeUnit.SECONDS.toNanos(5);

    private final String group;
    private final int rank;
    /** Pid of each member on this host (0 elsewhere and for this rank), for what its recorder says. */
    final long[] pid;
    /** Process identity of each member (the engine's; see {@link Progress#processId}): its summary's key. */
    private final long[] process;
    /** Whether each member is on another host. */
    final boolean[] remote;
    /** The address each member listens on (named when it published nothing). */
    final String[] address;
    private volatile Store store;
    private volatile StatePublisher.Target published;
    private long waitEnd;
    private boolean waitStarted;

    PeerStates(String group, int rank, long[] process) {
        int size = process.length;
        this.group = group;
        this.rank = rank;
        this.process = process;
        this.pid = new long[size];
        this.remote = new boolean[size];
        this.address = new String[size];
    }

    /** The store key of process {@code processId}'s recorder summary. */
    static String key(long processId) {
        return "jcomm-state/" + Long.toUnsignedString(processId, 16);
    }

    /**
     * A member is on another host: publish this process's summary ({@code self} is its identity) to the
     * store the group was made in ({@code groupStore} without the group's own prefix, so that the groups
     * of a job share one key per process), and read the members' from there.
     */
    void publish(Store groupStore, long self) {
        Store s = groupStore instanceof PrefixStore p && p.prefix().equals(group) ? p.base() : groupStore;
        StringBuilder identity = new StringBuilder();
        Store at = s;
        while (at instanceof PrefixStore p) {
            identity.append(p.prefix()).append('/');
            at = p.base();
        }
        identity.append('@').append(System.identityHashCode(at));
        store = s;
        published = StatePublisher.process().publishTo(s, key(self), identity.toString());
    }

    /**
     * Appends what member {@code peer} is doing: {@code " (rank R: in GROUP OP #N for T s)"} from its
     * recorder when it is on this host, {@code " (rank R on host H: ...)"} from its summary in the store
     * when it is on another (or that it published none). The lookups of one message wait, together, at
     * most {@link #REMOTE_WAIT_NANOS} for summaries not there yet (a rank publishes 1 to 2 s after it
     * stopped advancing).
     */
    void describe(StringBuilder sb, int peer) {
        if (peer < 0 || peer >= pid.length || peer == rank) {
            return;
        }
        if (pid[peer] > 0) {
            RecorderReader.describeProcess(pid[peer])
                    .ifPresent(d -> sb.append(" (rank ").append(peer).append(": ").append(d).append(')'));
            return;
        }
        Store s = store;
        if (!remote[peer] || s == null) {
            return;
        }
        long now = System.nanoTime();
        if (!waitStarted || now - waitEnd > MESSAGE_WINDOW_NANOS) {
            waitStarted = true; // the first lookup of a new message: its budget starts now
            waitEnd = now + REMOTE_WAIT_NANOS;
        }
        Optional<RecorderSummary.Decoded> d = RecorderSummary.fetch(s, key(process[peer]),
                Duration.ofNanos(Math.max(0, waitEnd - now)));
        if (d.isPresent()) {
            sb.append(" (rank ").append(peer).append(" on host ").append(d.get().host()).append(": ")
                    .append(d.get().describe()).append(')');
        } else {
            sb.append(" (rank ").append(peer).append(" on host ").append(address[peer])
                    .append(": it published no state to the store)");
        }
    }

    /** Stops publishing for this group. */
    void close() {
        StatePublisher.Target t = published;
        if (t != null) {
            t.close();
        }
    }
}
