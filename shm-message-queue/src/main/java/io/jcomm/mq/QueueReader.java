package io.jcomm.mq;

import static io.jcomm.mq.internal.Frames.A_OFFSET;
import static io.jcomm.mq.internal.Frames.B_OFFSET;
import static io.jcomm.mq.internal.Frames.CONTROL_LENGTH;
import static io.jcomm.mq.internal.Frames.FLAGS_OFFSET;
import static io.jcomm.mq.internal.Frames.MAC;
import static io.jcomm.mq.internal.Frames.MAC_LENGTH;
import static io.jcomm.mq.internal.Frames.QUEUE_ID_OFFSET;
import static io.jcomm.mq.internal.Frames.RANK_OFFSET;
import static io.jcomm.mq.internal.Frames.TYPE_OFFSET;
import static io.jcomm.mq.internal.Frames.VERSION;
import static io.jcomm.mq.internal.Frames.VERSION_OFFSET;
import static java.nio.ByteOrder.LITTLE_ENDIAN;

import io.aeron.AeronCounters;
import io.aeron.Counter;
import io.aeron.ExclusivePublication;
import io.aeron.Image;
import io.aeron.Subscription;
import io.aeron.logbuffer.ControlledFragmentHandler;
import io.aeron.logbuffer.ControlledFragmentHandler.Action;
import io.aeron.logbuffer.Header;
import io.jcomm.api.BackendException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.ObjectCodec;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProtocolException;
import io.jcomm.runtime.FailureLatch;
import io.jcomm.runtime.shm.ProcessIdentity;
import io.jcomm.runtime.shm.ShmFiles;
import io.jcomm.mq.internal.Frames;
import io.jcomm.mq.internal.HmacSha256;
import io.jcomm.mq.internal.MessageAssembler;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.time.Duration;
import java.util.Objects;
import java.util.function.Consumer;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.agrona.CloseHelper;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersReader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A reading end of a queue, opened from the writer's {@link QueueHandle} on this host's
 * {@link AeronMedia}: over Aeron IPC when the handle lists the rank as a local reader, over
 * authenticated Aeron UDP when it lists it as a remote one.
 *
 * <p>Contract:
 * <ul>
 *   <li>One thread dequeues at a time (not thread safe); {@link #close()} may come from any thread.</li>
 *   <li>{@link #dequeue} returns a <em>zero-copy</em> view of the next message, valid until the next
 *       {@code dequeue}, {@link #release()} or {@link #close()}: a message that fits one frame is
 *       read in place in the shared log (the writer cannot overwrite it while it is held), a longer
 *       one is reassembled into a reusable buffer. {@link #dequeueBytes} and {@link #dequeueObject}
 *       copy and release at once.</li>
 *   <li>While a message is held, the writer sees it as not yet consumed (backpressure and
 *       {@link QueueWriter#awaitDelivered} count it as pending).</li>
 *   <li>Every frame is validated before use (sizes bounded before allocating, sequence numbers,
 *       HMAC on UDP); a violation throws {@link ProtocolException} and breaks the reader.</li>
 *   <li>Waiting: spin, then yield ({@link MessageQueueOptions#idleFor}); after that a local reader
 *       sleeps until the writer wakes it through a loopback socket ({@link MessageQueueOptions#wakeups()};
 *       ~0 % CPU while idle, tens of µs to wake), a remote one parks (up to 1 ms at a time).</li>
 *   <li>The writer's clean close gives {@link CommClosedException} after every earlier message was
 *       delivered; its death gives {@link PeerFailureException} naming the writer within about the
 *       liveness timeout; no message before the deadline gives {@link CommTimeoutException} (the
 *       reader stays usable).</li>
 * </ul>
 */
public final class QueueReader implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(QueueReader.class);
    private static final int FRAGMENT_LIMIT = 64;
    private static final int CONTROL_TERM = 64 * 1024;
    private static final int NONE = -1;

    private final AeronMedia media;
    private final QueueHandle handle;
    private final MessageQueueOptions options;
    private final ObjectCodec codec;
    private final int rank;
    private final boolean remote;
    private final OpContext context;
    private final int driverOwnerRank;
    private final Subscription dataSub;
    private final ExclusivePublication controlPub;
    private final Image image;
    private final MessageAssembler assembler;
    private final HmacSha256 controlMac;
    private final UnsafeBuffer controlFrame = new UnsafeBuffer(new byte[CONTROL_LENGTH + MAC_LENGTH]);
    private final IdleStrategy idle;
    private final ControlledFragmentHandler handler = this::onFragment;
    private byte[] scratch = new byte[0];

    /** Type id of the "reader is asleep" counters that local readers allocate in the driver. */
    static final int SLEEP_COUNTER_TYPE_ID = 4_201_001;
    /** Longest single sleep of a woken-up reader (liveness and deadlines are checked in between). */
    private static final long SLEEP_SLICE_MS = 100;
    private final DatagramChannel wakeChannel;
    private final Selector wakeSelector;
    private final Counter sleepCounter;
    private final ByteBuffer wakeDrain = ByteBuffer.allocateDirect(64);
    private final Consumer<SelectionKey> drainWake = k -> drainWakeups();
    private final long sleepAfterNanos;
    private long idleSince = -1;
    private boolean asleep;

    private int result = NONE;
    private ProtocolException frameError;
    private long heldPosition = -1;
    private long heldSeq;
    private long consumedSeq;
    private long consumedPosition;
    private long ackedSeq;
    private final FailureLatch failure = new FailureLatch();
    private volatile boolean closed;

    private QueueReader(AeronMedia media, QueueHandle handle, int rank, int driverOwnerRank, MessageQueueOptions options,
                        Deadline deadline) {
        this.media = media;
        this.handle = handle;
        this.options = options;
        this.codec = options.codec();
        this.rank = rank;
        this.remote = handle.isRemote(rank);
        this.driverOwnerRank = driverOwnerRank;
        this.context = OpContext.of(handle.groupName(), rank, "open");
        this.idle = options.idleFor(handle.isRemote(rank) ? 1 : 1 + handle.localReaders().size()).newStrategy();
        this.controlMac = remote ? new HmacSha256(handle.authKey()) : null;
        this.assembler = new MessageAssembler(OpContext.of(handle.groupName(), rank, "dequeue"),
                Math.min(handle.maxMessageBytes(), options.maxMessageBytes()), remote ? new HmacSha256(handle.authKey()) : null);
        if (remote) {
            long needed = 3L * handle.udpTermLength() + 3L * CONTROL_TERM + 8192;
            ShmFiles.spaceProblem(media.directory(), needed, ShmFiles.usableBytes(media.directory()),
                    "message queue " + handle.groupName(), AeronMedia.SMALLER).ifPresent(msg -> {
                        throw new BackendException(context, msg);
                    });
        }
        IdleConfig idleConfig = options.idleFor(handle.isRemote(rank) ? 1 : 1 + handle.localReaders().size());
        this.sleepAfterNanos = idleConfig.spinNanos() + idleConfig.yieldNanos() < 0 ? Long.MAX_VALUE
                : idleConfig.spinNanos() + idleConfig.yieldNanos();
        Subscription sub = null;
        ExclusivePublication pub = null;
        DatagramChannel wakeCh = null;
        Selector wakeSel = null;
        Counter sleep = null;
        try {
            if (!remote && options.wakeups() && sleepAfterNanos < Long.MAX_VALUE / 2) {
                try {
                    wakeCh = DatagramChannel.open();
                    wakeCh.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
                    wakeCh.configureBlocking(false);
                    wakeSel = Selector.open();
                    wakeCh.register(wakeSel, SelectionKey.OP_READ);
                    sleep = media.aeron().addCounter(SLEEP_COUNTER_TYPE_ID,
                            "jcomm-mq reader asleep: queue " + Long.toHexString(handle.queueId()) + " rank " + rank);
                } catch (IOException e) {
                    LOG.warn("[{}] no wake-up socket ({}); an idle reader will park instead", ctx("open"), e.toString());
                    CloseHelper.quietCloseAll(wakeSel, wakeCh);
                    wakeCh = null;
                    wakeSel = null;
                }
            }
            int session;
            if (remote) {
                String addr = options.udpAddress();
                sub = media.aeron().addSubscription("aeron:udp?endpoint=" + addr + ":0|control="
                        + handle.udpControlEndpoint() + "|control-mode=dynamic", handle.dataStreamId());
                pub = media.aeron().addExclusivePublication("aeron:udp?endpoint=" + handle.writerControlEndpoint()
                        + "|term-length=" + CONTROL_TERM, handle.controlStreamId());
                session = handle.udpSessionId();
            } else {
                sub = media.aeron().addSubscription("aeron:ipc", handle.dataStreamId());
                pub = media.aeron().addExclusivePublication("aeron:ipc?term-length=" + CONTROL_TERM, handle.controlStreamId());
                session = handle.ipcSessionId();
            }
            Image img;
            // the writer made its streams before it handed out the handle: they connect within
            // milliseconds, unless the writer left the queue's creation (it failed, e.g. because
            // another member of the job died): then do not wait for the whole deadline
            long connectBy = System.nanoTime() + media.options().livenessTimeout().toNanos();
            while (true) {
                img = sub.imageBySessionId(session);
                if (img != null && pub.isConnected()) {
                    break;
                }
                if (System.nanoTime() - connectBy > 0 && !deadline.isExpired()) {
                    throw new CommTimeoutException(context, "the streams of writer rank " + handle.writerRank()
                            + " did not connect within the liveness timeout (" + media.options().livenessTimeout().toMillis()
                            + " ms): the writer left the queue's creation or cannot be reached over "
                            + (remote ? "UDP " + handle.udpControlEndpoint() : "IPC"));
                }
                if (!media.driverAlive()) {
                    throw new PeerFailureException(context, driverOwnerRank, "the media driver in " + media.directory()
                            + " stopped while subscribing");
                }
                if (deadline.isExpired()) {
                    throw new CommTimeoutException(context, "could not reach the writer (rank " + handle.writerRank()
                            + ") over " + (remote ? "UDP " + handle.udpControlEndpoint() : "IPC") + ": data stream "
                            + (img != null ? "connected" : "not connected") + ", control stream "
                            + (pub.isConnected() ? "connected" : "not connected"));
                }
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
            }
            this.dataSub = sub;
            this.controlPub = pub;
            this.image = img;
            this.wakeChannel = wakeCh;
            this.wakeSelector = wakeSel;
            this.sleepCounter = sleep;
            long subPos = remote ? 0xFFFFFFFFL : img.subscriberPositionId() & 0xFFFFFFFFL;
            long sleepId = sleep == null ? 0xFFFFFFFFL : sleep.id() & 0xFFFFFFFFL;
            int wakePort = wakeCh == null ? 0 : ((InetSocketAddress) wakeCh.getLocalAddress()).getPort();
            sendControl(Frames.HELLO, subPos | (sleepId << 32), wakePort, deadline.nanoTime());
        } catch (RuntimeException | IOException e) {
            CloseHelper.quietCloseAll(pub, sub, sleep, wakeSel, wakeCh);
            if (e instanceof IOException) {
                throw new BackendException(context, "cannot set up the wake-up socket: " + e.getMessage(), e);
            }
            throw e instanceof CommException ce ? ce
                    : new BackendException(context, "cannot subscribe to the queue: " + e.getMessage(), e);
        }
    }

    /**
     * Subscribes to the queue described by {@code handle} as reader {@code rank} and says hello to
     * the writer; returns once subscribed (the writer may then send).
     *
     * @param media           this host's media driver client
     * @param handle          from the writer
     * @param rank            this reader's rank (listed in the handle)
     * @param driverOwnerRank rank owning this host's media driver (for error messages; -1 if unknown)
     * @param options         idle strategy, UDP address, codec, maximum message size accepted
     * @param deadline        for subscribing
     */
    public static QueueReader open(AeronMedia media, QueueHandle handle, int rank, int driverOwnerRank,
                                   MessageQueueOptions options, Deadline deadline) {
        Objects.requireNonNull(media, "media");
        Objects.requireNonNull(handle, "handle");
        if (!handle.isReader(rank)) {
            throw new IllegalArgumentException("rank " + rank + " is not a reader of " + handle);
        }
        return new QueueReader(media, handle, rank, driverOwnerRank, options, deadline);
    }

    private ProcessIdentity writerProcess;
    private boolean writerGone;
    private long nextProcessCheck;

    private OpContext ctx(String op) {
        return context.withOperation(op);
    }

    /**
     * Watches the writer's process, when it runs on this host: its exit is noticed at once instead of
     * after the media driver's client liveness timeout.
     */
    public void watchWriterProcess(long pid) {
        writerProcess = ProcessIdentity.watchable(pid);
    }

    /** Whether the watched writer process exited (asked at most every {@value QueueWriter#PROCESS_CHECK_MILLIS} ms). */
    private boolean writerProcessGone() {
        if (writerProcess == null) {
            return false;
        }
        long now = System.nanoTime();
        if (now - nextProcessCheck >= 0) {
            nextProcessCheck = now + java.util.concurrent.TimeUnit.MILLISECONDS.toNanos(QueueWriter.PROCESS_CHECK_MILLIS);
            writerGone = !writerProcess.alive();
        }
        return writerGone;
    }

    /** True if this reader reads over UDP. */
    public boolean isRemote() {
        return remote;
    }

    public QueueHandle handle() {
        return handle;
    }

    /** Sequence number of the last message returned (0 before the first). */
    public long sequence() {
        return assembler.sequence();
    }

    // ---------------------------------------------------------------- dequeue

    /**
     * Waits for the next message and returns a read-only view of it, valid until the next call of
     * {@code dequeue}, {@link #release()} or {@link #close()}. Its length is {@code capacity()}.
     */
    public DirectBuffer dequeue(Deadline deadline) {
        return next(deadline.nanoTime(), "dequeue");
    }

    public DirectBuffer dequeue(Duration timeout) {
        return next(System.nanoTime() + timeout.toNanos(), "dequeue");
    }

    /** The next message, copied. */
    public byte[] dequeueBytes(Duration timeout) {
        return dequeueBytes(Deadline.after(timeout));
    }

    public byte[] dequeueBytes(Deadline deadline) {
        DirectBuffer v = next(deadline.nanoTime(), "dequeue");
        byte[] out = new byte[v.capacity()];
        v.getBytes(0, out);
        release();
        return out;
    }

    /**
     * The next message, decoded with the queue's codec and checked to be of {@code type}. A message
     * that is not an object, does not decode, names an unregistered type or is of another type
     * throws {@link ProtocolException}; it is consumed and the reader stays usable.
     */
    public <T> T dequeueObject(Class<T> type, Deadline deadline) {
        if (codec == null) {
            throw new IllegalStateException("no codec configured (MessageQueueOptions.codec)");
        }
        DirectBuffer v = next(deadline.nanoTime(), "dequeueObject");
        long s = assembler.sequence();
        try {
            if (!assembler.isObject()) {
                throw new ProtocolException(ctx("dequeueObject"), "message " + s + " holds raw bytes, not an object");
            }
            int length = v.capacity();
            byte[] bytes;
            if (assembler.inPlace()) {
                if (scratch.length < length) {
                    scratch = new byte[Math.max(length, 2 * scratch.length)];
                }
                v.getBytes(0, scratch, 0, length);
                bytes = scratch;
            } else {
                bytes = assembler.array();
            }
            try {
                return codec.decode(bytes, 0, length, type);
            } catch (ProtocolException e) {
                throw new ProtocolException(ctx("dequeueObject"), "message " + s + ": " + e.detail(), e);
            }
        } finally {
            release();
        }
    }

    public <T> T dequeueObject(Class<T> type, Duration timeout) {
        return dequeueObject(type, Deadline.after(timeout));
    }

    /** Releases the message returned by {@link #dequeue} (the writer may reuse its space). */
    public void release() {
        if (heldPosition >= 0) {
            image.position(heldPosition);
            consumedSeq = heldSeq;
            consumedPosition = heldPosition;
            heldPosition = -1;
        }
    }

    private DirectBuffer next(long deadlineNanos, String op) {
        failure.rethrow();
        if (closed) {
            throw new CommClosedException(ctx(op), "queue is closed");
        }
        release();
        while (true) {
            result = NONE;
            int n = image.controlledPoll(handler, FRAGMENT_LIMIT);
            if (result == MessageAssembler.MESSAGE) {
                awake();
                if (remote && consumedSeq - ackedSeq >= options.ackInterval()) {
                    sendAck();
                }
                return assembler.message();
            }
            if (frameError != null) {
                throw poison(frameError);
            }
            if (result == MessageAssembler.CLOSED) {
                consumedSeq = assembler.sequence() + 1;
                if (remote) {
                    sendAck();
                }
                throw poison(new CommClosedException(ctx(op), "writer rank " + handle.writerRank()
                        + " closed the queue after " + assembler.sequence() + " messages"));
            }
            if (n > 0) {
                awake();
                continue;
            }
            if (remote && consumedSeq > ackedSeq) {
                sendAck();
            }
            if (closed) {
                throw new CommClosedException(ctx(op), "queue closed");
            }
            if (!media.driverAlive()) {
                int who = driverOwnerRank >= 0 ? driverOwnerRank : handle.writerRank();
                throw poison(new PeerFailureException(ctx(op), who, "the media driver in " + media.directory()
                        + " stopped (owner process " + media.ownerPid() + " died?)", media.clientError()));
            }
            if (writerProcessGone()) {
                throw poison(new PeerFailureException(ctx(op), handle.writerRank(), "the writer's process (pid "
                        + writerProcess.pid() + ") exited after " + assembler.sequence() + " messages"));
            }
            if (image.isClosed() || image.isEndOfStream()) {
                throw poison(new PeerFailureException(ctx(op), handle.writerRank(), "the writer's stream ended without"
                        + " a close message after " + assembler.sequence() + " messages: the writer died or its Aeron "
                        + "client timed out (liveness timeout " + media.options().livenessTimeout().toMillis() + " ms)"));
            }
            if (System.nanoTime() - deadlineNanos >= 0) {
                awake();
                throw new CommTimeoutException(ctx(op), "no message from writer rank " + handle.writerRank()
                        + " in time (last message " + assembler.sequence() + ")");
            }
            waitForData(deadlineNanos);
        }
    }

    /**
     * One idle step: spin and yield as configured; after that a local reader sleeps on its wake-up
     * socket (the writer sends it a datagram when it sees the sleep flag), others park.
     * Protocol: set the flag (a volatile store), poll once more, then block; the writer commits
     * its frame, fences, then reads the flag — so a message is never missed for a whole sleep.
     */
    private void waitForData(long deadlineNanos) {
        if (wakeChannel == null) {
            idle.idle();
            return;
        }
        long now = System.nanoTime();
        if (idleSince < 0) {
            idleSince = now;
        }
        if (now - idleSince < sleepAfterNanos) {
            idle.idle();
            return;
        }
        if (!asleep) {
            sleepCounter.set(1);
            asleep = true;
            return; // poll once more before blocking
        }
        long left = (deadlineNanos - now) / 1_000_000;
        try {
            if (left < 1) {
                LockSupport.parkNanos(Math.max(1_000, deadlineNanos - now));
            } else {
                wakeSelector.select(drainWake, Math.min(SLEEP_SLICE_MS, left));
            }
        } catch (IOException e) {
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
        }
    }

    private void drainWakeups() {
        try {
            do {
                wakeDrain.clear();
            } while (wakeChannel.receive(wakeDrain) != null);
        } catch (IOException ignored) {
            // a wake-up socket error only costs a timed sleep
        }
    }

    private void awake() {
        if (asleep) {
            sleepCounter.set(0);
            asleep = false;
        }
        idleSince = -1;
        idle.reset();
    }

    private Action onFragment(DirectBuffer buffer, int offset, int length, Header header) {
        int r;
        try {
            r = assembler.onFrame(buffer, offset, length);
        } catch (ProtocolException e) {
            frameError = e;
            return Action.ABORT;
        }
        if (r == MessageAssembler.MESSAGE) {
            result = r;
            if (assembler.inPlace()) {
                heldPosition = header.position();
                heldSeq = assembler.sequence();
                return Action.ABORT; // keep the frame in the log (not consumed) while the caller reads it
            }
            consumedSeq = assembler.sequence();
            consumedPosition = header.position();
            return Action.BREAK;
        }
        if (r == MessageAssembler.CLOSED) {
            result = r;
            return Action.BREAK;
        }
        return Action.CONTINUE;
    }

    // ---------------------------------------------------------------- control

    private boolean sendControl(byte type, long a, long b, long deadlineNanos) {
        UnsafeBuffer f = controlFrame;
        f.putByte(TYPE_OFFSET, type);
        f.putByte(FLAGS_OFFSET, (byte) (remote ? MAC : 0));
        f.putShort(VERSION_OFFSET, VERSION, LITTLE_ENDIAN);
        f.putInt(RANK_OFFSET, rank, LITTLE_ENDIAN);
        f.putLong(QUEUE_ID_OFFSET, handle.queueId(), LITTLE_ENDIAN);
        f.putLong(A_OFFSET, a, LITTLE_ENDIAN);
        f.putLong(B_OFFSET, b, LITTLE_ENDIAN);
        int length = CONTROL_LENGTH;
        if (remote) {
            controlMac.reset();
            controlMac.update(f, 0, CONTROL_LENGTH);
            controlMac.finish(f, CONTROL_LENGTH);
            length += MAC_LENGTH;
        }
        while (true) {
            long r = controlPub.offer(f, 0, length);
            if (r > 0) {
                return true;
            }
            if (r == io.aeron.Publication.CLOSED || r == io.aeron.Publication.MAX_POSITION_EXCEEDED
                    || System.nanoTime() - deadlineNanos >= 0) {
                if (type == Frames.HELLO) {
                    throw new CommTimeoutException(ctx("open"), "could not say hello to writer rank "
                            + handle.writerRank() + " (control stream result " + r + ")");
                }
                return false;
            }
            if (type == Frames.ACK) {
                return false; // try again later
            }
            Thread.onSpinWait();
        }
    }

    private void sendAck() {
        if (sendControl(Frames.ACK, consumedSeq, consumedPosition, 0)) {
            ackedSeq = consumedSeq;
        }
    }

    private CommException poison(CommException e) {
        return failure.trip(e);
    }

    /** The exception that broke the reader, or {@code null}. */
    public CommException failure() {
        return failure.first();
    }

    /**
     * Says goodbye to the writer (so that it sees a clean close, not a death) and releases the
     * subscription. Idempotent.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            if (image != null && !image.isClosed()) {
                if (heldPosition >= 0) {
                    consumedSeq = heldSeq;
                    consumedPosition = heldPosition;
                }
                if (media.driverAlive() && controlPub.isConnected()) {
                    boolean sent = sendControl(Frames.BYE, consumedSeq, consumedPosition,
                            System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(200));
                    if (sent && remote && media.ownsDriver()) {
                        lingerUntilSent();
                    }
                }
            }
        } catch (RuntimeException e) {
            LOG.debug("[{}] goodbye not sent: {}", ctx("close"), e.toString());
        } finally {
            CloseHelper.quietCloseAll(controlPub, dataSub, sleepCounter, wakeSelector, wakeChannel);
        }
    }

    /** A remote reader owning its driver waits (bounded) until the driver has sent the goodbye. */
    private void lingerUntilSent() {
        CountersReader c = media.counters();
        int id = c.findByTypeIdAndRegistrationId(AeronCounters.DRIVER_SENDER_POSITION_TYPE_ID, controlPub.registrationId());
        long target = controlPub.position();
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(500);
        while (System.nanoTime() - end < 0) {
            if (id != CountersReader.NULL_COUNTER_ID && c.getCounterValue(id) >= target) {
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(20)); // in flight on the wire
                return;
            }
            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
        }
    }

    @Override
    public String toString() {
        return "QueueReader{rank=" + rank + (remote ? " remote" : " local") + ", " + handle + "}";
    }
}
