package io.jcomm.cpu.internal.tcp;

import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import io.jcomm.runtime.FailureLatch;
import io.jcomm.cpu.spi.CpuBackendContext;
import io.netty.channel.Channel;
import io.netty.channel.ChannelFuture;
import io.netty.channel.ChannelOption;
import io.netty.channel.IoHandlerFactory;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollIoHandler;
import io.netty.channel.nio.NioIoHandler;
import io.netty.channel.socket.DuplexChannel;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The tcp backend's transport: Netty connections set up through the store (a full mesh at creation, or
 * each link on first use in a large group spanning hosts, {@link MeshBootstrap#connectTo}), driven
 * by the calling thread ({@link DrivenEventLoop}), plus optional shared memory to peers on the same
 * host. Algorithms post sends and receives on an {@link Op} and {@link #await} it.
 *
 * <p>One job per class: this one drives (who holds the loop, waiting, progress between calls), moves
 * messages and keeps the first failure; {@link MeshBootstrap} sets the mesh up; {@link ShmPlane}
 * owns the rings and staging regions and their waits; {@link EarlyMessages} holds what arrived
 * before its receive. None of them calls up into the backend: what set-up needs from the group (one
 * all-gather for the staging regions) is passed in.
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

    /** How long a closing group waits for its last frame (goodbye or abort) to leave before it closes the sockets. */
    private static final long SAY_GOODBYE_MILLIS = 200;


    private static final Logger LOG = LoggerFactory.getLogger(Engine.class);
    private static final long MAX_BLOCK_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
    static final long PARK_NANOS = TimeUnit.MICROSECONDS.toNanos(50);
    /** While a wait spins on shared memory, how often it still reads the sockets. */
    static final long SHM_SOCKET_POLL_NANOS = TimeUnit.MICROSECONDS.toNanos(20);
    /** While a shared-memory transfer is in progress, yield (not park) this long after the last progress. */
    static final long SHM_YIELD_NANOS = TimeUnit.MILLISECONDS.toNanos(2);
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
    final boolean epoll;
    private final ReentrantLock driverLock = new ReentrantLock();
    private volatile Thread driver;
    private volatile boolean closed;
    /** Closing without goodbye: no BYE or ABORT, and a reset instead of an orderly close ({@link #cut()}). */
    private volatile boolean cut;
    /** The first failure (io.jcomm.runtime.FailureLatch, the mechanism every module shares). */
    private final FailureLatch failure = new FailureLatch();
    final Progress progress = Progress.shared();
    /** Process identity of each member (from its published address), 0 for this rank. */
    final long[] peerProcess;
    /** Each member's tag as published with its address ({@link io.jcomm.cpu.spi.CpuBackendContext#memberTag()}). */
    final String[] memberTags;
    /** What the members are doing, for failure messages (their flight recorders, here or through the store). */
    final PeerStates peerStates;
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

    /** Whether a caller drives the engine now (inside a call), not the progress thread between calls. Driving thread. */
    boolean callerDriving() {
        return !BETWEEN_CALLS.equals(opName);
    }
    private long collectiveSeq;
    final List<Link> allLinks = new ArrayList<>();
    Channel server;
    /** Links are made on first use ({@link MeshBootstrap#connectTo}): the group spans hosts; set at creation. */
    boolean lazy;
    /**
     * A lazily connected group of more than {@link MeshBootstrap#LARGE_ABOVE} ranks: its world-sized
     * collectives take the algorithms that talk to O(log N) peers; set at creation.
     */
    boolean large;
    long nonce;
    /** Which incarnation of the group this is in its store namespace (set-up). */
    long generation;
    /** The group's generation ({@link io.jcomm.api.ProcessGroup#generation()}): every hello carries it. */
    final int groupGeneration;
    /** Why connections were refused during set-up, the first 16 (tests, diagnostics). */
    final List<CommException> refusals = java.util.Collections.synchronizedList(new ArrayList<>());
    /** Set-up of the mesh (its HELLO checks stay valid while accepted connections open). */
    final MeshBootstrap mesh = new MeshBootstrap(this);
    /** Rings and staging regions. */
    final ShmPlane shm = new ShmPlane(this);
    /** Messages that came before their receive. */
    final EarlyMessages early;


    private Engine(CpuBackendContext ctx, TcpConfig cfg) {
        this.group = ctx.groupName();
        this.groupGeneration = ctx.generation();
        this.rank = ctx.rank();
        this.size = ctx.size();
        this.cfg = cfg;
        this.links = new Link[size];
        this.peerProcess = new long[size];
        this.memberTags = new String[size];
        this.peerStates = new PeerStates(group, rank, peerProcess);
        this.spinNanos = cfg.spinNanos;
        this.early = new EarlyMessages(cfg.maxUnexpectedBytes);
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
            e.mesh.run(ctx, Deadline.after(ctx.timeout()));
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
                if (pendingOutput() && !(boolean) KICKED.getOpaque(this)) {
                    // the socket did not take everything: the progress thread finishes it. KICKED (set and cleared
                    // under the driver lock) says that the engine is in the thread's busy set or on its way there
                    KICKED.setOpaque(this, true);
                    progress.kick(this);
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
            if (l != null && (l.hasPendingOutput() || (l.mailbox != null && l.mailbox.hasQueued()))) {
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
            KICKED.setOpaque(this, false); // nothing more to push: out of the busy set
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
                KICKED.setOpaque(this, false);
                return false;
            }
            opName = BETWEEN_CALLS;
            Thread me = Thread.currentThread();
            driver = me;
            loop.own(me);
            early.drain();
            loop.runNow();
            early.drain();
            shm.poll();
            boolean pending = !failure.isTripped() && pendingOutput();
            KICKED.setOpaque(this, pending);
            return pending;
        } catch (RuntimeException e) {
            KICKED.setOpaque(this, false);
            fail(io.jcomm.cpu.internal.Errors.wrap(e, ctx()));
            return false;
        } finally {
            driver = null;
            driverLock.unlock();
        }
    }

    /**
     * Whether the progress thread still owes this engine a pass (bytes waited for a socket when it last
     * looked, or a caller left some since): a pass that found the driver lock taken leaves it set.
     */
    boolean kicked() {
        return (boolean) KICKED.getOpaque(this);
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

    /**
     * Starts an operation that may talk to every member; collectives get the next sequence number. In a
     * lazily connected group, first connects to every member not connected yet.
     */
    Op begin(int kind, int code, Deadline deadline) {
        if (lazy) {
            mesh.connectToAll(deadline, kind == Frame.DATA);
        }
        long seq = kind == Frame.DATA ? ++collectiveSeq : 0;
        return new Op(opName, kind, code, seq, deadline);
    }

    /** {@link #begin(int, int, Deadline)} for an operation that talks to {@code peer} only. */
    Op begin(int kind, int code, Deadline deadline, int peer) {
        Link l = links[peer];
        if (lazy && (l == null || !l.helloSeen || !l.channel.isActive())) {
            mesh.connectTo(new int[] {peer}, 1, deadline, kind == Frame.DATA);
        }
        long seq = kind == Frame.DATA ? ++collectiveSeq : 0;
        return new Op(opName, kind, code, seq, deadline);
    }

    /**
     * {@link #begin(int, int, Deadline)} for an operation that talks to {@code peers[0..count)} only:
     * a lazily connected group connects to those.
     */
    Op begin(int kind, int code, Deadline deadline, int[] peers, int count) {
        if (lazy) {
            mesh.connectTo(peers, count, deadline, kind == Frame.DATA);
        }
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
        await(op, null);
    }

    /**
     * {@link #await(Op)}, but a timeout is reported with {@code explain}'s text (computed at the
     * deadline, e.g. which ranks did not arrive), which is also the reason peers get in the abort.
     */
    void await(Op op, java.util.function.Supplier<String> explain) {
        long spinEnd = 0;
        long idleStart = 0;
        long socketPolled = System.nanoTime();
        while (true) {
            check();
            early.drain();
            if (op.isComplete()) {
                adaptSpin(idleStart);
                return;
            }
            int work;
            if (shm.busy() && System.nanoTime() - socketPolled < SHM_SOCKET_POLL_NANOS) {
                // waiting on shared memory (a mailbox record, a ring payload): read it without a system call,
                // and the sockets (failures, aborts, other messages) every SHM_SOCKET_POLL_NANOS
                work = shm.poll();
            } else {
                work = loop.runNow();
                socketPolled = System.nanoTime();
                work += shm.poll();
            }
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
                if (explain != null) {
                    throw (CommTimeoutException) fail(new CommTimeoutException(ctx(), explain.get()));
                }
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
            if (shm.busy()) {
                // the peer is copying right now: give up the core if someone else needs it, but do not
                // sleep (a park costs tens of microseconds of timer slack per ring hand-off)
                if (now - spinEnd < SHM_YIELD_NANOS) {
                    Thread.yield();
                } else {
                    LockSupport.parkNanos(Math.min(left, parkNanos(now - idleStart)));
                }
                continue;
            }
            loop.runBlocking(Math.min(left, MAX_BLOCK_NANOS));
            spinEnd = 0;
        }
    }

    /**
     * How long a shared-memory wait parks after {@code waited} nanoseconds without progress: briefly at
     * first, longer over a long wait, so that a rank waiting for a slow peer costs little CPU.
     */
    static long parkNanos(long waited) {
        return waited < LONG_WAIT_NANOS ? PARK_NANOS : waited < VERY_LONG_WAIT_NANOS ? 4 * PARK_NANOS : MAX_PARK_NANOS;
    }

    private static final long LONG_WAIT_NANOS = TimeUnit.MILLISECONDS.toNanos(20);
    private static final long VERY_LONG_WAIT_NANOS = TimeUnit.SECONDS.toNanos(1);
    private static final long MAX_PARK_NANOS = TimeUnit.MILLISECONDS.toNanos(1);

    /** How long a wait polls before it yields or blocks now (adapted by {@link #adaptSpin}, at most {@code tcp.spinMicros}). */
    long spinNanos() {
        return spinNanos;
    }

    /**
     * After a link or mailbox wait that started idling at {@code idleStart} (0: it never waited): spin
     * longer next time when a full spin ({@code tcp.spinMicros}) would have caught the answer, shorter
     * when the peer took longer than that. Measured against the full spin, not the current one: a spin
     * that had shrunk to nothing could otherwise never grow again, and every later wait would go
     * through the yield path (a system call per look) however quickly its peer answered.
     */
    private void adaptSpin(long idleStart) {
        adaptSpin(idleStart, cfg.spinNanos);
    }

    /**
     * After a shared-memory step that started waiting at {@code waitStart} (0: it never waited). Its
     * peers run the same step, so waits of a few microseconds are their skew and spinning through them
     * pays; a wait beyond {@link #SHM_DESCHEDULED_NANOS} means a peer was not running (a host with more
     * ranks than cores), and then a rank that spins takes the core that peer needs: spin less next time.
     */
    void adaptSpinShm(long waitStart) {
        adaptSpin(waitStart, SHM_DESCHEDULED_NANOS);
    }

    /** Grows the spin (up to {@code tcp.spinMicros}) after a wait of at most {@code tolerated}, halves it after a longer one. */
    private void adaptSpin(long since, long tolerated) {
        if (since == 0) {
            return;
        }
        spinNanos = nextSpin(spinNanos, System.nanoTime() - since, tolerated, cfg.spinNanos);
    }

    /**
     * The spin after a wait of {@code waited} nanoseconds with spin {@code spin}: grown (doubled plus a
     * microsecond, at most {@code max}) when the wait was at most {@code tolerated}, halved otherwise
     * (the peer was slow, or the machine busy).
     */
    static long nextSpin(long spin, long waited, long tolerated, long max) {
        return waited <= tolerated ? Math.min(max, spin * 2 + 1000) : spin / 2;
    }

    /** A shared-memory wait longer than this means a peer was descheduled, not merely behind ({@link #adaptSpinShm}). */
    static final long SHM_DESCHEDULED_NANOS = TimeUnit.MICROSECONDS.toNanos(50);

    void check() {
        CommException f = failure.first();
        if (f != null) {
            throw f;
        }
        if (closed) {
            throw closedException();
        }
        if (closedPeers) {
            for (Link l : links) {
                if (l != null && l.inactive && l.byeSeen && l.mailbox != null) {
                    l.mailbox.poll(); // records the peer wrote before its goodbye are still delivered
                }
                if (l != null && l.inactive && l.byeSeen && (l.awaitsData() || l.awaitsRoom())) {
                    throw peerClosed(l.peer);
                }
            }
        }
    }

    /**
     * A wait that needs {@code peer} (a shared-memory step, which posts no receive) fails once that peer
     * closed the group cleanly, as {@link #check} fails the waits for its messages.
     */
    void checkPeerOpen(int peer) {
        Link l = links[peer];
        if (closedPeers && l != null && l.inactive && l.byeSeen) {
            throw peerClosed(peer);
        }
    }

    private CommException peerClosed(int peer) {
        return fail(new CommClosedException(ctx(), "peer rank " + peer + " closed the group while this rank waited for it"));
    }

    private CommTimeoutException timeout(Op op) {
        return timeout(op, null);
    }

    CommTimeoutException timeout(Op op, String extra) {
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
                    whatPeerDoes(sb, l.peer);
                }
            }
        }
        CommTimeoutException e = new CommTimeoutException(ctx(), sb.toString());
        fail(e);
        return e;
    }

    /** Appends what member {@code peer} is doing ({@link PeerStates#describe}). */
    void whatPeerDoes(StringBuilder sb, int peer) {
        peerStates.describe(sb, peer);
    }

    // ------------------------------------------------------------------ sending and receiving

    /**
     * Sends one message of {@code op} to {@code peer}; large payloads are read from caller memory. The
     * message goes now, or, when the peer's credit does not allow it, after the peer consumed enough:
     * the operation is not complete before (see {@link Link}'s flow control).
     */
    void send(Op op, int peer, Frame f, ByteBuffer payload) {
        send(op, peer, f, payload, cfg.shmThresholdBytes);
    }

    /**
     * {@link #send(Op, int, Frame, ByteBuffer)} with its own size from which a payload to a same-host
     * peer takes (and, the first time, offers) the shared-memory ring.
     */
    void send(Op op, int peer, Frame f, ByteBuffer payload, int shmThreshold) {
        Link l = linkForSend(peer);
        int n = payload == null ? 0 : payload.remaining();
        if (l.shm != null && n >= shmThreshold && n > 0) {
            if (l.shm.canSend()) {
                l.sendShmHeader(op, f, n);
                l.shm.send(op, payload);
                return;
            }
            if (!l.shm.offerTried) {
                shm.offerRing(l);
            }
        }
        l.sendData(op, f, payload);
    }

    /** The link to {@code peer}, or the failure to report when it is gone (closed or lost). */
    Link linkForSend(int peer) {
        Link l = links[peer];
        if (l.inactive) {
            throw fail(l.byeSeen ? new CommClosedException(ctx(), "peer rank " + peer + " closed the group")
                    : new PeerFailureException(ctx(), peer, "connection lost"));
        }
        return l;
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

    /**
     * {@link #close()} as a crash looks to the peers: no BYE or ABORT frame, and each connection is
     * reset (SO_LINGER 0) instead of closed in order; callable from any thread.
     */
    void cut() {
        cut = true;
        close();
    }

    private void shutdownFromDriver() {
        shutDown = true;
        peerStates.close();
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
            // the goodbye or abort first, then the end of this side's stream, and only then the close: a close
            // with the peer's bytes unread resets the connection, and a reset sent while the last frame still
            // waits in this host's send queue discards it (the peer would see "connection lost", not why).
            // After a mismatch this side also waits (within the same bound) for each peer to end its stream,
            // reading what it still sends: a peer whose own send meets the reset closes at once and loses the
            // abort still unread in its receive queue. Only then: after a lost peer the others see a peer
            // failure either way, and a recovery should not wait for each survivor to close
            List<ChannelFuture> said = new ArrayList<>();
            List<Channel> aborted = new ArrayList<>();
            for (Link l : allLinks) {
                if (cut) {
                    if (l.channel != null) {
                        try {
                            l.channel.config().setOption(ChannelOption.SO_LINGER, 0);
                        } catch (RuntimeException ignored) {
                            // closed already: nothing to reset
                        }
                    }
                } else if (l.channel != null && l.channel.isActive() && l.peer >= 0) {
                    try {
                        if (f != null) {
                            l.writeControl(Frame.ABORT, code, 0, reason);
                            if (code == Frame.ABORT_MISMATCH) {
                                aborted.add(l.channel);
                            }
                        } else {
                            l.writeControl(Frame.BYE, 0, 0, null);
                        }
                        if (l.channel instanceof DuplexChannel d) {
                            said.add(d.shutdownOutput());
                        }
                    } catch (RuntimeException ignored) {
                        // the connection may be broken already
                    }
                }
            }
            long saidBy = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(SAY_GOODBYE_MILLIS);
            while (System.nanoTime() - saidBy < 0 && !(said.stream().allMatch(ChannelFuture::isDone)
                    && aborted.stream().noneMatch(Channel::isActive))) {
                if (loop.runNow() == 0) {
                    loop.runBlocking(TimeUnit.MILLISECONDS.toNanos(2));
                }
            }
            for (Link l : allLinks) {
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
            shm.close();
            loop.destroy();
        }
    }
}
