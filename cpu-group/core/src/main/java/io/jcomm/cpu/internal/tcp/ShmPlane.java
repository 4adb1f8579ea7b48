package io.jcomm.cpu.internal.tcp;

import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.Deadline;
import java.nio.charset.StandardCharsets;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The shared-memory plane of an {@link Engine}: the per-link rings ({@link ShmRings}, offered in-band
 * on the first large payload to a peer on this host) and the group's staging regions
 * ({@link ShmStaging}, set up by the first large collective when every rank shares the host), with
 * the waits that read them while the sockets keep being driven. Files follow the one shared-memory
 * lifecycle ({@code io.jcomm.runtime.shm.ShmFiles}). Staging set-up needs one all-gather over
 * the group, which the backend supplies as an {@link Exchange}: the transport never calls up into
 * the backend.
 */
final class ShmPlane {

    private static final Logger LOG = LoggerFactory.getLogger(ShmPlane.class);
    private static final int STAGING_NEVER = 0;
    private static final int STAGING_LATER = 1;
    private static final int STAGING_READY = 2;
    /** Longest path a peer may give for its staging region. */
    private static final int MAX_PATH_BYTES = 1024;

    /** An all-gather of small byte arrays over the group, bounded by a deadline (supplied by the backend). */
    @FunctionalInterface
    interface Exchange {
        /** Every rank's {@code mine} (at most {@code maxBytes} each), in rank order. */
        byte[][] allGather(byte[] mine, int maxBytes, Deadline deadline);
    }

    private final Engine engine;
    private ShmRings shmRings;
    private ShmStaging staging;
    /** {@link #STAGING_NEVER}, {@link #STAGING_LATER} (set up by the first large collective) or {@link #STAGING_READY}. */
    private volatile int stagingState = STAGING_NEVER;
    private final Object stagingSetup = new Object();
    private boolean fastCandidate;
    private volatile ShmStaging fast;

    ShmPlane(Engine engine) {
        this.engine = engine;
    }

    /** Rings may be offered to peers on this host (set-up, once the group's incarnation is known). */
    void enableRings() {
        shmRings = new ShmRings(engine.cfg, engine.group, engine.rank, engine.generation);
    }

    boolean ringsEnabled() {
        return shmRings != null;
    }

    /** Every rank shares this host and the staging options: regions are set up by the first large collective. */
    void stagingCandidate(boolean candidate) {
        stagingState = candidate ? STAGING_LATER : STAGING_NEVER;
    }

    boolean stagingLater() {
        return stagingState == STAGING_LATER;
    }

    /**
     * Creates this rank's ring to {@code l}'s peer and offers it in-band; payloads keep going by
     * socket until the peer answered (so nothing waits for the answer).
     */
    void offerRing(Link l) {
        l.shm.offerTried = true;
        ShmRings.Ring r = shmRings.createOutbound(l.peer);
        if (r == null) {
            return;
        }
        l.shm.offered = r;
        l.writeControl(Frame.RING, 0, engine.generation, r.file.toString().getBytes(StandardCharsets.UTF_8));
    }

    /** A peer offered its ring to this rank: map it if possible and answer. */
    void onRingOffer(Link l, String path) {
        ShmRings.Ring r = l.shm != null && shmRings != null ? shmRings.mapInbound(l.peer, path) : null;
        if (r != null) {
            l.shm.attachIn(r); // before the answer: flagged headers can only follow it
        }
        Frame ack = Frame.of(Frame.RING_ACK, 0, engine.generation);
        ack.count = r != null ? 1 : 0;
        l.write(ack, null, true);
    }

    /** The peer answered this rank's ring offer. */
    void onRingAnswer(Link l, boolean mapped) {
        ShmRings.Ring r = l.shm.offered;
        l.shm.offered = null;
        shmRings.settled(r, mapped);
        if (mapped) {
            l.shm.attachOut(r);
            LOG.debug("group {} rank {}: shared-memory ring to rank {} in use", engine.group, engine.rank, l.peer);
        }
    }

    int poll() {
        if (shmRings == null) {
            return 0;
        }
        int work = 0;
        for (Link l : engine.links) {
            if (l != null) {
                if (l.shm != null) {
                    work += l.shm.poll();
                }
                if (l.mailbox != null) {
                    work += l.mailbox.poll();
                }
            }
        }
        return work;
    }

    boolean busy() {
        if (shmRings == null) {
            return false;
        }
        for (Link l : engine.links) {
            if (l != null && ((l.shm != null && l.shm.busy()) || (l.mailbox != null && l.mailbox.busy()))) {
                return true;
            }
        }
        return false;
    }

    /** The shared staging regions when they are set up (every rank of the group on one host), else null. */
    ShmStaging staging() {
        return stagingState == STAGING_READY ? staging : null;
    }

    /** Every rank shares this host and the fast-path size: {@link #setUpFast} makes the regions. */
    void fastCandidate(boolean candidate) {
        fastCandidate = candidate;
    }

    /** The fast path's regions (small operations of a group whose ranks all share this host), else null. */
    ShmStaging fast() {
        return fast;
    }

    /**
     * Makes the fast path's regions right after the mesh is up: a collective step of group creation
     * (every rank decides alike, from the published addresses). Without them every operation uses the
     * links, as before.
     */
    void setUpFast(Exchange exchange, Deadline d) {
        if (fastCandidate && fast == null) {
            ShmStaging f = setUp(ShmStaging.createFast(engine.cfg, engine.group, engine.rank, engine.size,
                    engine.generation), exchange, d, "fast-path");
            if (f != null && shmRings != null) {
                for (Link l : engine.links) {
                    if (l != null) {
                        l.mailbox = new ShmMailbox(engine, l, f, l.peer);
                    }
                }
            } else if (f != null) {
                f.closeFile(); // no mailbox will allocate its ring: the descriptor is not needed
            }
            fast = f;
        }
    }

    /**
     * The staging regions for a collective that would use them, setting them up on first use: a
     * collective step of its own (every rank of the group calls this at the same point, since the
     * size decision is the same on every rank). Call outside {@link Engine#enter}.
     */
    ShmStaging stagingFor(Exchange exchange, Deadline d) {
        if (stagingState != STAGING_LATER) {
            return staging();
        }
        synchronized (stagingSetup) {
            if (stagingState != STAGING_LATER) {
                return staging();
            }
            stagingState = STAGING_NEVER; // whatever happens below, this is tried once
            ShmStaging s = setUp(ShmStaging.create(engine.cfg, engine.group, engine.rank, engine.size, engine.generation),
                    exchange, d, "staging");
            if (s != null) {
                staging = s;
                stagingState = STAGING_READY;
            }
            return staging();
        }
    }

    /**
     * Shares the regions of a collective step: each rank has created and allocated its region ({@code s},
     * null if it could not; a fast-path region all but its mailbox rings, which their first records
     * allocate), the ranks all-gather the paths, map each other's regions, and
     * all-gather whether that worked; the regions are used only if it worked everywhere, and the files
     * lose their names either way. Returns {@code s} when usable, else null (having closed it).
     */
    private ShmStaging setUp(ShmStaging s, Exchange exchange, Deadline d, String what) {
        boolean used = false;
        try {
            byte[][] paths = exchange.allGather((s == null ? "-" : s.path()).getBytes(StandardCharsets.UTF_8),
                    MAX_PATH_BYTES, d);
            boolean ok = s != null;
            for (int r = 0; r < engine.size && ok; r++) {
                if (r != engine.rank) {
                    String p = new String(paths[r], StandardCharsets.UTF_8);
                    ok = !p.equals("-") && s.map(r, p);
                }
            }
            byte[][] oks = exchange.allGather(new byte[] {(byte) (ok ? 1 : 0)}, 1, d);
            boolean everyone = true;
            for (byte[] o : oks) {
                everyone &= o.length == 1 && o[0] == 1;
            }
            if (s != null) {
                s.unlinkFile(); // every peer mapped it (or decided not to)
            }
            if (everyone) {
                used = true;
                LOG.debug("group {} rank {}: shared {} regions ready", engine.group, engine.rank, what);
                return s;
            }
            LOG.debug("group {} rank {}: shared {} regions not usable by every rank; operations use the links",
                    engine.group, engine.rank, what);
            return null;
        } finally {
            if (!used && s != null) {
                s.close();
            }
        }
    }

    /**
     * Waits until every peer published piece {@code piece} in {@code which} ({@link ShmStaging#INPUT_SEQ}
     * or {@link ShmStaging#RESULT_SEQ}) of its region of {@code st}; for inputs, checks each peer's descriptor.
     * Keeps driving the sockets meanwhile (peer failures, aborts, and mismatches: a peer that runs a
     * different collective sends socket messages this rank does not expect).
     */
    void awaitStaging(ShmStaging st, Op op, int which, long piece, long code, long count, long offset) {
        awaitStaging(st, op, which, piece, -1, which == ShmStaging.INPUT_SEQ, code, count, offset);
    }

    /** Waits until rank {@code from} published input piece {@code piece} of {@code st} and checks its descriptor. */
    void awaitStagingFrom(ShmStaging st, Op op, int from, long piece, long code, long count, long offset) {
        awaitStaging(st, op, ShmStaging.INPUT_SEQ, piece, from, true, code, count, offset);
    }

    /**
     * Before this rank writes piece {@code piece} into its slot of {@code st}: waits until every peer
     * published piece {@code piece - 1}, i.e. finished reading piece {@code piece - 2}, which used the same slot.
     */
    void gateStaging(ShmStaging st, Op op, long piece) {
        awaitStaging(st, op, ShmStaging.INPUT_SEQ, piece - 1, -1, false, 0, 0, 0);
    }

    /**
     * The wait of every shared-memory collective step. It reads the peers' piece numbers (and the failure
     * latch) on every pass, and drives the sockets (peer failures, aborts, messages of a peer that runs
     * another operation) every {@link Engine#SHM_SOCKET_POLL_NANOS}: while it spins or yields, and on every pass once it parks.
     * Parks grow over a long wait ({@link Engine#parkNanos}), so that a rank waiting for a slow peer costs
     * little CPU.
     */
    private void awaitStaging(ShmStaging st, Op op, int which, long piece, int only, boolean checkDescriptor, long code,
                              long count, long offset) {
        long spinEnd = 0;
        long lastPoll = 0;
        long waitStart = 0;
        int next = 0;
        while (true) {
            engine.check();
            while (next < engine.size && (next == engine.rank || (only >= 0 && next != only) || st.flag(next, which) >= piece)) {
                if (checkDescriptor && next != engine.rank && (only < 0 || next == only)) {
                    String diff = st.descriptorDifference(next, piece, op.seq, count, code, offset);
                    if (diff != null) {
                        throw engine.fail(new CollectiveMismatchException(engine.ctx(), "rank " + next + " runs another collective than "
                                + op.name + " #" + op.seq + " (count " + count + "):" + diff));
                    }
                }
                next++;
            }
            if (next == engine.size) {
                engine.adaptSpinShm(waitStart);
                return;
            }
            long now = System.nanoTime();
            if (spinEnd == 0) {
                spinEnd = now + engine.spinNanos();
                lastPoll = now;
                waitStart = now;
            }
            boolean spinning = now - spinEnd < 0;
            if (now - lastPoll >= Engine.SHM_SOCKET_POLL_NANOS) { // every pass once it parks (a park is longer)
                lastPoll = now;
                int work = engine.loop.runNow();
                if (st.flag(next, which) < piece) { // a peer publishes before it says goodbye: look again first
                    engine.checkPeerOpen(next);
                }
                for (Link l : engine.links) {
                    if (l != null && l.earliestEarlyCollective() <= op.seq) {
                        throw engine.fail(new CollectiveMismatchException(engine.ctx(), "rank " + l.peer + " sent a message of collective #"
                                + l.earliestEarlyCollective() + " while this rank runs " + op.name + " #" + op.seq
                                + " through shared memory (different operations or sizes on different ranks)"));
                    }
                }
                if (work > 0) {
                    continue;
                }
            }
            long left = op.deadline.nanoTime() - now;
            if (left <= 0) {
                throw engine.timeout(op, missing(st, op, which, piece, only));
            }
            if (spinning) {
                Thread.onSpinWait();
            } else if (now - spinEnd < Engine.SHM_YIELD_NANOS) {
                Thread.yield();
            } else {
                LockSupport.parkNanos(Math.min(left, Engine.parkNanos(now - spinEnd)));
            }
        }
    }

    /**
     * Which ranks a shared-memory step still waits for, each with what it is doing ({@link Engine#whatPeerDoes}):
     * {@code waiting for allReduce #23 in shared memory from rank 2 (rank 2: in no operation; ...)}.
     */
    private String missing(ShmStaging st, Op op, int which, long piece, int only) {
        StringBuilder sb = new StringBuilder("waiting for ").append(op.name).append(" #").append(op.seq).append(" in shared memory");
        String sep = " from rank ";
        for (int r = 0; r < engine.size; r++) {
            if (r != engine.rank && (only < 0 || r == only) && st.flag(r, which) < piece) {
                sb.append(sep).append(r);
                engine.whatPeerDoes(sb, r);
                sep = "; from rank ";
            }
        }
        return sb.toString();
    }

    /** Whether payloads to {@code peer} go through shared memory (for tests and the benchmark). */
    boolean sharedMemoryTo(int peer) {
        Link l = engine.links[peer];
        return l != null && l.shm != null && l.shm.canSend();
    }

    /** Unmaps everything and removes names not yet taken. Only after no thread uses them any more. */
    void close() {
        if (shmRings != null) {
            shmRings.close();
        }
        if (staging != null) {
            staging.close();
        }
        if (fast != null) {
            fast.close();
        }
    }
}
