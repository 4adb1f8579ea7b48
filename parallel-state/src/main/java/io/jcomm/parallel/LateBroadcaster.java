package io.jcomm.parallel;

import io.jcomm.api.BackendException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.OpContext;
import io.jcomm.api.store.PrefixStore;
import io.jcomm.api.store.Store;
import io.jcomm.mq.AeronMedia;
import io.jcomm.mq.MessageQueue;
import io.jcomm.mq.MessageQueueOptions;
import io.jcomm.mq.QueueExchange;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A group's broadcaster made after the group is ready: on a thread of its own, through the store
 * (not the group's CPU group, which the application is already using), once the host's media
 * driver is up. Until every rank has it, the group broadcasts over its CPU group or node-local
 * channel; the writer then says so in-band ({@link GroupCoordinator}), and from the next broadcast
 * on every rank uses the queue. A failure here only means the broadcasts stay where they are.
 */
final class LateBroadcaster implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(LateBroadcaster.class);

    private final String group;
    private final CompletableFuture<MessageQueue> queue = new CompletableFuture<>();
    /** The background thread's own store client (not the job's), once open. */
    private volatile Store lane;
    private volatile boolean closed;
    /** The host's media driver the queue is made on (null: the queue makes its own). */
    private final CompletableFuture<AeronMedia> media;
    /** How often {@link #await} looks whether the media driver died meanwhile. */
    private static final long MEDIA_CHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(10);

    private LateBroadcaster(String group, CompletableFuture<AeronMedia> media) {
        this.group = group;
        this.media = media;
    }

    /**
     * Starts making the broadcaster of {@code spec} (writer: group rank 0). Collective over the
     * group's members, each calling it once the group exists.
     *
     * @param media     the host's shared media driver, or null: the queue then starts (lowest
     *                  member of each host) or attaches to one of its own
     * @param keyPrefix the store namespace of this queue's handshake, the same on every member and
     *                  used once
     * @param lanes     opens a store client of the background thread's own (or returns the store)
     */
    static LateBroadcaster start(GroupFactory factory, GroupFactory.Spec spec, CompletableFuture<AeronMedia> media,
                                 String keyPrefix, Function<Store, Store> lanes) {
        LateBroadcaster b = new LateBroadcaster(spec.name(), media);
        int rank = spec.ranks().indexOf(factory.config.rank());
        int size = spec.ranks().size();
        Duration timeout = factory.timeout;
        Thread t = new Thread(() -> {
            long t0 = System.nanoTime();
            Store own = null;
            try {
                AeronMedia m = media == null ? null : media.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
                own = lanes.apply(factory.rawStore);
                if (own != factory.rawStore) {
                    b.lane = own;
                }
                if (b.closed) {
                    throw new IllegalStateException("closed");
                }
                Store store = new PrefixStore(factory.options.storePrefix(), own);
                MessageQueueOptions mo = factory.options.messageQueueOptions().toBuilder()
                        .hostId(factory.config.hostId()).codec(factory.codec).timeout(timeout).media(m).build();
                MessageQueue q = MessageQueue.create(QueueExchange.overStore(store, keyPrefix, spec.name(), rank, size), 0, mo);
                if (!b.queue.complete(q)) {
                    q.close(); // closed meanwhile
                } else {
                    LOG.debug("group {} rank {}: broadcaster ready {} ms after the group", spec.name(), rank,
                            String.format("%.2f", (System.nanoTime() - t0) / 1e6));
                }
            } catch (Throwable e) {
                Throwable c = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
                if (!b.closed) {
                    LOG.info("group {} rank {}: no broadcaster ({}); broadcasts stay on the CPU group", spec.name(), rank,
                            c.toString());
                }
                b.queue.completeExceptionally(c);
            } finally {
                if (own != null && own != factory.rawStore) {
                    own.close();
                }
            }
        }, "jcomm-ps-broadcaster-" + spec.name());
        t.setDaemon(true);
        t.start();
        return b;
    }

    /** True once this rank's queue exists (the writer switches when its own is ready: everyone's then is, or is about to be). */
    boolean ready() {
        return queue.isDone() && !queue.isCompletedExceptionally();
    }

    /** The queue if ready, else null. */
    MessageQueue now() {
        return ready() ? queue.getNow(null) : null;
    }

    /**
     * This rank's queue, waiting up to {@code timeout} for it: the writer has switched, so every
     * rank's creation succeeded or is finishing.
     *
     * @throws BackendException     if it failed here
     * @throws CommTimeoutException if it is not ready in time
     */
    MessageQueue take(OpContext ctx, Duration timeout) {
        try {
            return queue.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (ExecutionException e) {
            throw new BackendException(ctx, "the writer switched to the broadcaster, but this rank's failed: "
                    + e.getCause(), e.getCause());
        } catch (TimeoutException e) {
            throw new CommTimeoutException(ctx, "the writer switched to the broadcaster, but this rank's was not ready within "
                    + timeout.toMillis() + " ms");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new io.jcomm.api.CommException(ctx, "interrupted waiting for the broadcaster", e);
        }
    }

    /**
     * Waits up to {@code timeout} for the queue; null if it failed, cannot be made any more (the host's
     * media driver died: its owner process exited), or is not ready in time.
     */
    MessageQueue await(Duration timeout) {
        long end = System.nanoTime() + timeout.toNanos();
        while (true) {
            long left = end - System.nanoTime();
            if (left <= 0) {
                return null;
            }
            try {
                return queue.get(Math.min(left, MEDIA_CHECK_NANOS), TimeUnit.NANOSECONDS);
            } catch (TimeoutException e) {
                if (mediaDied()) {
                    return null; // the creation waits for a dead driver's answers until its own timeout
                }
            } catch (ExecutionException e) {
                return null;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return null;
            }
        }
    }

    private boolean mediaDied() {
        if (media == null || !media.isDone() || media.isCompletedExceptionally()) {
            return false;
        }
        AeronMedia m = media.getNow(null);
        return m != null && !m.driverAlive();
    }

    /** Aborts a creation under way (its store client is closed) or closes the queue. Idempotent. */
    @Override
    public void close() {
        closed = true;
        queue.completeExceptionally(new IllegalStateException("group " + group + " destroyed"));
        Store l = lane;
        if (l != null) {
            l.close(); // this thread's own client: a blocked handshake fails at once
        }
        queue.whenComplete((q, e) -> {
            if (q != null) {
                q.close();
            }
        });
    }
}
