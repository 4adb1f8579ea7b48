package io.jcomm.kvcache;

import io.jcomm.api.CommException;
import io.jcomm.api.store.Store;
import io.jcomm.kvcache.internal.Directory;
import io.jcomm.transfer.TransferAgent;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Sends one instance's (one rank's) KV events to every subscriber ({@link KvEventSubscriber}) listed in
 * a store shared by the hosts, as kv-transfer notifications (authenticated by the job token when one is
 * configured), in batches of at most a notification's size:
 *
 * <ul>
 *   <li>a subscriber first gets a snapshot of what this publisher holds (from the {@code snapshot}
 *       supplier: its stored blocks), then the events as they come;</li>
 *   <li>a send that fails, or events dropped because the bounded queue was full, make the subscriber
 *       get a fresh snapshot next time instead (events are idempotent: a snapshot and the events
 *       around it leave the subscriber with the publisher's state);</li>
 *   <li>a subscriber that keeps failing for {@link #DROP_AFTER} rounds is dropped;</li>
 *   <li>{@link #close()} sends {@link KvEvent.Cleared} (best effort) and withdraws the publisher.</li>
 * </ul>
 *
 * One daemon thread sends, every {@code period} or sooner when a batch fills; {@link #publish} never
 * blocks. Thread safe.
 */
public final class KvEventPublisher implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(KvEventPublisher.class);
    /** Consecutive failed rounds after which a subscriber is dropped. */
    public static final int DROP_AFTER = 50;
    private static final Duration DISCOVER_EVERY = Duration.ofMillis(200);

    private final TransferAgent agent;
    private final Directory publishersDir;
    private final String name;
    private final String host;
    private final Supplier<List<KvEvent>> snapshot;
    private final Duration period;
    private final Duration sendTimeout;
    private final int maxBatchBytes;
    private final ArrayBlockingQueue<KvEvent> queue;
    private final AtomicBoolean overflow = new AtomicBoolean();
    private final Map<String, Sub> subs = new LinkedHashMap<>();
    private final AtomicLong sentBatches = new AtomicLong();
    private final AtomicLong sentRounds = new AtomicLong();
    private final Object roundLock = new Object();
    private final long publisherIndex;
    private final Thread thread;
    private volatile boolean running = true;
    /** Subscribers listed since the last discovery. */
    private final Directory.Reader newSubscribers;
    private long lastDiscover;

    private static final class Sub {
        long seq;
        boolean needsSnapshot = true;
        int failures;
    }

    private KvEventPublisher(TransferAgent agent, Store store, String namespace, String host, Supplier<List<KvEvent>> snapshot,
                             Duration period, int queueCapacity) {
        this.agent = Objects.requireNonNull(agent, "agent");
        this.name = agent.name();
        this.host = Objects.requireNonNull(host, "host");
        this.snapshot = Objects.requireNonNull(snapshot, "snapshot");
        this.period = period;
        this.sendTimeout = Duration.ofSeconds(2);
        this.maxBatchBytes = Math.min(agent.options().maxNotificationBytes(), 60 << 10);
        this.queue = new ArrayBlockingQueue<>(queueCapacity);
        this.newSubscribers = new Directory(store, namespace + "/kv-events/subscribers").reader();
        this.publishersDir = new Directory(store, namespace + "/kv-events/publishers");
        this.publisherIndex = publishersDir.add(name);
        this.thread = new Thread(this::loop, "jcomm-kv-events-" + name);
        this.thread.setDaemon(true);
        this.thread.start();
    }

    /**
     * Starts publishing as {@code agent} (its name is the publisher's), listing itself in
     * {@code store} under {@code namespace}.
     *
     * @param host          the host's identity, carried in every batch
     * @param snapshot      what this publisher holds now, as stored events (called on the sending thread)
     * @param period        how often queued events go out
     * @param queueCapacity events kept between rounds; beyond, subscribers get a snapshot instead
     */
    public static KvEventPublisher start(TransferAgent agent, Store store, String namespace, String host,
                                         Supplier<List<KvEvent>> snapshot, Duration period, int queueCapacity) {
        if (queueCapacity < 1 || period.isNegative() || period.isZero()) {
            throw new IllegalArgumentException("queueCapacity " + queueCapacity + ", period " + period);
        }
        return new KvEventPublisher(agent, store, namespace, host, snapshot, period, queueCapacity);
    }

    /** The publisher's name (its agent's). */
    public String name() {
        return name;
    }

    /** Queues an event; never blocks (a full queue turns into snapshots for every subscriber). */
    public void publish(KvEvent e) {
        Objects.requireNonNull(e, "event");
        if (!queue.offer(e)) {
            overflow.set(true);
        }
    }

    /** Batches sent so far. */
    public long sentBatches() {
        return sentBatches.get();
    }

    /** Subscribers being served now. */
    public synchronized int subscribers() {
        return subs.size();
    }

    /**
     * Waits until every event queued before this call has been through a sending round (sent, or turned
     * into a snapshot to be sent), up to {@code timeout}.
     *
     * @return whether it had
     */
    public boolean flush(Duration timeout) {
        long target = sentRounds.get() + 2;
        long end = System.nanoTime() + timeout.toNanos();
        synchronized (roundLock) {
            while (sentRounds.get() < target && running) {
                long left = end - System.nanoTime();
                if (left <= 0) {
                    return false;
                }
                try {
                    roundLock.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return false;
                }
            }
        }
        return sentRounds.get() >= target;
    }

    private void loop() {
        List<KvEvent> drained = new ArrayList<>();
        while (running) {
            try {
                KvEvent first = queue.poll(period.toNanos(), TimeUnit.NANOSECONDS);
                if (first != null) {
                    drained.add(first);
                    queue.drainTo(drained);
                }
                round(drained);
            } catch (InterruptedException e) {
                break;
            } catch (RuntimeException e) {
                LOG.debug("KV events of {}: {}", name, e.toString());
            } finally {
                drained.clear();
                sentRounds.incrementAndGet();
                synchronized (roundLock) {
                    roundLock.notifyAll();
                }
            }
        }
    }

    private synchronized void round(List<KvEvent> drained) {
        long now = System.nanoTime();
        if (now - lastDiscover > DISCOVER_EVERY.toNanos() || subs.isEmpty()) {
            lastDiscover = now;
            try {
                List<String> found = newSubscribers.added(sendTimeout);
                for (String s : found) {
                    if (!s.isEmpty()) {
                        subs.putIfAbsent(s, new Sub());
                    }
                }
            } catch (CommException e) {
                LOG.debug("KV events of {}: the store did not answer: {}", name, e.toString());
            }
        }
        if (overflow.getAndSet(false)) {
            for (Sub s : subs.values()) {
                s.needsSnapshot = true;
            }
        }
        List<KvEvent> snap = null;
        for (var it = subs.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<String, Sub> en = it.next();
            Sub s = en.getValue();
            boolean ok;
            if (s.needsSnapshot) {
                if (snap == null) {
                    snap = snapshot.get();
                }
                ok = send(en.getKey(), s, snap, true);
                s.needsSnapshot = !ok;
            } else {
                ok = drained.isEmpty() || send(en.getKey(), s, drained, false);
                s.needsSnapshot = !ok;
            }
            if (ok) {
                s.failures = 0;
            } else if (++s.failures >= DROP_AFTER) {
                LOG.debug("KV events of {}: dropping subscriber {}", name, en.getKey());
                it.remove();
            }
        }
    }

    /** Sends {@code events} in batches; the first of a snapshot is flagged (even when there are no events). */
    private boolean send(String to, Sub s, List<KvEvent> events, boolean snapshotFirst) {
        int header = KvEventBatch.headerSize(name, host);
        List<KvEvent> batch = new ArrayList<>();
        int bytes = header;
        boolean flag = snapshotFirst;
        try {
            for (KvEvent e : events) {
                int n = KvEventBatch.encodedSize(e);
                if (!batch.isEmpty() && (bytes + n > maxBatchBytes || batch.size() >= KvEventBatch.MAX_EVENTS)) {
                    notify(to, new KvEventBatch(name, host, s.seq++, flag, batch));
                    flag = false;
                    batch.clear();
                    bytes = header;
                }
                batch.add(e);
                bytes += n;
            }
            if (!batch.isEmpty() || flag) {
                notify(to, new KvEventBatch(name, host, s.seq++, flag, batch));
            }
            return true;
        } catch (CommException e) {
            LOG.debug("KV events of {} to {}: {}", name, to, e.toString());
            return false;
        }
    }

    private void notify(String to, KvEventBatch b) {
        agent.notify(to, b.encode(), sendTimeout).await();
        sentBatches.incrementAndGet();
    }

    /** Sends {@link KvEvent.Cleared} to the subscribers (best effort, bounded), withdraws, stops. Idempotent. */
    @Override
    public void close() {
        if (!running) {
            return;
        }
        running = false;
        thread.interrupt();
        try {
            thread.join(5000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        synchronized (this) {
            for (Map.Entry<String, Sub> en : subs.entrySet()) {
                send(en.getKey(), en.getValue(), List.of(new KvEvent.Cleared()), false);
            }
            subs.clear();
        }
        try {
            publishersDir.withdraw(publisherIndex);
        } catch (CommException e) {
            // the store is gone
        }
    }
}
