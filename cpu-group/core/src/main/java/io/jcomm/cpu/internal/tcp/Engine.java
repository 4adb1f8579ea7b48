package io.jcomm.cpu.internal.tcp;

import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.internal.FailureLatch;
import io.jcomm.api.store.Store;
import io.jcomm.cpu.spi.CpuBackendContext;
import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelInitializer;
import io.netty.channel.ChannelOption;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.ServerChannel;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.epoll.EpollServerSocketChannel;
import io.netty.channel.epoll.EpollSocketChannel;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.nio.NioServerSocketChannel;
import io.netty.channel.socket.nio.NioSocketChannel;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.SecureRandom;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The tcp backend's transport: a full mesh of Netty connections set up through the store, driven
 * by the calling thread ({@link DrivenEventLoop}), plus optional shared-memory rings to peers on the
 * same host. Algorithms post sends and receives on an {@link Op} and {@link #await} it.
 *
 * <h2>Waiting</h2>
 * A waiting call polls (non-blocking epoll/select, shared-memory rings) for up to
 * {@code tcp.spinMicros}, then blocks in epoll/select until I/O arrives or the deadline passes; while a
 * shared-memory transfer is in progress it yields and parks briefly instead. An idle group uses no CPU.
 *
 * <h2>Progress between calls</h2>
 * Once created, the engine is registered with the process's {@link Progress} thread, which drives it
 * whenever no caller does: bytes a finished call left for the socket go out, credit reaches waiting
 * peers, early messages are read (within their budget), and a lost connection is noticed, all without
 * the caller's help. Sends are bounded by the per-peer credit of {@link Link}.
 *
 * <h2>Failures</h2>
 * The first failure (peer connection lost, abort from a peer, mismatch, timeout) is kept; every later
 * call fails with it. A connection lost without a goodbye also fails every other group of this process
 * that has a member in the same process ({@link Progress#peerProcessDied}). {@link #close()} tells the
 * peers: a clean close sends BYE, a close after a failure sends ABORT with the reason, so that they fail
 * at once instead of at their deadline.
 */
final class Engine {

    private static final Logger LOG = LoggerFactory.getLogger(Engine.class);
    private static final long MAX_BLOCK_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    private static final long PARK_NANOS = TimeUnit.MICROSECONDS.toNanos(50);
    /** While a shared-memory transfer is in progress, yield (not park) this long after the last progress. */
    private static final long SHM_YIELD_NANOS = TimeUnit.MILLISECONDS.toNanos(2);
    /** How long a call spins for the driver lock (held briefly by the progress thread) before it blocks. */
    private static final long LOCK_SPIN_NANOS = TimeUnit.MICROSECONDS.toNanos(5);
    /**
     * An idle pass of the progress thread leaves alone a group whose last call ended less than this
     * ago: its caller drives it (and a caller that only sends is bounded by its credit, whose wait
     * drives the loop), so the pass would only compete with it for the lock and the core.
     */
    private static final long RECENT_CALL_NANOS = TimeUnit.MILLISECONDS.toNanos(2);
    private static final java.lang.invoke.VarHandle LAST_EXIT;
    private static final java.lang.invoke.VarHandle KICKED;
    /** The operation name of failures noticed while no call was running. */
    static final String BETWEEN_CALLS = "between calls";
    /** A peer whose address refuses connections this long has gone (it listens from before it publishes). */
    private static final long REFUSED_GRACE_NANOS = TimeUnit.SECONDS.toNanos(1);
    /** While set-up waits for peers, this often it asks the store whether a member of the job left. */
    private static final long LIVENESS_PROBE_NANOS = TimeUnit.MILLISECONDS.toNanos(250);
    private static final java.time.Duration LIVENESS_PROBE_WAIT = java.time.Duration.ofMillis(2);
    static {
        try {
            java.lang.invoke.MethodHandles.Lookup l = java.lang.invoke.MethodHandles.lookup();
            LAST_EXIT = l.findVarHandle(Engine.class, "lastExit", long.class);
            KICKED = l.findVarHandle(Engine.class, "kicked", boolean.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final String group;
    final int rank;
    final int size;
    final TcpConfig cfg;
    final Link[] links;
    final DrivenEventLoop loop;
    private final boolean epoll;
    private final ReentrantLock driverLock = new ReentrantLock();
    private volatile Thread driver;
    private volatile boolean closed;
    /** The first failure (io.jcomm.api.internal.FailureLatch, the mechanism every module shares). */
    private final FailureLatch failure = new FailureLatch();
    private final Progress progress = Progress.shared();
    /** Process identity of each member (from its published address), 0 for this rank. */
    private final long[] peerProcess;
    private boolean registered;
    /** When the last call left (nanoTime; written opaquely by callers, read by the progress thread). */
    @SuppressWarnings("unused") // through LAST_EXIT
    private long lastExit;
    /** A call left bytes waiting for the socket: the progress thread drives this group whatever {@link #lastExit} says. */
    @SuppressWarnings("unused") // through KICKED
    private boolean kicked;
    private boolean shutDown;
    private boolean closedPeers;
    private long spinNanos;
    private String opName = "create";
    private long collectiveSeq;
    private long earlyBytes;
    private final ArrayDeque<Link> dirty = new ArrayDeque<>();
    private final List<Link> parkedLinks = new ArrayList<>();
    private final List<Link> allLinks = new ArrayList<>();
    private Channel server;
    private long nonce;
    private long generation;
    private ShmRings shmRings;
    private ShmStaging staging;
    /** {@link #STAGING_NEVER}, {@link #STAGING_LATER} (set up by the first large collective) or {@link #STAGING_READY}. */
    private volatile int stagingState = STAGING_NEVER;
    private final Object stagingSetup = new Object();
    private long stagingPiece;

    /** Source of connection nonces (thread safe; seeding one per group cost more than the rest of its set-up). */
    private static final SecureRandom NONCES = new SecureRandom();
    private static final int STAGING_NEVER = 0;
    private static final int STAGING_LATER = 1;
    private static final int STAGING_READY = 2;
    /** Longest path a peer may give for its staging region. */
    private static final int MAX_PATH_BYTES = 1024;

    private Engine(CpuBackendContext ctx, TcpConfig cfg) {
        this.group = ctx.groupName();
        this.rank = ctx.rank();
        this.size = ctx.size();
        this.cfg = cfg;
        this.links = new Link[size];
        this.peerProcess = new long[size];
        this.spinNanos = cfg.spinNanos;
        boolean useEpoll = cfg.transport.equals("epoll") || (cfg.transport.equals("auto") && Epoll.isAvailable());
        if (cfg.transport.equals("epoll") && !Epoll.isAvailable()) {
            throw new IllegalArgumentException("tcp.transport=epoll but native epoll is unavailable: "
                    + Epoll.unavailabilityCause());
        }
        this.epoll = useEpoll;
        IoHandlerFactory f = useEpoll ? EpollIoHandler.newFactory() : NioIoHandler.newFactory();
        this.loop = new DrivenEventLoop(f);
    }

    /** Creates the mesh: collective over the group, bounded by the context's timeout. */
    static Engine connect(CpuBackendContext ctx, TcpConfig cfg) {
        Engine e = new Engine(ctx, cfg);
        e.enter("create");
        try {
            e.bootstrap(ctx, Deadline.after(ctx.timeout()));
        } catch (RuntimeException ex) {
            e.fail(io.jcomm.cpu.internal.Errors.wrap(ex, e.ctx()));
            e.exit();
            e.close();
            throw ex;
        }
        e.registered = true;
        e.progress.register(e);
        e.exit();
        return e;
    }

    String transportName() {
        return epoll ? "epoll" : "nio";
    }

    OpContext ctx() {
        return OpContext.of(group, rank, opName);
    }

    // ------------------------------------------------------------------ driving

    /** Takes the loop for the calling thread; every operation starts with it and ends with {@link #exit}. */
    void enter(String op) {
        lockDriver();
        opName = op;
        driver = Thread.currentThread();
        loop.own(driver);
        if (closed) {
            exit();
            throw closedException();
        }
        CommException f = failure.first();
        if (f != null) {
            exit();
            throw f.operation().equals(BETWEEN_CALLS)
                    ? io.jcomm.cpu.internal.Errors.sameType(f, ctx(), f.detail() + " (noticed between calls)", f) : f;
        }
    }

    /** The progress thread holds the lock only for a short pass: spin for it before blocking. */
    private void lockDriver() {
        if (driverLock.tryLock()) {
            return;
        }
        long end = System.nanoTime() + LOCK_SPIN_NANOS;
        while (System.nanoTime() - end < 0) {
            Thread.onSpinWait();
            if (driverLock.tryLock()) {
                return;
            }
        }
        driverLock.lock();
    }

    void exit() {
        try {
            if (closed && !shutDown) {
                shutdownFromDriver();
            } else if (registered) {
                LAST_EXIT.setOpaque(this, System.nanoTime());
                if (pendingOutput()) {
                    KICKED.setOpaque(this, true);
                    progress.kick(); // the socket did not take everything: the progress thread finishes it
                }
            }
        } finally {
            driver = null;
            driverLock.unlock();
        }
    }

    /** Whether bytes written by this rank still wait for a socket. Driving thread. */
    private boolean pendingOutput() {
        for (Link l : links) {
            if (l != null && l.hasPendingOutput()) {
                return true;
            }
        }
        return false;
    }

    /**
     * One pass of the progress thread: if no caller drives the engine, process what its sockets and
     * rings have ready without blocking. Returns whether bytes still wait for a socket (pass again soon).
     */
    boolean progressInBackground() {
        if (closed || shutDown || failure.isTripped()) {
            return false;
        }
        if (!(boolean) KICKED.getOpaque(this) && System.nanoTime() - (long) LAST_EXIT.getOpaque(this) < RECENT_CALL_NANOS) {
            return false;
        }
        if (!driverLock.tryLock()) {
            return false;
        }
        try {
            if (closed || shutDown || failure.isTripped()) {
                return false;
            }
            opName = BETWEEN_CALLS;
            Thread me = Thread.currentThread();
            driver = me;
            loop.own(me);
            drainDirty();
            loop.runNow();
            drainDirty();
            pollShm();
            boolean pending = !failure.isTripped() && pendingOutput();
            KICKED.setOpaque(this, pending);
            return pending;
        } catch (RuntimeException e) {
            fail(io.jcomm.cpu.internal.Errors.wrap(e, ctx()));
            return false;
        } finally {
            driver = null;
            driverLock.unlock();
        }
    }

    /**
     * Another group of this process lost its connection to process {@code pid} without a goodbye: fail
     * this group too if a member lives there. Any thread.
     */
    void peerProcessDied(long pid, String how) {
        if (closed || shutDown) {
            return;
        }
        for (int r = 0; r < size; r++) {
            if (r != rank && peerProcess[r] == pid) {
                failFromOutside(new PeerFailureException(OpContext.of(group, rank, BETWEEN_CALLS), r,
                        "its process is gone (" + how + ")"));
                return;
            }
        }
    }

    /** Records a failure found by another thread and wakes the driving thread, if any. */
    private void failFromOutside(CommException e) {
        if (failure.tripFirst(e)) {
            loop.wakeup();
            Thread t = driver;
            if (t != null) {
                LockSupport.unpark(t);
            }
        }
    }

    private CommClosedException closedException() {
        return new CommClosedException(ctx(), "group closed");
    }

    boolean hasFailed() {
        return failure.isTripped() || closed;
    }

    /** Starts an operation; collectives get the next sequence number. */
    Op begin(int kind, int code, Deadline deadline) {
        long seq = kind == Frame.DATA ? ++collectiveSeq : 0;
        return new Op(opName, kind, code, seq, deadline);
    }

    /**
     * Drives I/O until {@code op} completes, fails, or its deadline passes. The polling phase adapts
     * between 0 and {@code tcp.spinMicros}: it doubles after a wait that it covered and halves after a
     * longer wait (a slow peer, a busy machine), so that waiting for a peer that is not coming soon
     * costs no CPU.
     */
    void await(Op op) {
        long spinEnd = 0;
        long idleStart = 0;
        while (true) {
            check();
            drainDirty();
            if (op.isComplete()) {
                adaptSpin(idleStart);
                return;
            }
            int work = loop.runNow();
            work += pollShm();
            if (op.isComplete()) {
                adaptSpin(idleStart);
                return; // a failure noticed meanwhile surfaces at the next call
            }
            if (work > 0) {
                spinEnd = 0;
                continue;
            }
            long now = System.nanoTime();
            long left = op.deadline.nanoTime() - now;
            if (left <= 0) {
                throw timeout(op);
            }
            if (spinEnd == 0) {
                spinEnd = now + spinNanos;
                if (idleStart == 0) {
                    idleStart = now;
                }
            }
            if (now - spinEnd < 0) {
                Thread.onSpinWait();
                continue;
            }
            if (shmBusy()) {
                // the peer is copying right now: give up the core if someone else needs it, but do not
                // sleep (a park costs tens of microseconds of timer slack per ring hand-off)
                if (now - spinEnd < SHM_YIELD_NANOS) {
                    Thread.yield();
                } else {
                    LockSupport.parkNanos(Math.min(left, PARK_NANOS));
                }
                continue;
            }
            loop.runBlocking(Math.min(left, MAX_BLOCK_NANOS));
            spinEnd = 0;
        }
    }

    private void adaptSpin(long idleStart) {
        if (idleStart == 0) {
            return;
        }
        long waited = System.nanoTime() - idleStart;
        // grow while polling pays off, shrink fast when the peer is slow (or the machine busy)
        spinNanos = waited <= spinNanos ? Math.min(cfg.spinNanos, spinNanos * 2 + 1000) : spinNanos / 2;
    }

    /** Drives I/O until {@code done} holds (set-up phases). */
    private void driveUntil(BooleanSupplier done, Deadline d, java.util.function.Supplier<String> what) {
        driveUntil(done, d, what, null);
    }

    /**
     * Drives I/O until {@code done} holds; while it does not, runs {@code probe} (if any) every
     * {@link #LIVENESS_PROBE_NANOS}.
     */
    private void driveUntil(BooleanSupplier done, Deadline d, java.util.function.Supplier<String> what, Runnable probe) {
        long nextProbe = System.nanoTime() + LIVENESS_PROBE_NANOS;
        while (!done.getAsBoolean()) {
            if (probe != null && System.nanoTime() - nextProbe >= 0) {
                probe.run();
                nextProbe = System.nanoTime() + LIVENESS_PROBE_NANOS;
            }
            check();
            drainDirty();
            int work = loop.runNow();
            if (done.getAsBoolean()) {
                return;
            }
            if (work > 0) {
                continue;
            }
            long left = d.remainingNanos();
            if (left <= 0) {
                throw fail(new CommTimeoutException(ctx(), "timed out after setting up part of the group: " + what.get()));
            }
            loop.runBlocking(Math.min(left, TimeUnit.MILLISECONDS.toNanos(10)));
        }
    }

    private void check() {
        CommException f = failure.first();
        if (f != null) {
            throw f;
        }
        if (closed) {
            throw closedException();
        }
        if (closedPeers) {
            for (Link l : links) {
                if (l != null && l.inactive && l.byeSeen && l.awaitsData()) {
                    throw fail(new CommClosedException(ctx(), "peer rank " + l.peer
                            + " closed the group while this rank waited for it"));
                }
            }
        }
    }

    private CommTimeoutException timeout(Op op) {
        return timeout(op, null);
    }

    private CommTimeoutException timeout(Op op, String extra) {
        StringBuilder sb = new StringBuilder(op.name);
        if (op.seq > 0) {
            sb.append(" (collective #").append(op.seq).append(')');
        }
        sb.append(" did not complete before its deadline");
        if (extra != null) {
            sb.append("; ").append(extra);
        }
        for (Link l : links) {
            if (l != null) {
                String p = l.pendingDescription();
                if (!p.isEmpty()) {
                    sb.append("; ").append(p);
                }
            }
        }
        CommTimeoutException e = new CommTimeoutException(ctx(), sb.toString());
        fail(e);
        return e;
    }

    // ------------------------------------------------------------------ sending and receiving

    /**
     * Sends one message of {@code op} to {@code peer}; large payloads are read from caller memory. The
     * message goes now, or, when the peer's credit does not allow it, after the peer consumed enough:
     * the operation is not complete before (see {@link Link}'s flow control).
     */
    void send(Op op, int peer, Frame f, ByteBuffer payload) {
        Link l = links[peer];
        if (l.inactive) {
            throw fail(l.byeSeen ? new CommClosedException(ctx(), "peer rank " + peer + " closed the group")
                    : new PeerFailureException(ctx(), peer, "connection lost"));
        }
        int n = payload == null ? 0 : payload.remaining();
        if (l.shm != null && n >= cfg.shmThresholdBytes && n > 0) {
            if (l.shm.canSend()) {
                l.sendShmHeader(op, f, n);
                l.shm.send(op, payload);
                return;
            }
            if (!l.shm.offerTried) {
                offerRing(l);
            }
        }
        l.sendData(op, f, payload);
    }

    /**
     * Creates this rank's ring to {@code l}'s peer and offers it in-band; payloads keep going by
     * socket until the peer answered (so nothing waits for the answer).
     */
    private void offerRing(Link l) {
        l.shm.offerTried = true;
        ShmRings.Ring r = shmRings.createOutbound(l.peer);
        if (r == null) {
            return;
        }
        l.shm.offered = r;
        l.writeControl(Frame.RING, 0, generation, r.file.toString().getBytes(StandardCharsets.UTF_8));
    }

    /** A peer offered its ring to this rank: map it if possible and answer. */
    void onRingOffer(Link l, String path) {
        ShmRings.Ring r = l.shm != null && shmRings != null ? shmRings.mapInbound(l.peer, path) : null;
        if (r != null) {
            l.shm.attachIn(r); // before the answer: flagged headers can only follow it
        }
        Frame ack = Frame.of(Frame.RING_ACK, 0, generation);
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
            LOG.debug("group {} rank {}: shared-memory ring to rank {} in use", group, rank, l.peer);
        }
    }

    Recv post(Recv r) {
        r.op.pendingRecvs++;
        Link l = links[r.peer];
        if (r.expect.kind == Frame.DATA) {
            l.postCollective(r);
        } else {
            l.postP2p(r);
        }
        return r;
    }

    // ------------------------------------------------------------------ early messages

    /** Bytes of messages buffered before their receive was posted (tests, diagnostics). */
    long earlyBytes() {
        return earlyBytes;
    }

    boolean reserveEarly(int bytes) {
        if (earlyBytes > 0 && earlyBytes + bytes > cfg.maxUnexpectedBytes) {
            return false;
        }
        earlyBytes += bytes;
        return true;
    }

    /**
     * A buffer for an early message's payload, from the pooled allocator: the caller keeps it in
     * {@link Link.Early#buf} and {@link #releaseEarly} gives it back, so that a receiver behind its
     * sender reuses a few buffers instead of leaving one per message to the garbage collector.
     */
    void allocateEarly(Link.Early e, int bytes) {
        if (bytes == 0) {
            e.data = ByteBuffer.allocate(0);
            return;
        }
        e.buf = io.netty.buffer.PooledByteBufAllocator.DEFAULT.directBuffer(bytes, bytes);
        e.data = e.buf.nioBuffer(0, bytes); // direct: reductions may read it (see Reductions)
    }

    void releaseEarly(Link.Early e) {
        if (!e.lazy) {
            earlyBytes -= e.header.payload;
        }
        e.data = null;
        if (e.buf != null) {
            e.buf.release();
            e.buf = null;
        }
        if (!parkedLinks.isEmpty()) {
            for (Link l : parkedLinks) {
                markDirty(l);
            }
        }
    }

    void noteParked(Link l) {
        if (!parkedLinks.contains(l)) {
            parkedLinks.add(l);
        }
    }

    void markDirty(Link l) {
        if (!dirty.contains(l)) {
            dirty.add(l);
        }
    }

    private void drainDirty() {
        Link l;
        while ((l = dirty.poll()) != null) {
            l.service();
            if (!l.isParked()) {
                parkedLinks.remove(l);
            }
        }
    }

    // ------------------------------------------------------------------ shared memory

    private int pollShm() {
        if (shmRings == null) {
            return 0;
        }
        int work = 0;
        for (Link l : links) {
            if (l != null && l.shm != null) {
                work += l.shm.poll();
            }
        }
        return work;
    }

    private boolean shmBusy() {
        if (shmRings == null) {
            return false;
        }
        for (Link l : links) {
            if (l != null && l.shm != null && l.shm.busy()) {
                return true;
            }
        }
        return false;
    }

    /** The shared staging regions when they are set up (every rank of the group on one host), else null. */
    ShmStaging staging() {
        return stagingState == STAGING_READY ? staging : null;
    }

    /**
     * The staging regions for a collective that would use them, setting them up on first use: a
     * collective step of its own (every rank of the group calls this at the same point, since the
     * size decision is the same on every rank) in which each rank creates and pre-faults its region,
     * the ranks all-gather the paths, map each other's regions, and all-gather whether that worked;
     * the regions are used only if it worked everywhere, and the files lose their names either way.
     * Call outside {@link #enter}.
     */
    ShmStaging stagingFor(TcpBackend backend, Deadline d) {
        if (stagingState != STAGING_LATER) {
            return staging();
        }
        synchronized (stagingSetup) {
            if (stagingState != STAGING_LATER) {
                return staging();
            }
            stagingState = STAGING_NEVER; // whatever happens below, this is tried once
            ShmStaging s = ShmStaging.create(cfg, group, rank, size, generation);
            boolean used = false;
            try {
                byte[][] paths = backend.allGatherBytes((s == null ? "-" : s.path()).getBytes(StandardCharsets.UTF_8),
                        rank, size, MAX_PATH_BYTES, d);
                boolean ok = s != null;
                for (int r = 0; r < size && ok; r++) {
                    if (r != rank) {
                        String p = new String(paths[r], StandardCharsets.UTF_8);
                        ok = !p.equals("-") && s.map(r, p);
                    }
                }
                byte[][] oks = backend.allGatherBytes(new byte[] {(byte) (ok ? 1 : 0)}, rank, size, 1, d);
                boolean everyone = true;
                for (byte[] o : oks) {
                    everyone &= o.length == 1 && o[0] == 1;
                }
                if (s != null) {
                    s.unlinkFile(); // every peer mapped it (or decided not to)
                }
                if (everyone) {
                    staging = s;
                    stagingState = STAGING_READY;
                    used = true;
                    LOG.debug("group {} rank {}: shared staging regions ready", group, rank);
                } else {
                    LOG.debug("group {} rank {}: shared staging regions not usable by every rank; collectives use "
                            + "the links", group, rank);
                }
                return staging();
            } finally {
                if (!used && s != null) {
                    s.close();
                }
            }
        }
    }

    long nextPiece() {
        return ++stagingPiece;
    }

    /**
     * Waits until every peer published piece {@code piece} in {@code which} ({@link ShmStaging#INPUT_SEQ}
     * or {@link ShmStaging#RESULT_SEQ}) of its staging region; for inputs, checks each peer's descriptor.
     * Keeps driving the sockets meanwhile (peer failures, aborts, and mismatches: a peer that runs a
     * different collective sends socket messages this rank does not expect).
     */
    void awaitStaging(Op op, int which, long piece, long code, long count, long offset) {
        awaitStaging(op, which, piece, -1, which == ShmStaging.INPUT_SEQ, code, count, offset);
    }

    /** Waits until rank {@code from} published input piece {@code piece} and checks its descriptor. */
    void awaitStagingFrom(Op op, int from, long piece, long code, long count, long offset) {
        awaitStaging(op, ShmStaging.INPUT_SEQ, piece, from, true, code, count, offset);
    }

    /**
     * Before this rank writes piece {@code piece} into its slot: waits until every peer published piece
     * {@code piece - 1}, i.e. finished reading piece {@code piece - 2}, which used the same slot.
     */
    void gateStaging(Op op, long piece) {
        awaitStaging(op, ShmStaging.INPUT_SEQ, piece - 1, -1, false, 0, 0, 0);
    }

    private void awaitStaging(Op op, int which, long piece, int only, boolean checkDescriptor, long code, long count,
                              long offset) {
        long spinEnd = 0;
        int next = 0;
        while (true) {
            check();
            while (next < size && (next == rank || (only >= 0 && next != only) || staging.flag(next, which) >= piece)) {
                if (checkDescriptor && next != rank && (only < 0 || next == only)) {
                    String diff = staging.descriptorDifference(next, piece, op.seq, count, code, offset);
                    if (diff != null) {
                        throw fail(new CollectiveMismatchException(ctx(), "rank " + next + " runs another collective than "
                                + op.name + " #" + op.seq + " (count " + count + "):" + diff));
                    }
                }
                next++;
            }
            if (next == size) {
                return;
            }
            int work = loop.runNow();
            for (Link l : links) {
                if (l != null && l.earliestEarlyCollective() <= op.seq) {
                    throw fail(new CollectiveMismatchException(ctx(), "rank " + l.peer + " sent a message of collective #"
                            + l.earliestEarlyCollective() + " while this rank runs " + op.name + " #" + op.seq
                            + " through shared memory (different operations or sizes on different ranks)"));
                }
            }
            if (work > 0) {
                continue;
            }
            long now = System.nanoTime();
            long left = op.deadline.nanoTime() - now;
            if (left <= 0) {
                throw timeout(op, "waiting for rank " + next + " in shared memory");
            }
            if (spinEnd == 0) {
                spinEnd = now + spinNanos;
            }
            if (now - spinEnd < 0) {
                Thread.onSpinWait();
            } else if (now - spinEnd < SHM_YIELD_NANOS) {
                Thread.yield();
            } else {
                LockSupport.parkNanos(Math.min(left, PARK_NANOS));
            }
        }
    }

    /** Whether payloads to {@code peer} go through shared memory (for tests and the benchmark). */
    boolean sharedMemoryTo(int peer) {
        Link l = links[peer];
        return l != null && l.shm != null && l.shm.canSend();
    }

    // ------------------------------------------------------------------ failures

    /** Records the first failure and returns {@code e}. Any thread. */
    CommException fail(CommException e) {
        return failure.trip(e);
    }

    CollectiveMismatchException mismatch(Link l, Frame expected, Frame got, String diff) {
        CollectiveMismatchException e = new CollectiveMismatchException(ctx(), "rank " + l.peer + " sent "
                + got.describe() + " while this rank expected " + expected.describe() + ":" + diff);
        fail(e);
        return e;
    }

    void onInactive(Link l, Throwable cause) {
        l.inactive = true;
        if (closed || shutDown || l.peer < 0 || links[l.peer] != l) {
            return;
        }
        if (l.abortSeen) {
            return;
        }
        if (l.byeSeen) {
            // a clean close: only an operation that still needs this peer fails (checkClosedPeers)
            closedPeers = true;
        } else {
            fail(new PeerFailureException(ctx(), l.peer, "connection lost (the process died or the network failed)"
                    + (cause != null ? ": " + cause : ""), cause));
            if (registered) {
                progress.peerProcessDied(this, peerProcess[l.peer], "group " + group + " lost its connection to rank "
                        + l.peer + " there without a goodbye");
            }
        }
    }

    void onAbort(Link l, int reason, String text) {
        if (closed) {
            return;
        }
        switch (reason) {
            case Frame.ABORT_MISMATCH:
                fail(new CollectiveMismatchException(ctx(), "rank " + l.peer + " detected a mismatch and aborted the group: "
                        + text));
                break;
            case Frame.ABORT_TIMEOUT:
                fail(new PeerFailureException(ctx(), l.peer, "aborted the group after a timeout: " + text));
                break;
            default:
                fail(new PeerFailureException(ctx(), l.peer, "aborted the group: " + text));
        }
    }

    // ------------------------------------------------------------------ set-up

    private ChannelInitializer<Channel> initializer(int peer) {
        return new ChannelInitializer<>() {
            @Override
            protected void initChannel(Channel ch) {
                Link l = new Link(Engine.this);
                l.peer = peer;
                l.attach(ch);
                ch.config().setRecvByteBufAllocator(l);
                ch.config().setOption(ChannelOption.TCP_NODELAY, true);
                if (cfg.socketBufferBytes > 0) {
                    ch.config().setOption(ChannelOption.SO_SNDBUF, cfg.socketBufferBytes);
                    ch.config().setOption(ChannelOption.SO_RCVBUF, cfg.socketBufferBytes);
                }
                ch.pipeline().addLast(l);
                allLinks.add(l);
                if (peer >= 0) {
                    links[peer] = l;
                }
            }
        };
    }

    private void bootstrap(CpuBackendContext ctx, Deadline d) {
        Store store = ctx.store();
        nonce = NONCES.nextLong();
        Class<? extends ServerChannel> serverClass = epoll ? EpollServerSocketChannel.class : NioServerSocketChannel.class;
        ChannelFuture bind = new ServerBootstrap().group(loop).channel(serverClass)
                .option(ChannelOption.SO_BACKLOG, 256)
                .childHandler(initializer(-1))
                .bind(new InetSocketAddress(ctx.hostname(), 0));
        driveUntil(bind::isDone, d, () -> "binding a server socket on " + ctx.hostname());
        if (!bind.isSuccess()) {
            throw fail(new io.jcomm.api.BackendException(ctx(), "cannot listen on " + ctx.hostname() + ": " + bind.cause(),
                    bind.cause()));
        }
        server = bind.channel();
        int port = ((InetSocketAddress) server.localAddress()).getPort();

        // which incarnation of the group this is (keys of an earlier one in the same namespace are never
        // read); a namespace the caller keeps for this incarnation needs no counting
        generation = cfg.freshNamespace ? 1 : store.add("tcp/instance/" + rank, 1);
        String hostId = cfg.hostId != null ? cfg.hostId : io.jcomm.api.HostIdentity.local();
        if (cfg.shm) {
            shmRings = new ShmRings(cfg, group, rank, generation);
        }
        // what this rank can do in shared memory; rings and staging regions are made on first use
        // (staging size and the size from which collectives use it: ranks that differ never set it up)
        String stagingOffer = cfg.shm && cfg.shmStagingBytes > 0
                ? cfg.shmStagingBytes + ":" + cfg.shmCollectiveMinBytes : "-";
        String me = ctx.hostname() + " " + port + " " + Long.toUnsignedString(nonce, 16) + " " + hostId + " "
                + (cfg.shm ? "shm" : "-") + " " + stagingOffer + " " + Long.toUnsignedString(progress.processId(), 16);
        String prefix = "tcp/" + generation + "/rank/";
        store.set(prefix + rank, me.getBytes(StandardCharsets.UTF_8));
        List<String> keys = new ArrayList<>();
        for (int r = 0; r < size; r++) {
            if (r != rank) {
                keys.add(prefix + r);
            }
        }
        List<byte[]> values = store.multiGet(keys, d.remaining());
        String[][] peers = new String[size][];
        int i = 0;
        for (int r = 0; r < size; r++) {
            if (r == rank) {
                continue;
            }
            String[] parts = new String(values.get(i++), StandardCharsets.UTF_8).split(" ");
            if (parts.length != 7) {
                throw fail(new ProtocolException(ctx(), "malformed address of rank " + r + " in the store"));
            }
            try {
                peerProcess[r] = Long.parseUnsignedLong(parts[6], 16);
            } catch (NumberFormatException e) {
                throw fail(new ProtocolException(ctx(), "malformed address of rank " + r + " in the store"));
            }
            peers[r] = parts;
        }

        // connect to lower ranks, accept from higher ranks
        Class<? extends Channel> clientClass = epoll ? EpollSocketChannel.class : NioSocketChannel.class;
        for (int r = 0; r < rank; r++) {
            connect(r, peers[r], clientClass, d);
        }
        Store probe = store;
        String probeKey = prefix + "liveness-probe";
        driveUntil(this::allConnected, d, this::missingConnections, () -> probeLiveness(probe, probeKey));

        // shared memory to peers on this host: links that may take a ring later
        boolean stagingCandidate = !stagingOffer.equals("-") && size > 1;
        for (int r = 0; r < size; r++) {
            if (r == rank) {
                continue;
            }
            boolean sameHost = peers[r][3].equals(hostId);
            if (shmRings != null && sameHost && peers[r][4].equals("shm")) {
                links[r].shm = new ShmLink();
                links[r].shm.bind(links[r]);
            }
            stagingCandidate &= sameHost && peers[r][5].equals(stagingOffer);
        }
        // every rank sees the same addresses, so every rank comes to the same answer
        stagingState = stagingCandidate ? STAGING_LATER : STAGING_NEVER;
        for (int r = 0; r < size; r++) {
            if (r != rank) {
                links[r].write(Frame.of(Frame.READY, 0, generation), null, true);
            }
        }
        driveUntil(this::allReady, d, () -> "waiting for ranks to finish connecting: " + notReady(),
                () -> probeLiveness(probe, probeKey));
        server.close();
        server = null;
        LOG.debug("group {} rank {}: connected {} peers over {} (shared memory: {}, staging: {})", group, rank,
                size - 1, transportName(), shmRings != null ? "on first large payload" : "off",
                stagingState == STAGING_LATER ? "on first large collective" : "off");
    }

    private void connect(int r, String[] addr, Class<? extends Channel> clientClass, Deadline d) {
        String host = addr[0];
        int port;
        long theirNonce;
        try {
            port = Integer.parseInt(addr[1]);
            theirNonce = Long.parseUnsignedLong(addr[2], 16);
        } catch (NumberFormatException e) {
            throw fail(new ProtocolException(ctx(), "malformed address of rank " + r + ": " + String.join(" ", addr)));
        }
        long refusedSince = 0;
        while (true) {
            ChannelFuture cf = new Bootstrap().group(loop).channel(clientClass)
                    .option(ChannelOption.CONNECT_TIMEOUT_MILLIS, (int) Math.max(1, Math.min(10_000, d.remainingMillis())))
                    .handler(initializer(r))
                    .connect(new InetSocketAddress(host, port));
            driveUntil(cf::isDone, d, () -> "connecting to rank " + r + " at " + host + ":" + port);
            if (cf.isSuccess()) {
                Frame hello = Frame.of(Frame.HELLO, 0, theirNonce);
                hello.root = rank;
                hello.count = generation;
                hello.index = r;
                links[r].write(hello, null, true);
                links[r].helloSeen = true;
                return;
            }
            links[r] = null;
            if (d.isExpired()) {
                throw fail(new CommTimeoutException(ctx(), "cannot connect to rank " + r + " at " + host + ":" + port
                        + ": " + cf.cause()));
            }
            if (cf.cause() instanceof java.net.ConnectException && String.valueOf(cf.cause().getMessage()).contains("refused")) {
                long now = System.nanoTime();
                if (refusedSince == 0) {
                    refusedSince = now;
                } else if (now - refusedSince > REFUSED_GRACE_NANOS) {
                    // it listened before it published the address: it has closed or died since
                    throw fail(new PeerFailureException(ctx(), r, "nothing listens at " + host + ":" + port
                            + " any more (the rank left or died during group creation)"));
                }
            } else {
                refusedSince = 0;
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20));
        }
    }

    /**
     * Asks the store whether a member of the job left it without a goodbye: a short wait on a key nobody
     * sets, which a jcomm store server answers at once with a failure naming the dead rank (other stores
     * let it time out, and set-up goes on waiting for its deadline).
     */
    private void probeLiveness(Store store, String key) {
        try {
            store.wait(List.of(key), LIVENESS_PROBE_WAIT);
        } catch (PeerFailureException e) {
            throw fail(new PeerFailureException(ctx(), -1, "a member of the job died during group creation: "
                    + e.detail(), e));
        } catch (CommTimeoutException e) {
            // nobody died (or the store cannot tell): keep waiting for the peers
        } catch (CommException e) {
            LOG.debug("group {} rank {}: liveness probe failed: {}", group, rank, e.toString());
        }
    }

    /** Closes a connection that sent bytes before a valid hello. */
    void rejectUnbound(Link l, CommException why) {
        LOG.warn("group {} rank {}: dropping a connection from {} that did not start with a valid hello: {}", group, rank,
                l.channel.remoteAddress(), why.detail());
        l.channel.close();
    }

    void onHello(Link l, Frame f) {
        int from = f.root;
        boolean ok = f.seq == nonce && f.count == generation && f.index == rank && from > rank && from < size
                && links[from] == null && l.peer < 0;
        if (!ok) {
            LOG.debug("group {} rank {}: rejecting a connection with a stale or foreign hello from {}", group, rank,
                    l.channel.remoteAddress());
            l.channel.close();
            return;
        }
        l.peer = from;
        links[from] = l;
    }

    private boolean allConnected() {
        for (int r = 0; r < size; r++) {
            if (r != rank && (links[r] == null || !links[r].channel.isActive())) {
                return false;
            }
        }
        return true;
    }

    private String missingConnections() {
        StringBuilder sb = new StringBuilder("no connection yet with ranks");
        for (int r = 0; r < size; r++) {
            if (r != rank && (links[r] == null || !links[r].channel.isActive())) {
                sb.append(' ').append(r);
            }
        }
        return sb.toString();
    }

    private boolean allReady() {
        for (int r = 0; r < size; r++) {
            if (r != rank && !links[r].readySeen) {
                return false;
            }
        }
        return true;
    }

    private String notReady() {
        StringBuilder sb = new StringBuilder();
        for (int r = 0; r < size; r++) {
            if (r != rank && !links[r].readySeen) {
                sb.append(' ').append(r);
            }
        }
        return sb.toString().trim();
    }

    // ------------------------------------------------------------------ closing

    /**
     * Closes the mesh; callable from any thread. A call in progress on another thread fails with
     * {@link CommClosedException} and the thread that drives the loop releases the connections.
     */
    void close() {
        if (closed) {
            return;
        }
        closed = true;
        loop.wakeup();
        Thread t = driver;
        if (t != null) {
            LockSupport.unpark(t);
        }
        boolean locked = false;
        try {
            locked = driverLock.tryLock(2, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        if (!locked) {
            return; // the driving thread shuts down when it leaves (exit())
        }
        try {
            if (!shutDown) {
                driver = Thread.currentThread();
                loop.own(driver);
                shutdownFromDriver();
            }
        } finally {
            driver = null;
            driverLock.unlock();
        }
    }

    private void shutdownFromDriver() {
        shutDown = true;
        if (registered) {
            progress.unregister(this);
        }
        CommException f = failure.first();
        byte[] reason = null;
        int code = 0;
        if (f != null) {
            String text = f.getMessage();
            byte[] b = text.getBytes(StandardCharsets.UTF_8);
            reason = b.length <= Link.MAX_CONTROL_PAYLOAD ? b : java.util.Arrays.copyOf(b, Link.MAX_CONTROL_PAYLOAD);
            code = f instanceof CollectiveMismatchException ? Frame.ABORT_MISMATCH
                    : f instanceof CommTimeoutException ? Frame.ABORT_TIMEOUT : Frame.ABORT_FAILURE;
        }
        List<ChannelFuture> closing = new ArrayList<>();
        try {
            for (Link l : allLinks) {
                if (l.channel != null && l.channel.isActive() && l.peer >= 0) {
                    try {
                        if (f != null) {
                            l.writeControl(Frame.ABORT, code, 0, reason);
                        } else {
                            l.writeControl(Frame.BYE, 0, 0, null);
                        }
                    } catch (RuntimeException ignored) {
                        // the connection may be broken already
                    }
                }
                if (l.channel != null) {
                    closing.add(l.channel.close());
                }
            }
            if (server != null) {
                closing.add(server.close());
            }
            long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
            while (System.nanoTime() - end < 0 && !closing.stream().allMatch(ChannelFuture::isDone)) {
                if (loop.runNow() == 0) {
                    loop.runBlocking(TimeUnit.MILLISECONDS.toNanos(5));
                }
            }
        } catch (RuntimeException e) {
            LOG.debug("error while closing group {} rank {}", group, rank, e);
        } finally {
            for (Link l : allLinks) {
                l.release();
            }
            if (shmRings != null) {
                shmRings.close();
            }
            if (staging != null) {
                staging.close();
            }
            loop.destroy();
        }
    }
}
