package io.jcomm.mq;

import static io.jcomm.mq.internal.Frames.A_OFFSET;
import static io.jcomm.mq.internal.Frames.BEGIN;
import static io.jcomm.mq.internal.Frames.B_OFFSET;
import static io.jcomm.mq.internal.Frames.CHUNK_LENGTH_OFFSET;
import static io.jcomm.mq.internal.Frames.CHUNK_OFFSET_OFFSET;
import static io.jcomm.mq.internal.Frames.CONTROL_LENGTH;
import static io.jcomm.mq.internal.Frames.END;
import static io.jcomm.mq.internal.Frames.FLAGS_OFFSET;
import static io.jcomm.mq.internal.Frames.HEADER_LENGTH;
import static io.jcomm.mq.internal.Frames.MAC;
import static io.jcomm.mq.internal.Frames.MAC_LENGTH;
import static io.jcomm.mq.internal.Frames.OBJECT;
import static io.jcomm.mq.internal.Frames.QUEUE_ID_OFFSET;
import static io.jcomm.mq.internal.Frames.RANK_OFFSET;
import static io.jcomm.mq.internal.Frames.SEQ_OFFSET;
import static io.jcomm.mq.internal.Frames.TOTAL_OFFSET;
import static io.jcomm.mq.internal.Frames.TYPE_OFFSET;
import static io.jcomm.mq.internal.Frames.VERSION;
import static io.jcomm.mq.internal.Frames.VERSION_OFFSET;
import static java.nio.ByteOrder.LITTLE_ENDIAN;

import io.aeron.AeronCounters;
import io.aeron.ExclusivePublication;
import io.aeron.Image;
import io.aeron.Publication;
import io.aeron.Subscription;
import io.aeron.logbuffer.BufferClaim;
import io.aeron.logbuffer.FragmentHandler;
import io.aeron.logbuffer.Header;
import io.jcomm.api.BackendException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.ObjectCodec;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import io.jcomm.runtime.Entropy;
import io.jcomm.runtime.FailureLatch;
import io.jcomm.runtime.shm.ProcessIdentity;
import io.jcomm.runtime.shm.ShmFiles;
import io.jcomm.mq.internal.Frames;
import io.jcomm.mq.internal.HmacSha256;

import java.io.IOException;
import java.lang.invoke.VarHandle;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.DatagramChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import org.agrona.CloseHelper;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import org.agrona.concurrent.status.CountersReader;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The writing end of a queue, opened directly on an {@link AeronMedia} (the collective
 * {@link MessageQueue} builds on it). It publishes one Aeron IPC stream for the readers on its host
 * and, when there are remote readers, one UDP multi-destination stream whose frames carry an
 * HMAC-SHA256 tag per message; it reads the readers' control streams (hello, acknowledgements,
 * goodbye).
 *
 * <p>Lifecycle: {@link #create} publishes and returns at once with a {@link #handle()} to pass to
 * the readers; {@link #awaitReaders} waits until every expected reader said hello (so every reader
 * is subscribed before the first message); then {@link #enqueue} messages.
 *
 * <p>Contract:
 * <ul>
 *   <li>One thread enqueues at a time (not thread safe); {@link #close()} may come from any thread.</li>
 *   <li>Messages are delivered to every reader in order, none lost or duplicated. A message of up to
 *       {@link MessageQueueOptions#maxMessageBytes()} is split into frames as needed.</li>
 *   <li>Backpressure: {@code enqueue} waits for the slowest reader until its deadline, then throws
 *       {@link CommTimeoutException} naming the lagging reader(s). If the timeout hit in the middle
 *       of a multi-frame message the queue is broken (poisoned); before the first frame it is not.</li>
 *   <li>A reader that dies (process killed, Aeron client timed out) makes the next or current call
 *       throw {@link PeerFailureException} naming its rank within about the liveness timeout (2 s);
 *       a reader that closed cleanly makes it throw {@link CommClosedException}. Both poison the
 *       writer: every later call throws the same exception.</li>
 *   <li>Byte payloads are sent without allocation (claims in the Aeron log, reusable buffers).</li>
 * </ul>
 */
public final class QueueWriter implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(QueueWriter.class);
    private static final int CONTROL_FRAGMENT_LIMIT = 32;
    private static final int RING = 1024;
    private static final int CONTROL_TERM = 64 * 1024;

    private final AeronMedia media;
    private final MessageQueueOptions options;
    private final ObjectCodec codec;
    private final QueueHandle handle;
    private final OpContext context;
    private final ExclusivePublication ipcPub;
    private final ExclusivePublication udpPub;
    private final Subscription ipcControl;
    private final Subscription udpControl;
    private final ReaderState[] readers;
    private final BufferClaim claim = new BufferClaim();
    private final UnsafeBuffer wrapper = new UnsafeBuffer(0, 0);
    private final UnsafeBuffer empty = new UnsafeBuffer(new byte[0]);
    private final HmacSha256 dataMac;
    private final HmacSha256 controlMac;
    private final IdleStrategy idle;
    private final int ipcChunk;
    private final int udpChunk;
    private final FragmentHandler ipcControlHandler = (b, o, l, h) -> onControl(b, o, l, h, false);
    private final FragmentHandler udpControlHandler = (b, o, l, h) -> onControl(b, o, l, h, true);
    private final long[] ipcEnd = new long[RING];
    private final CountersReader counters;
    private final int driverOwnerRank;

    private long seq;
    private long rejectedControlFrames;
    private boolean anyWakeable;
    private final ByteBuffer wakeByte = ByteBuffer.allocateDirect(1);
    private long lastCheckNanos = System.nanoTime();
    /** How often a waiting writer asks whether a local reader's process still lives. */
    static final long PROCESS_CHECK_MILLIS = 5;
    /** An enqueue after this long without one checks the readers before sending. */
    private static final long CHECK_INTERVAL_NANOS = TimeUnit.MILLISECONDS.toNanos(1);
    private final FailureLatch failure = new FailureLatch();
    private volatile boolean closed;
    private volatile boolean sending;
    /** A partial message is in the stream or the driver is gone: no close message can follow. */
    private boolean streamBroken;

    private static final class ReaderState {
        final int rank;
        final boolean remote;
        boolean hello;
        boolean bye;
        int sessionId;
        Image image;
        int counterId = -1;
        long counterRegistrationId;
        int sleepCounterId = -1;
        DatagramChannel wake;
        long ackedSeq;
        long ackedPosition;
        /** The reader's process, for readers on this host whose pid is known (see {@link #watchReaderProcesses}). */
        ProcessIdentity process;
        boolean processGone;
        long nextProcessCheck;

        ReaderState(int rank, boolean remote) {
            this.rank = rank;
            this.remote = remote;
        }
    }

    private QueueWriter(AeronMedia media, MessageQueueOptions options, ObjectCodec codec, String groupName, int writerRank,
                        String hostId, List<Integer> localReaders, List<Integer> remoteReaders, int driverOwnerRank) {
        this.media = media;
        this.options = options;
        this.codec = codec;
        this.context = OpContext.of(groupName, writerRank, "create");
        this.idle = options.idleFor(1 + localReaders.size()).newStrategy();
        this.counters = media == null ? null : media.counters();
        this.driverOwnerRank = driverOwnerRank;
        long queueId;
        do {
            queueId = Entropy.nextLong();
        } while (queueId == 0);
        int dataStream = 0x100000 + Entropy.nextInt(0x3FF00000);
        int controlStream = dataStream + 1;

        long needed = 0;
        if (!localReaders.isEmpty()) {
            needed += 3L * options.ipcTermLength() + 4096 + localReaders.size() * (3L * CONTROL_TERM + 4096);
        }
        if (!remoteReaders.isEmpty()) {
            needed += 3L * options.udpTermLength() + 4096 + remoteReaders.size() * (3L * CONTROL_TERM + 4096);
        }
        if (needed > 0) {
            ShmFiles.spaceProblem(media.directory(), needed, ShmFiles.usableBytes(media.directory()),
                    "message queue " + groupName, AeronMedia.SMALLER).ifPresent(msg -> {
                        throw new BackendException(context, msg);
                    });
        }

        ExclusivePublication ipc = null;
        ExclusivePublication udp = null;
        Subscription ipcCtl = null;
        Subscription udpCtl = null;
        try {
            String udpControlEndpoint = "";
            String writerControlEndpoint = "";
            byte[] key = new byte[0];
            if (!localReaders.isEmpty()) {
                ipc = media.aeron().addExclusivePublication("aeron:ipc?term-length=" + options.ipcTermLength()
                        + "|mtu=" + options.ipcMtu(), dataStream);
                ipcCtl = media.aeron().addSubscription("aeron:ipc", controlStream);
            }
            if (!remoteReaders.isEmpty()) {
                key = new byte[32];
                Entropy.nextBytes(key);
                String addr = options.udpAddress();
                long livenessMs = media.options().livenessTimeout().toMillis();
                udp = media.aeron().addExclusivePublication("aeron:udp?control=" + addr + ":0|control-mode=dynamic"
                        + "|term-length=" + options.udpTermLength() + "|mtu=" + options.udpMtu()
                        + "|fc=min,t:" + livenessMs + "ms", dataStream);
                udpCtl = media.aeron().addSubscription("aeron:udp?endpoint=" + addr + ":0", controlStream);
                Deadline d = Deadline.after(Duration.ofSeconds(10));
                while (true) {
                    List<String> pubAddrs = udp.localSocketAddresses();
                    String ctl = udpCtl.resolvedEndpoint();
                    if (!pubAddrs.isEmpty() && ctl != null) {
                        udpControlEndpoint = pubAddrs.get(0);
                        writerControlEndpoint = ctl;
                        break;
                    }
                    if (d.isExpired()) {
                        throw new BackendException(context, "UDP endpoints on " + addr + " did not bind within 10 s");
                    }
                    LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
                }
            }
            this.ipcPub = ipc;
            this.udpPub = udp;
            this.ipcControl = ipcCtl;
            this.udpControl = udpCtl;
            this.handle = new QueueHandle(queueId, groupName, writerRank, hostId, dataStream, controlStream,
                    ipc == null ? 0 : ipc.sessionId(), udp == null ? 0 : udp.sessionId(), udpControlEndpoint,
                    writerControlEndpoint, options.udpTermLength(), options.maxMessageBytes(), key,
                    localReaders, remoteReaders);
            this.dataMac = udp == null ? null : new HmacSha256(key);
            this.controlMac = udp == null ? null : new HmacSha256(key);
            this.ipcChunk = ipc == null ? 0 : ipc.maxPayloadLength() - HEADER_LENGTH;
            this.udpChunk = udp == null ? 0 : udp.maxPayloadLength() - HEADER_LENGTH - MAC_LENGTH;
        } catch (RuntimeException e) {
            CloseHelper.quietCloseAll(ipc, udp, ipcCtl, udpCtl);
            throw e instanceof CommException ? e
                    : new BackendException(context, "cannot create the queue's Aeron publications: " + e.getMessage(), e);
        }
        List<ReaderState> rs = new ArrayList<>();
        for (int r : localReaders) {
            rs.add(new ReaderState(r, false));
        }
        for (int r : remoteReaders) {
            rs.add(new ReaderState(r, true));
        }
        this.readers = rs.toArray(new ReaderState[0]);
    }

    /**
     * Creates the writer's publications and returns at once; pass {@link #handle()} to the readers,
     * then call {@link #awaitReaders}.
     *
     * @param media           this host's media driver client ({@code null} allowed without readers)
     * @param groupName       for error messages
     * @param writerRank      this process's rank
     * @param localReaders    ranks that read on this host (IPC)
     * @param remoteReaders   ranks that read from other hosts (UDP, authenticated)
     * @param driverOwnerRank rank owning the media driver (for error messages; -1 if unknown)
     * @param options         sizes, idle strategy, UDP address; its codec (if any) serves
     *                        {@link #enqueueObject}
     */
    public static QueueWriter create(AeronMedia media, String groupName, int writerRank, List<Integer> localReaders,
                                     List<Integer> remoteReaders, int driverOwnerRank, MessageQueueOptions options) {
        if (media == null && !(localReaders.isEmpty() && remoteReaders.isEmpty())) {
            throw new NullPointerException("media");
        }
        Objects.requireNonNull(options, "options");
        return new QueueWriter(media, options, options.codec(), groupName, writerRank, options.hostId(),
                List.copyOf(localReaders), List.copyOf(remoteReaders), driverOwnerRank);
    }

    /** What the readers need to subscribe (contains the queue's secret key). */
    public QueueHandle handle() {
        return handle;
    }

    /** Sequence number of the last message enqueued (0 before the first). */
    public long sequence() {
        return seq;
    }

    private OpContext ctx(String op) {
        return context.withOperation(op);
    }

    /**
     * Waits until every reader of the handle has said hello (is subscribed and reachable).
     *
     * @throws CommTimeoutException naming the readers still missing
     */
    public void awaitReaders(Deadline deadline) {
        while (true) {
            pollControl();
            List<Integer> missing = new ArrayList<>();
            for (ReaderState r : readers) {
                if (!r.hello) {
                    missing.add(r.rank);
                }
            }
            if (missing.isEmpty()) {
                idle.reset();
                return;
            }
            checkReaders("awaitReaders");
            if (deadline.isExpired()) {
                throw new CommTimeoutException(ctx("awaitReaders"), "readers " + missing
                        + " did not subscribe in time (rejected control frames: " + rejectedControlFrames + ")");
            }
            idle.idle();
        }
    }

    // ---------------------------------------------------------------- enqueue

    /** Enqueues {@code length} bytes of {@code src} at {@code offset}; returns the message's sequence number. */
    public long enqueue(DirectBuffer src, int offset, int length, Deadline deadline) {
        return send(src, offset, length, deadline.nanoTime(), 0);
    }

    /** Enqueues {@code length} bytes of {@code src} at {@code offset}; returns the message's sequence number. */
    public long enqueue(DirectBuffer src, int offset, int length, Duration timeout) {
        return send(src, offset, length, System.nanoTime() + timeout.toNanos(), 0);
    }

    /** Enqueues {@code bytes}; returns the message's sequence number. */
    public long enqueue(byte[] bytes, Duration timeout) {
        wrapper.wrap(bytes);
        return send(wrapper, 0, bytes.length, System.nanoTime() + timeout.toNanos(), 0);
    }

    /** Enqueues {@code bytes}; returns the message's sequence number. */
    public long enqueue(byte[] bytes, Deadline deadline) {
        wrapper.wrap(bytes);
        return send(wrapper, 0, bytes.length, deadline.nanoTime(), 0);
    }

    /**
     * Encodes {@code value} with the queue's codec (its type must be registered) and enqueues it.
     *
     * @throws IllegalArgumentException if the value cannot be encoded (nothing is sent; the queue stays usable)
     */
    public long enqueueObject(Object value, Deadline deadline) {
        if (codec == null) {
            throw new IllegalStateException("no codec configured (MessageQueueOptions.codec)");
        }
        byte[] bytes;
        try {
            bytes = codec.encode(value);
        } catch (IllegalArgumentException e) {
            throw ctx("enqueueObject").invalidArgument(e.getMessage(), e);
        } catch (CommException e) { // a codec that reports an unencodable value as a CommException
            throw ctx("enqueueObject").invalidArgument(e.detail(), e);
        }
        wrapper.wrap(bytes);
        return send(wrapper, 0, bytes.length, deadline.nanoTime(), OBJECT);
    }

    public long enqueueObject(Object value, Duration timeout) {
        return enqueueObject(value, Deadline.after(timeout));
    }

    private long send(DirectBuffer src, int offset, int length, long deadlineNanos, int kind) {
        failure.rethrow();
        if (closed) {
            throw new CommClosedException(ctx("enqueue"), "queue is closed");
        }
        if (length < 0 || length > options.maxMessageBytes()) {
            throw ctx("enqueue").invalidArgument("message of " + length + " bytes exceeds maxMessageBytes "
                    + options.maxMessageBytes());
        }
        if (offset < 0 || offset > src.capacity() - length) {
            throw ctx("enqueue").invalidArgument("range [" + offset + ", +" + length + ") outside a buffer of "
                    + src.capacity() + " bytes");
        }
        long now = System.nanoTime();
        if (now - lastCheckNanos > CHECK_INTERVAL_NANOS) {
            // the writer was idle for a while: a reader may have closed or died meanwhile
            pollControl();
            checkReaders("enqueue");
        }
        long s = seq + 1;
        if (readers.length > 0) {
            sending = true;
            try {
                sendFrames(Frames.DATA, src, offset, length, s, kind, deadlineNanos, "enqueue", false);
            } finally {
                sending = false;
            }
        }
        seq = s;
        if (ipcPub != null) {
            ipcEnd[(int) (s & (RING - 1))] = ipcPub.position();
        }
        // after the commit, so that it does not delay the message: a reader that closed or died
        // since the last call poisons the writer now and the next call throws. A reader that said
        // goodbye after consuming this very message is no failure (yet): it may have read it and
        // closed before this check, and awaitDelivered(s) must then succeed; the next enqueue,
        // which it will not read, throws.
        pollControl();
        try {
            checkReaders("enqueue", s);
        } catch (CommException e) {
            // poisoned; reported by the next call (this message was sent to the readers still there)
        }
        lastCheckNanos = now;
        return s;
    }

    private void sendFrames(byte type, DirectBuffer src, int offset, int length, long s, int kind, long deadlineNanos,
                            String op, boolean closing) {
        boolean ipcDone = ipcPub == null;
        boolean udpDone = udpPub == null;
        int ipcSent = 0;
        int udpSent = 0;
        boolean started = false;
        if (dataMac != null) {
            dataMac.reset();
        }
        while (!ipcDone || !udpDone) {
            boolean progress = false;
            // the first frame goes out on every stream or on none, so that a timeout before it
            // leaves the queue intact
            if (started || (roomForFirstFrame(ipcPub, ipcChunk, length, false)
                    && roomForFirstFrame(udpPub, udpChunk, length, true))) {
                if (!ipcDone) {
                    int n = tryFrame(ipcPub, ipcChunk, null, type, src, offset, length, ipcSent, s, kind, op);
                    if (n >= 0) {
                        ipcSent += n;
                        ipcDone = ipcSent == length;
                        progress = true;
                        // after every frame, not only the first: a reader that caught up with a
                        // back-pressured writer in the middle of a big message may have gone to
                        // sleep (it would otherwise wait for a whole sleep slice; seen as a p99 of
                        // 100 ms for 1 MiB messages). Reading the sleep flags is a few loads.
                        wakeSleepers();
                    }
                }
                if (!udpDone) {
                    int n = tryFrame(udpPub, udpChunk, dataMac, type, src, offset, length, udpSent, s, kind, op);
                    if (n >= 0) {
                        udpSent += n;
                        udpDone = udpSent == length;
                        progress = true;
                    }
                }
            }
            if (progress) {
                started = true;
                idle.reset();
                continue;
            }
            if (closed && !closing) {
                streamBroken |= started;
                throw poison(new CommClosedException(ctx(op), "queue closed while sending message " + s));
            }
            pollControl();
            if (!closing) {
                try {
                    checkReaders(op);
                } catch (CommException e) {
                    streamBroken |= started;
                    throw e;
                }
            } else if (anyReaderGone()) {
                // the close message is a courtesy: a reader that left holds the window until the driver
                // drops it, and the others see the stream end when the publication closes
                throw new CommClosedException(ctx(op), "a reader left before the close message could be sent");
            }
            if (System.nanoTime() - deadlineNanos >= 0) {
                CommTimeoutException e = backPressureTimeout(op, s, started);
                if (started) {
                    streamBroken = true;
                    throw poison(e);
                }
                throw e;
            }
            idle.idle();
        }
    }

    /** True if {@code pub} (if any) has window for the first frame of a message, padding included. */
    private static boolean roomForFirstFrame(ExclusivePublication pub, int chunk, int length, boolean mac) {
        if (pub == null) {
            return true;
        }
        int frame = io.aeron.protocol.DataHeaderFlyweight.HEADER_LENGTH + HEADER_LENGTH + Math.min(chunk, length)
                + (mac ? MAC_LENGTH : 0);
        return pub.availableWindow() >= 2L * org.agrona.BitUtil.align(frame, io.aeron.logbuffer.FrameDescriptor.FRAME_ALIGNMENT);
    }

    /** Writes one frame; returns the chunk length written or -1 if the publication cannot take it now. */
    private int tryFrame(ExclusivePublication pub, int chunk, HmacSha256 mac, byte type, DirectBuffer src, int offset,
                         int length, int sent, long s, int kind, String op) {
        int n = Math.min(chunk, length - sent);
        boolean end = sent + n == length;
        int frameLength = HEADER_LENGTH + n + (mac != null && end ? MAC_LENGTH : 0);
        long r = pub.tryClaim(frameLength, claim);
        if (r <= 0) {
            if (r == Publication.CLOSED) {
                throw poison(new CommClosedException(ctx(op), "the queue's publication was closed"));
            }
            if (r == Publication.MAX_POSITION_EXCEEDED) {
                throw poison(new BackendException(ctx(op), "the queue's stream reached its maximum position"));
            }
            return -1; // back pressured, not connected, admin action: retry
        }
        MutableDirectBuffer b = claim.buffer();
        int o = claim.offset();
        int flags = kind | (sent == 0 ? BEGIN : 0) | (end ? END : 0) | (mac != null ? MAC : 0);
        b.putByte(o + TYPE_OFFSET, type);
        b.putByte(o + FLAGS_OFFSET, (byte) flags);
        b.putShort(o + VERSION_OFFSET, VERSION, LITTLE_ENDIAN);
        b.putInt(o + TOTAL_OFFSET, length, LITTLE_ENDIAN);
        b.putLong(o + SEQ_OFFSET, s, LITTLE_ENDIAN);
        b.putInt(o + CHUNK_OFFSET_OFFSET, sent, LITTLE_ENDIAN);
        b.putInt(o + CHUNK_LENGTH_OFFSET, n, LITTLE_ENDIAN);
        if (n > 0) {
            b.putBytes(o + HEADER_LENGTH, src, offset + sent, n);
        }
        if (mac != null) {
            mac.update(b, o, HEADER_LENGTH + n);
            if (end) {
                mac.finish(b, o + HEADER_LENGTH + n);
            }
        }
        claim.commit();
        return n;
    }

    // ---------------------------------------------------------------- delivery

    /**
     * Waits until every reader has consumed message {@code sequence} (a local reader consumes a
     * message when it calls {@code dequeue} again or releases it; a remote reader when its
     * acknowledgement arrives). The round trip writer → readers → writer.
     *
     * @throws CommTimeoutException naming the readers that have not consumed it
     */
    public void awaitDelivered(long sequence, Deadline deadline) {
        awaitDelivered(sequence, deadline.nanoTime());
    }

    public void awaitDelivered(long sequence, Duration timeout) {
        awaitDelivered(sequence, System.nanoTime() + timeout.toNanos());
    }

    private void awaitDelivered(long sequence, long deadlineNanos) {
        if (sequence < 0 || sequence > seq) {
            throw new IllegalArgumentException("message " + sequence + " was not enqueued (last is " + seq + ")");
        }
        long target = ipcPub == null || sequence == 0 ? 0
                : sequence > seq - RING ? ipcEnd[(int) (sequence & (RING - 1))] : ipcPub.position();
        while (true) {
            failure.rethrow();
            // goodbyes first: a reader that consumed the message and then closed has received it
            pollControl();
            boolean all = true;
            for (ReaderState r : readers) {
                if (!delivered(r, sequence, target)) {
                    all = false;
                    break;
                }
            }
            if (all) {
                idle.reset();
                return;
            }
            if (closed) {
                throw new CommClosedException(ctx("awaitDelivered"), "queue is closed");
            }
            checkReaders("awaitDelivered", sequence);
            if (System.nanoTime() - deadlineNanos >= 0) {
                List<String> behind = new ArrayList<>();
                for (ReaderState r : readers) {
                    if (!delivered(r, sequence, target)) {
                        behind.add("rank " + r.rank + " (" + progress(r) + ")");
                    }
                }
                throw new CommTimeoutException(ctx("awaitDelivered"), "message " + sequence
                        + " not consumed in time by " + String.join(", ", behind));
            }
            idle.idle();
        }
    }

    private boolean delivered(ReaderState r, long sequence, long target) {
        if (r.remote || r.bye) {
            // remote readers acknowledge; a local one's counter is gone after its goodbye, which
            // carries what it consumed
            return r.ackedSeq >= sequence;
        }
        return r.counterId >= 0 && counters.getCounterValue(r.counterId) >= target;
    }

    private long consumedPosition(ReaderState r) {
        if (r.remote) {
            return r.ackedPosition;
        }
        return r.counterId < 0 ? 0 : counters.getCounterValue(r.counterId);
    }

    /** Last message fully consumed by a local reader at stream position {@code position}. */
    private long seqAt(long position) {
        long oldest = Math.max(1, seq - RING + 1);
        for (long s = seq; s >= oldest; s--) {
            if (ipcEnd[(int) (s & (RING - 1))] <= position) {
                return s;
            }
        }
        return oldest - 1;
    }

    private String progress(ReaderState r) {
        if (r.remote) {
            long bytes = udpPub == null ? 0 : udpPub.position() - r.ackedPosition;
            return "acknowledged message " + r.ackedSeq + " of " + seq + ", " + mib(bytes) + " behind";
        }
        long pos = consumedPosition(r);
        long bytes = ipcPub == null ? 0 : ipcPub.position() - pos;
        long done = seqAt(pos);
        return "consumed message " + (done < seq - RING ? "< " + (seq - RING + 1) : Long.toString(done)) + " of " + seq
                + ", " + mib(bytes) + " behind";
    }

    private static String mib(long bytes) {
        return bytes < 1024 ? bytes + " B" : String.format(Locale.ROOT, "%.2f MiB", bytes / 1048576.0);
    }

    private CommTimeoutException backPressureTimeout(String op, long s, boolean partial) {
        long maxLag = 0;
        long[] lags = new long[readers.length];
        for (int i = 0; i < readers.length; i++) {
            ReaderState r = readers[i];
            long head = r.remote ? (udpPub == null ? 0 : udpPub.position()) : (ipcPub == null ? 0 : ipcPub.position());
            lags[i] = Math.max(0, head - consumedPosition(r));
            maxLag = Math.max(maxLag, lags[i]);
        }
        List<String> slow = new ArrayList<>();
        List<String> others = new ArrayList<>();
        Integer[] order = new Integer[readers.length];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        java.util.Arrays.sort(order, (x, y) -> Long.compare(lags[y], lags[x])); // slowest first
        for (int i : order) {
            String d = "rank " + readers[i].rank + " (" + progress(readers[i]) + ")";
            if (maxLag > 0 && lags[i] * 2 >= maxLag) {
                slow.add(d);
            } else {
                others.add(d);
            }
        }
        String msg = "message " + s + " could not be sent in time"
                + (partial ? " (partly sent: the queue is now broken)" : "")
                + (slow.isEmpty() ? ": no reader is behind but the stream does not accept data (not connected?)"
                : ": blocked by slow reader(s) " + String.join(", ", slow))
                + (others.isEmpty() ? "" : "; other readers: " + String.join(", ", others));
        return new CommTimeoutException(ctx(op), msg);
    }

    // ---------------------------------------------------------------- control & liveness

    private void pollControl() {
        if (ipcControl != null) {
            ipcControl.poll(ipcControlHandler, CONTROL_FRAGMENT_LIMIT);
        }
        if (udpControl != null) {
            udpControl.poll(udpControlHandler, CONTROL_FRAGMENT_LIMIT);
        }
    }

    private void drainControl() {
        for (int i = 0; i < 1000; i++) {
            int n = 0;
            if (ipcControl != null) {
                n += ipcControl.poll(ipcControlHandler, CONTROL_FRAGMENT_LIMIT);
            }
            if (udpControl != null) {
                n += udpControl.poll(udpControlHandler, CONTROL_FRAGMENT_LIMIT);
            }
            if (n == 0) {
                return;
            }
        }
    }

    private void onControl(DirectBuffer b, int o, int length, Header header, boolean remote) {
        int expected = remote ? CONTROL_LENGTH + MAC_LENGTH : CONTROL_LENGTH;
        if (length != expected || b.getShort(o + VERSION_OFFSET, LITTLE_ENDIAN) != VERSION
                || b.getLong(o + QUEUE_ID_OFFSET, LITTLE_ENDIAN) != handle.queueId()) {
            rejectedControlFrames++;
            return;
        }
        int flags = b.getByte(o + FLAGS_OFFSET) & 0xFF;
        if (remote) {
            if ((flags & MAC) == 0) {
                rejectedControlFrames++;
                return;
            }
            controlMac.reset();
            controlMac.update(b, o, CONTROL_LENGTH);
            if (!controlMac.verify(b, o + CONTROL_LENGTH)) {
                rejectedControlFrames++;
                LOG.warn("[{}] control frame failing authentication from {} ignored", ctx("control"), header.sessionId());
                return;
            }
        }
        int rank = b.getInt(o + RANK_OFFSET, LITTLE_ENDIAN);
        ReaderState r = null;
        for (ReaderState x : readers) {
            if (x.rank == rank) {
                r = x;
                break;
            }
        }
        if (r == null || r.remote != remote) {
            rejectedControlFrames++;
            return;
        }
        int type = b.getByte(o + TYPE_OFFSET);
        long a = b.getLong(o + A_OFFSET, LITTLE_ENDIAN);
        long v = b.getLong(o + B_OFFSET, LITTLE_ENDIAN);
        if (type == Frames.HELLO) {
            if (r.hello) {
                rejectedControlFrames++;
                return;
            }
            int subPos = (int) a;
            int sleepId = (int) (a >>> 32);
            if (!remote && !validSubscriberCounter(subPos)) {
                rejectedControlFrames++;
                LOG.warn("[{}] hello of rank {} names counter {} that is not a subscriber of this queue",
                        ctx("control"), rank, subPos);
                return;
            }
            Subscription sub = remote ? udpControl : ipcControl;
            r.sessionId = header.sessionId();
            r.image = sub.imageBySessionId(r.sessionId);
            r.counterId = remote ? -1 : subPos;
            r.counterRegistrationId = remote ? 0 : counters.getCounterRegistrationId(subPos);
            if (!remote && sleepId != -1 && v > 0 && v < 65536 && validSleepCounter(sleepId)) {
                try {
                    DatagramChannel ch = DatagramChannel.open();
                    ch.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), (int) v));
                    ch.configureBlocking(false);
                    r.wake = ch;
                    r.sleepCounterId = sleepId;
                    anyWakeable = true;
                } catch (IOException e) {
                    LOG.warn("[{}] cannot reach the wake-up socket of rank {}: {}", ctx("control"), rank, e.toString());
                }
            }
            r.hello = true;
            return;
        }
        if (!r.hello || header.sessionId() != r.sessionId) {
            rejectedControlFrames++;
            return;
        }
        if (type == Frames.ACK || type == Frames.BYE) {
            r.ackedSeq = Math.max(r.ackedSeq, a);
            r.ackedPosition = Math.max(r.ackedPosition, v);
            if (type == Frames.BYE) {
                r.bye = true;
            }
        } else {
            rejectedControlFrames++;
        }
    }

    private boolean validSubscriberCounter(int id) {
        if (id < 0 || id > counters.maxCounterId() || counters.getCounterState(id) != CountersReader.RECORD_ALLOCATED
                || counters.getCounterTypeId(id) != AeronCounters.DRIVER_SUBSCRIBER_POSITION_TYPE_ID) {
            return false;
        }
        int keyOffset = CountersReader.metaDataOffset(id) + CountersReader.KEY_OFFSET;
        int session = counters.metaDataBuffer().getInt(keyOffset + 8);
        int stream = counters.metaDataBuffer().getInt(keyOffset + 12);
        return session == handle.ipcSessionId() && stream == handle.dataStreamId();
    }

    private boolean validSleepCounter(int id) {
        return id >= 0 && id <= counters.maxCounterId() && counters.getCounterState(id) == CountersReader.RECORD_ALLOCATED
                && counters.getCounterTypeId(id) == QueueReader.SLEEP_COUNTER_TYPE_ID;
    }

    /**
     * Wakes the local readers that sleep on their socket. Called after a frame is committed; the
     * full fence orders that commit before the reads of the sleep flags (the reader sets its flag,
     * then polls once more, then sleeps), so a reader never sleeps through a message.
     */
    private void wakeSleepers() {
        if (!anyWakeable) {
            return;
        }
        VarHandle.fullFence();
        for (ReaderState r : readers) {
            if (r.wake != null && counters.getCounterValue(r.sleepCounterId) != 0) {
                wakeByte.clear();
                try {
                    r.wake.write(wakeByte);
                } catch (IOException e) {
                    // the reader is gone or its socket full: it still wakes at the end of its sleep slice
                }
            }
        }
    }

    private boolean localReaderGone(ReaderState r) {
        return (r.counterId >= 0 && (counters.getCounterState(r.counterId) != CountersReader.RECORD_ALLOCATED
                || counters.getCounterRegistrationId(r.counterId) != r.counterRegistrationId)) || processGone(r);
    }

    /**
     * Watches the processes of the readers on this host: a reader whose process exited is taken for
     * gone at once, instead of after the media driver's client liveness timeout. {@code pids} maps
     * reader ranks to pids; ranks not among this writer's local readers are ignored.
     */
    public void watchReaderProcesses(java.util.Map<Integer, Long> pids) {
        for (ReaderState r : readers) {
            Long pid = pids.get(r.rank);
            if (!r.remote && pid != null) {
                r.process = ProcessIdentity.watchable(pid);
            }
        }
    }

    /** Whether a watched reader's process exited (asked at most every {@value #PROCESS_CHECK_MILLIS} ms per reader). */
    private static boolean processGone(ReaderState r) {
        if (r.process == null || r.processGone) {
            return r.processGone;
        }
        long now = System.nanoTime();
        if (now - r.nextProcessCheck >= 0) {
            r.nextProcessCheck = now + TimeUnit.MILLISECONDS.toNanos(PROCESS_CHECK_MILLIS);
            r.processGone = !r.process.alive();
        }
        return r.processGone;
    }

    /** Whether a reader said goodbye, or died (for a closing writer, which need not wait for it). */
    private boolean anyReaderGone() {
        for (ReaderState r : readers) {
            if (r.hello && (r.bye || (r.image != null && r.image.isClosed()) || (!r.remote && localReaderGone(r)))) {
                return true;
            }
        }
        return false;
    }

    /** Throws if a reader closed or died, or the media driver is gone. */
    private void checkReaders(String op) {
        checkReaders(op, Long.MAX_VALUE);
    }

    /**
     * {@link #checkReaders(String)}, except that a reader which said goodbye after consuming message
     * {@code consumed} is fine (waiting for that message, it has received it).
     */
    private void checkReaders(String op, long consumed) {
        failure.rethrow();
        for (ReaderState r : readers) {
            if (!r.hello || (r.bye && r.ackedSeq >= consumed)) {
                continue;
            }
            if (r.bye) {
                throw poison(new CommClosedException(ctx(op), "reader rank " + r.rank + " closed the queue"));
            }
            if ((r.image != null && r.image.isClosed()) || (!r.remote && localReaderGone(r))) {
                drainControl();
                if (r.bye && r.ackedSeq >= consumed) {
                    continue;
                }
                if (r.bye) {
                    throw poison(new CommClosedException(ctx(op), "reader rank " + r.rank + " closed the queue"));
                }
                throw poison(new PeerFailureException(ctx(op), r.rank, r.processGone
                        ? "local reader died: its process (pid " + r.process.pid() + ") exited without a goodbye"
                        : (r.remote ? "remote" : "local") + " reader died: its Aeron "
                        + (r.remote ? "stream went silent" : "client timed out") + " without a goodbye (liveness timeout "
                        + media.options().livenessTimeout().toMillis() + " ms)"));
            }
        }
        if (media != null && !media.driverAlive()) {
            streamBroken = true;
            throw poison(new PeerFailureException(ctx(op), driverOwnerRank, "the media driver in " + media.directory()
                    + " stopped (owner process " + media.ownerPid() + " died?)", media.clientError()));
        }
    }

    private CommException poison(CommException e) {
        return failure.trip(e);
    }

    /** The exception that broke the writer, or {@code null}. */
    public CommException failure() {
        return failure.first();
    }

    /** Ranks that have said hello so far (for diagnostics). */
    public List<Integer> connectedReaders() {
        List<Integer> out = new ArrayList<>();
        for (ReaderState r : readers) {
            if (r.hello) {
                out.add(r.rank);
            }
        }
        return out;
    }

    /**
     * Sends a close message to the readers (they drain what precedes it, then get
     * {@link CommClosedException}), waits up to {@link MessageQueueOptions#closeLinger()} for the
     * remote readers to acknowledge it, and releases the publications. Idempotent.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        long waitEnd = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(200);
        while (sending && System.nanoTime() - waitEnd < 0) {
            LockSupport.parkNanos(TimeUnit.MICROSECONDS.toNanos(100)); // an enqueue on another thread sees 'closed'
        }
        try {
            if (!streamBroken && readers.length > 0 && !sending && media.driverAlive()) {
                long deadline = System.nanoTime() + options.closeLinger().toNanos();
                long s = seq + 1;
                try {
                    sendFrames(Frames.CLOSE, empty, 0, 0, s, 0, deadline, "close", true);
                    boolean waiting = udpPub != null;
                    while (waiting && System.nanoTime() - deadline < 0) {
                        pollControl();
                        waiting = false;
                        for (ReaderState r : readers) {
                            if (r.remote && r.hello && !r.bye && r.ackedSeq < s && r.image != null && !r.image.isClosed()
                                    && !(r.image.isEndOfStream())) {
                                waiting = true;
                            }
                        }
                        if (waiting) {
                            LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(1));
                        }
                    }
                } catch (CommException e) {
                    LOG.debug("[{}] close message not sent: {}", ctx("close"), e.getMessage());
                }
            }
        } finally {
            CloseHelper.quietCloseAll(ipcPub, udpPub, ipcControl, udpControl);
            for (ReaderState r : readers) {
                CloseHelper.quietClose(r.wake);
            }
        }
    }

    @Override
    public String toString() {
        return "QueueWriter{" + handle + ", seq=" + seq + "}";
    }
}
