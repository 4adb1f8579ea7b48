package io.jcomm.mq;

import io.jcomm.api.BackendException;
import io.jcomm.api.CommException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.mq.internal.Handshake;
import io.jcomm.mq.internal.Handshake.Peer;
import io.jcomm.mq.internal.Handshake.Step;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.agrona.CloseHelper;
import org.agrona.DirectBuffer;

/**
 * A one-writer, many-reader broadcast queue over a CPU group (vLLM's {@code MessageQueue}, with
 * liveness, a safe codec and bounded waits): the writer rank enqueues messages of any size up to
 * {@link MessageQueueOptions#maxMessageBytes()}; every other rank of the group dequeues all of them,
 * in order. Readers on the writer's host read shared memory (Aeron IPC, no copy for messages that fit
 * one frame); readers on other hosts read Aeron UDP with an HMAC-SHA256 per message under a random
 * key that the writer distributes through the group.
 *
 * <h2>Creation ({@link #create}, collective)</h2>
 * Every rank of the group calls {@code create} with the same writer rank. The ranks exchange host
 * ids ({@link MessageQueueOptions#hostId()}; {@link MessageQueueOptions#forceRemote()} makes a rank
 * look like another host); the lowest rank of each host starts the host's media driver (or uses the
 * supplied one); the writer publishes and broadcasts a {@link QueueHandle}; the readers subscribe;
 * a final collective step returns only when every reader is subscribed, so the first message reaches
 * everyone. A failure on any rank makes {@code create} fail on every rank with the reason.
 *
 * <h2>Use</h2>
 * <ul>
 *   <li>Writer: {@link #enqueue}, {@link #enqueueObject}, {@link #awaitDelivered}. Readers:
 *       {@link #dequeue} (zero-copy view valid until the next dequeue), {@link #dequeueBytes},
 *       {@link #dequeueObject}. Calling a method of the other role throws
 *       {@link IllegalStateException}.</li>
 *   <li>Every call is bounded: the overloads without a timeout use the queue's default
 *       ({@link MessageQueueOptions#timeout()}, else the group's).</li>
 *   <li>Failures: see {@link QueueWriter} and {@link QueueReader}: backpressure timeout naming the
 *       slow reader(s), {@link io.jcomm.api.PeerFailureException} naming a dead peer within about 2 s,
 *       {@link io.jcomm.api.CommClosedException} after a clean close,
 *       {@link io.jcomm.api.ProtocolException} for bad bytes or types.</li>
 *   <li>One thread per rank uses the queue; {@link #close()} may be called from any thread.</li>
 * </ul>
 */
public final class MessageQueue implements AutoCloseable {

    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(MessageQueue.class);

    private final String groupName;
    private final int rank;
    private final int writerRank;
    private final Duration defaultTimeout;
    private final QueueWriter writer;
    private final QueueReader reader;
    private final AeronMedia ownedMedia;
    private final QueueHandle handle;

    private MessageQueue(String groupName, int rank, int writerRank, Duration defaultTimeout, QueueWriter writer,
                         QueueReader reader, AeronMedia ownedMedia, QueueHandle handle) {
        this.groupName = groupName;
        this.rank = rank;
        this.writerRank = writerRank;
        this.defaultTimeout = defaultTimeout;
        this.writer = writer;
        this.reader = reader;
        this.ownedMedia = ownedMedia;
        this.handle = handle;
    }

    /**
     * Creates the queue collectively: every rank of {@code group} calls this with the same
     * {@code writerRank}.
     *
     * @param group      the CPU group (its object collectives carry the handshake)
     * @param writerRank group rank of the writer
     * @param options    sizes, idle strategy, host identity, media driver
     * @throws CommException if any rank fails (the message names the rank and reason), or on timeout
     */
    public static MessageQueue create(ProcessGroup group, int writerRank, MessageQueueOptions options) {
        Objects.requireNonNull(group, "group");
        Objects.requireNonNull(options, "options");
        MessageQueueOptions opts = options.toBuilder()
                .codec(options.codec() != null ? options.codec() : group.codec())
                .timeout(options.timeout() != null ? options.timeout() : group.defaultTimeout()).build();
        return create(QueueExchange.over(group), writerRank, opts);
    }

    /**
     * Creates the queue collectively through {@code exchange} (for example through the job's store,
     * beside a group that other threads keep using): every rank of the exchange calls this with the
     * same {@code writerRank}. {@link MessageQueueOptions#timeout()} is required; without
     * {@link MessageQueueOptions#codec()} only the byte methods work.
     *
     * @throws CommException if any rank fails (the message names the rank and reason), or on timeout
     */
    public static MessageQueue create(QueueExchange exchange, int writerRank, MessageQueueOptions options) {
        Objects.requireNonNull(exchange, "exchange");
        Objects.requireNonNull(options, "options");
        if (options.timeout() == null) {
            throw new IllegalArgumentException("MessageQueueOptions.timeout() is required");
        }
        int size = exchange.size();
        int rank = exchange.rank();
        String groupName = exchange.groupName();
        OpContext ctx = OpContext.of(groupName, rank, "createMessageQueue");
        if (writerRank < 0 || writerRank >= size) {
            throw ctx.invalidArgument("writer rank " + writerRank + " not in [0, " + size + ")");
        }
        Duration timeout = options.timeout();
        MessageQueueOptions opts = options;
        Deadline deadline = Deadline.after(timeout);
        long t0 = System.nanoTime();

        // 1. who is where
        String hostId = options.hostId() + (options.forceRemote() && rank != writerRank ? "#remote-rank-" + rank : "");
        List<Peer> peers = decodeAll(exchange.allGather(Handshake.encode(new Peer(hostId, ProcessHandle.current().pid())),
                deadline), Peer.class);
        String writerHost = peers.get(writerRank).hostId();
        List<Integer> local = new ArrayList<>();
        List<Integer> remote = new ArrayList<>();
        Map<String, Integer> ownerOfHost = new LinkedHashMap<>();
        for (int r = 0; r < size; r++) {
            ownerOfHost.putIfAbsent(peers.get(r).hostId(), r);
            if (r != writerRank) {
                (peers.get(r).hostId().equals(writerHost) ? local : remote).add(r);
            }
        }
        int myOwner = ownerOfHost.get(hostId);
        if (options.idle() == null) {
            int onMyHost = 0;
            for (Peer p : peers) {
                onMyHost += p.hostId().equals(hostId) ? 1 : 0;
            }
            opts = opts.toBuilder().idle(options.idleFor(onMyHost)).build();
        }

        AeronMedia ownedMedia = null;
        AeronMedia media = null;
        QueueWriter writer = null;
        QueueReader reader = null;
        try {
            // 2. one media driver per host: its lowest rank launches it (or brings the supplied one)
            boolean needsMedia = size > 1;
            Step mediaStep = Step.ok("", null);
            RuntimeException mine = null;
            if (needsMedia && rank == myOwner) {
                try {
                    if (options.media() != null) {
                        media = options.media();
                    } else if (options.aeronDirectory() != null) {
                        media = ownedMedia = AeronMedia.attach(options.aeronDirectory(), options.mediaOptions());
                    } else {
                        long reserve = rank == writerRank ? 3L * opts.ipcTermLength() + 3L * opts.udpTermLength()
                                : 3L * opts.udpTermLength();
                        media = ownedMedia = AeronMedia.launch(options.mediaOptions().toBuilder().reserveBytes(reserve).build());
                    }
                    mediaStep = Step.ok(media.directory().toString(), null);
                } catch (RuntimeException e) {
                    mediaStep = Step.failed(e);
                    mine = e;
                }
            }
            long t1 = System.nanoTime();
            List<Step> mediaSteps = exchange(exchange, mediaStep, deadline);
            throwIfFailed(ctx, mediaSteps, "starting the media driver", mine);
            if (needsMedia && rank != myOwner) {
                Path ownerDir = Path.of(mediaSteps.get(myOwner).text());
                if (options.media() != null) {
                    media = options.media();
                    if (!media.directory().toAbsolutePath().equals(ownerDir.toAbsolutePath())) {
                        throw new BackendException(ctx, "ranks of one host must share one media driver: rank " + myOwner
                                + " uses " + ownerDir + " but this rank was given " + media.directory());
                    }
                } else {
                    media = ownedMedia = AeronMedia.attach(ownerDir, options.mediaOptions());
                }
            }

            // 3. the writer publishes and broadcasts the handle
            long t2 = System.nanoTime();
            Step handleStep = Step.ok("", null);
            if (rank == writerRank) {
                try {
                    writer = QueueWriter.create(media, groupName, rank, local, remote, myOwner, opts);
                    Map<Integer, Long> pids = new java.util.HashMap<>();
                    for (int r : local) {
                        pids.put(r, peers.get(r).pid());
                    }
                    writer.watchReaderProcesses(pids);
                    handleStep = Step.ok("", writer.handle().encode());
                } catch (RuntimeException e) {
                    handleStep = Step.failed(e);
                    mine = e;
                }
            }
            // everyone's contribution but the writer's is empty: a broadcast
            Step got = Handshake.decode(exchange.allGather(Handshake.encode(handleStep), deadline).get(writerRank),
                    Step.class);
            if (got.isError()) {
                if (mine != null) {
                    throw mine;
                }
                throw new BackendException(ctx, "rank " + writerRank + " (writer) failed: " + got.error());
            }
            QueueHandle handle = QueueHandle.decode(got.payload());

            // 4. readers subscribe (and say hello)
            long t3 = System.nanoTime();
            Step openStep = Step.ok("", null);
            if (rank != writerRank) {
                try {
                    reader = QueueReader.open(media, handle, rank, myOwner, opts, deadline);
                    if (writerHost.equals(hostId)) {
                        reader.watchWriterProcess(peers.get(writerRank).pid());
                    }
                } catch (RuntimeException e) {
                    openStep = Step.failed(e);
                    mine = e;
                }
            }
            throwIfFailed(ctx, exchange(exchange, openStep, deadline), "subscribing", mine);

            // 5. the writer has heard from every reader: ready
            long t4 = System.nanoTime();
            Step readyStep = Step.ok("", null);
            if (writer != null) {
                try {
                    writer.awaitReaders(deadline);
                } catch (RuntimeException e) {
                    readyStep = Step.failed(e);
                    mine = e;
                }
            }
            throwIfFailed(ctx, exchange(exchange, readyStep, deadline), "waiting for the readers", mine);
            if (LOG.isDebugEnabled()) {
                LOG.debug("group {} rank {}: message queue in {} ms (peers {}, media {}, publish {}, subscribe {}, readers {})",
                        groupName, rank, ms(System.nanoTime() - t0), ms(t1 - t0), ms(t2 - t1), ms(t3 - t2), ms(t4 - t3),
                        ms(System.nanoTime() - t4));
            }
            return new MessageQueue(groupName, rank, writerRank, timeout, writer, reader, ownedMedia, handle);
        } catch (RuntimeException e) {
            CloseHelper.quietCloseAll(reader, writer, ownedMedia);
            throw e;
        }
    }

    private static String ms(long nanos) {
        return String.format(java.util.Locale.ROOT, "%.2f", nanos / 1e6);
    }

    private static <T> List<T> decodeAll(List<byte[]> all, Class<T> type) {
        List<T> out = new ArrayList<>(all.size());
        for (byte[] b : all) {
            out.add(Handshake.decode(b, type));
        }
        return out;
    }

    private static List<Step> exchange(QueueExchange exchange, Step mine, Deadline deadline) {
        return decodeAll(exchange.allGather(Handshake.encode(mine), deadline), Step.class);
    }

    /** After a step: rethrows this rank's own failure, or fails naming the ranks that failed. */
    private static void throwIfFailed(OpContext ctx, List<Step> steps, String what, RuntimeException mine) {
        if (mine != null) {
            throw mine;
        }
        List<String> errors = new ArrayList<>();
        for (int r = 0; r < steps.size(); r++) {
            if (steps.get(r).isError()) {
                errors.add("rank " + r + ": " + steps.get(r).error());
            }
        }
        if (!errors.isEmpty()) {
            throw new BackendException(ctx, "other ranks failed " + what + ": " + String.join("; ", errors));
        }
    }

    // ---------------------------------------------------------------- identity

    public String groupName() {
        return groupName;
    }

    /** This process's rank in the group. */
    public int rank() {
        return rank;
    }

    public int writerRank() {
        return writerRank;
    }

    public boolean isWriter() {
        return writer != null;
    }

    /** True if this rank is a reader on another host than the writer (UDP). */
    public boolean isRemoteReader() {
        return reader != null && reader.isRemote();
    }

    /** Readers on the writer's host. */
    public List<Integer> localReaders() {
        return handle.localReaders();
    }

    /** Readers on other hosts. */
    public List<Integer> remoteReaders() {
        return handle.remoteReaders();
    }

    public QueueHandle handle() {
        return handle;
    }

    public Duration defaultTimeout() {
        return defaultTimeout;
    }

    private QueueWriter w() {
        if (writer == null) {
            throw new IllegalStateException("rank " + rank + " is a reader; only the writer (rank " + writerRank + ") enqueues");
        }
        return writer;
    }

    private QueueReader r() {
        if (reader == null) {
            throw new IllegalStateException("rank " + rank + " is the writer; readers dequeue");
        }
        return reader;
    }

    // ---------------------------------------------------------------- writer

    /** Enqueues {@code bytes}; returns the message's sequence number (from 1). */
    public long enqueue(byte[] bytes) {
        return w().enqueue(bytes, defaultTimeout);
    }

    public long enqueue(byte[] bytes, Duration timeout) {
        return w().enqueue(bytes, timeout);
    }

    public long enqueue(byte[] bytes, Deadline deadline) {
        return w().enqueue(bytes, deadline);
    }

    /** Enqueues {@code length} bytes of {@code src} from {@code offset} without allocating. */
    public long enqueue(DirectBuffer src, int offset, int length, Duration timeout) {
        return w().enqueue(src, offset, length, timeout);
    }

    public long enqueue(DirectBuffer src, int offset, int length, Deadline deadline) {
        return w().enqueue(src, offset, length, deadline);
    }

    /** Encodes {@code value} with the codec (type must be registered) and enqueues it. */
    public long enqueueObject(Object value) {
        return w().enqueueObject(value, defaultTimeout);
    }

    public long enqueueObject(Object value, Duration timeout) {
        return w().enqueueObject(value, timeout);
    }

    public long enqueueObject(Object value, Deadline deadline) {
        return w().enqueueObject(value, deadline);
    }

    /** Waits until every reader consumed message {@code sequence}. */
    public void awaitDelivered(long sequence, Duration timeout) {
        w().awaitDelivered(sequence, timeout);
    }

    public void awaitDelivered(long sequence) {
        w().awaitDelivered(sequence, defaultTimeout);
    }

    // ---------------------------------------------------------------- reader

    /** The next message as a zero-copy view, valid until the next dequeue or {@link #release()}. */
    public DirectBuffer dequeue() {
        return r().dequeue(defaultTimeout);
    }

    public DirectBuffer dequeue(Duration timeout) {
        return r().dequeue(timeout);
    }

    public DirectBuffer dequeue(Deadline deadline) {
        return r().dequeue(deadline);
    }

    /** The next message, copied. */
    public byte[] dequeueBytes() {
        return r().dequeueBytes(defaultTimeout);
    }

    public byte[] dequeueBytes(Duration timeout) {
        return r().dequeueBytes(timeout);
    }

    /** The next message decoded as {@code type}. */
    public <T> T dequeueObject(Class<T> type) {
        return r().dequeueObject(type, defaultTimeout);
    }

    public <T> T dequeueObject(Class<T> type, Duration timeout) {
        return r().dequeueObject(type, timeout);
    }

    /** Releases the message returned by {@link #dequeue}. */
    public void release() {
        r().release();
    }

    /**
     * Closes this rank's end: the writer sends a close message (readers drain, then get
     * {@link io.jcomm.api.CommClosedException}); a reader says goodbye. A media driver this queue
     * started is stopped once the host's other clients have left (bounded). Idempotent.
     */
    @Override
    public void close() {
        CloseHelper.quietCloseAll(writer, reader, ownedMedia);
    }

    @Override
    public String toString() {
        return "MessageQueue{group=" + groupName + ", rank=" + rank + (writer != null ? " writer" : reader.isRemote()
                ? " remote reader" : " local reader") + ", " + handle + "}";
    }
}
