package io.jcomm.kvcache;

import io.jcomm.api.CommException;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.store.Store;
import io.jcomm.kvcache.internal.Directory;
import io.jcomm.transfer.Notification;
import io.jcomm.transfer.TransferAgent;
import java.time.Duration;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Receives the KV events of every {@link KvEventPublisher} listed in a store and applies them to a
 * {@link PrefixTree}: what a router (or a process reusing other hosts' blocks) knows. It lists its
 * agent as a subscriber, then takes every notification of that agent (give it an agent of its own);
 * a malformed batch is counted and dropped.
 *
 * <p>One daemon thread; thread safe.
 */
public final class KvEventSubscriber implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(KvEventSubscriber.class);

    private final TransferAgent agent;
    private final Directory publishersDir;
    private final Directory subscribersDir;
    private final PrefixTree tree;
    private final long index;
    private final Set<String> snapshotted = new HashSet<>();
    private final AtomicLong batches = new AtomicLong();
    private final AtomicLong malformed = new AtomicLong();
    private final Thread thread;
    private volatile boolean running = true;

    private KvEventSubscriber(TransferAgent agent, Store store, String namespace, PrefixTree tree) {
        this.agent = agent;
        this.tree = tree;
        this.publishersDir = new Directory(store, namespace + "/kv-events/publishers");
        this.subscribersDir = new Directory(store, namespace + "/kv-events/subscribers");
        this.thread = new Thread(this::loop, "jcomm-kv-subscriber-" + agent.name());
        this.thread.setDaemon(true);
        this.thread.start();
        this.index = subscribersDir.add(agent.name());
    }

    /** Subscribes {@code agent} (which it then owns the notifications of) under {@code namespace}, into {@code tree}. */
    public static KvEventSubscriber start(TransferAgent agent, Store store, String namespace, PrefixTree tree) {
        return new KvEventSubscriber(agent, store, namespace, tree);
    }

    public PrefixTree tree() {
        return tree;
    }

    private void loop() {
        while (running) {
            Optional<Notification> n = agent.pollNotification(Duration.ofMillis(100));
            if (n.isEmpty()) {
                continue;
            }
            try {
                KvEventBatch b = KvEventBatch.decode(n.get().payload());
                if (!b.publisher().equals(n.get().from())) {
                    throw new ProtocolException("a batch of " + b.publisher() + " from agent " + n.get().from());
                }
                tree.apply(b);
                batches.incrementAndGet();
                if (b.snapshot()) {
                    synchronized (snapshotted) {
                        snapshotted.add(b.publisher());
                        snapshotted.notifyAll();
                    }
                }
            } catch (ProtocolException e) {
                malformed.incrementAndGet();
                LOG.debug("KV events: dropped a malformed batch from {}: {}", n.get().from(), e.getMessage());
            }
        }
    }

    /** The publishers listed now (withdrawn ones left out). */
    public List<String> publishers(Duration timeout) {
        return publishersDir.names(timeout);
    }

    /**
     * Waits until a snapshot from each of {@code publishers} has been applied.
     *
     * @return whether every one came within {@code timeout}
     */
    public boolean awaitSnapshots(Collection<String> publishers, Duration timeout) {
        long end = System.nanoTime() + timeout.toNanos();
        synchronized (snapshotted) {
            while (!snapshotted.containsAll(publishers)) {
                long left = end - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                try {
                    snapshotted.wait(Math.max(1, left / 1_000_000));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
            return true;
        }
    }

    /** Batches applied. */
    public long batches() {
        return batches.get();
    }

    /** Batches dropped as malformed. */
    public long malformed() {
        return malformed.get();
    }

    /** Withdraws the subscription and stops. Idempotent. */
    @Override
    public void close() {
        if (!running) {
            return;
        }
        running = false;
        try {
            subscribersDir.withdraw(index);
        } catch (CommException e) {
            // the store is gone
        }
        try {
            thread.join(2000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
