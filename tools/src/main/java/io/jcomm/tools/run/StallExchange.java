package io.jcomm.tools.run;

import io.jcomm.runtime.recorder.RecorderReader.Snapshot;
import io.jcomm.runtime.recorder.RecorderSummary;
import io.jcomm.cpu.store.TcpStore;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * How the {@code commrun}s of a multi-node job share what their ranks' flight recorders say, so that
 * node 0 prints one merged stall verdict: every node's launcher writes its ranks' recorder summaries
 * ({@link RecorderSummary}, one block per rank) under {@code commrun/stall/node/<node rank>} of the
 * job's store whenever they changed (at most once per read of the recorders, about once a second), and
 * node 0's launcher reads the other nodes' keys at each of its reads. The launcher connects to the store
 * as a plain client (no member declaration, the job's token when there is one), in the background:
 * a store that cannot be reached leaves every node with its own report. Not thread safe: the
 * launcher's sampler thread uses it.
 */
final class StallExchange implements AutoCloseable {

    static final String KEY = "commrun/stall/node/";
    private static final String RANK = "@rank ";
    private static final long RETRY_NANOS = TimeUnit.SECONDS.toNanos(5);

    private final RunPlan plan;
    private TcpStore store;
    private long nextConnect;
    private long published = Long.MIN_VALUE;
    private boolean closed;

    StallExchange(RunPlan plan) {
        this.plan = plan;
    }

    /** Whether this node prints the merged verdict (node 0). */
    boolean merges() {
        return plan.nodeRank() == 0;
    }

    RunPlan plan() {
        return plan;
    }

    private TcpStore store() {
        if (store != null || closed || System.nanoTime() - nextConnect < 0) {
            return store;
        }
        try {
            store = TcpStore.connect(plan.storeClient().build());
        } catch (RuntimeException e) {
            nextConnect = System.nanoTime() + RETRY_NANOS;
        }
        return store;
    }

    /** Writes this node's ranks' state when its signature {@code sig} changed since the last write. */
    void publish(Map<Integer, Snapshot> local, long sig) {
        if (sig == published) {
            return;
        }
        TcpStore s = store();
        if (s == null) {
            return;
        }
        long now = System.nanoTime();
        long epoch = System.currentTimeMillis();
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<Integer, Snapshot> e : local.entrySet()) {
            Snapshot snap = e.getValue();
            sb.append(RANK).append(e.getKey()).append('\n')
                    .append(RecorderSummary.encode(snap.groups(), snap.pid(), "node " + plan.nodeRank(), now, epoch));
        }
        try {
            s.set(KEY + plan.nodeRank(), sb.toString().getBytes(StandardCharsets.UTF_8));
            published = sig;
        } catch (RuntimeException e) {
            drop();
        }
    }

    /**
     * The other nodes' ranks as they last wrote them (node rank -> global rank -> state on this host's
     * clock); a node that wrote nothing is absent.
     */
    Map<Integer, Map<Integer, Snapshot>> others() {
        Map<Integer, Map<Integer, Snapshot>> out = new TreeMap<>();
        TcpStore s = store();
        if (s == null) {
            return out;
        }
        try {
            for (int n = 0; n < plan.nnodes(); n++) {
                if (n == plan.nodeRank() || !s.check(List.of(KEY + n))) {
                    continue;
                }
                out.put(n, decode(new String(s.get(KEY + n, Duration.ofSeconds(1)), StandardCharsets.UTF_8)));
            }
        } catch (RuntimeException e) {
            drop();
        }
        return out;
    }

    /** A node's text: blocks of {@code "@rank R"} and a recorder summary. */
    static Map<Integer, Snapshot> decode(String text) {
        Map<Integer, Snapshot> out = new TreeMap<>();
        for (String block : ("\n" + text).split("\n" + RANK)) {
            int nl = block.indexOf('\n');
            if (block.isBlank() || nl < 0) {
                continue;
            }
            try {
                int rank = Integer.parseInt(block.substring(0, nl).trim());
                RecorderSummary.decode(block.substring(nl + 1)).ifPresent(d -> out.put(rank, d.snapshot()));
            } catch (NumberFormatException e) {
                // not a block
            }
        }
        return out;
    }

    private void drop() {
        if (store != null) {
            store.close();
            store = null;
        }
        nextConnect = System.nanoTime() + RETRY_NANOS;
    }

    @Override
    public void close() {
        closed = true;
        if (store != null) {
            store.close();
            store = null;
        }
    }
}
