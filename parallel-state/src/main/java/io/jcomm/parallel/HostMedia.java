package io.jcomm.parallel;

import io.jcomm.api.store.PrefixStore;
import io.jcomm.api.store.Store;
import io.jcomm.mq.AeronMedia;
import io.jcomm.parallel.internal.JobKeys;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;

/**
 * One Aeron media driver per host for every broadcaster of a {@link ParallelState}, started as
 * soon as the host topology is known and in the background: the lowest rank of each host launches
 * it and publishes its directory through the store; the other ranks of the host attach to it. Every
 * broadcaster of this process then uses the same client, so creating a broadcaster needs neither a
 * driver launch nor a client connect. Closed after the groups (the launching rank waits, bounded,
 * for the other clients to leave).
 */
final class HostMedia implements AutoCloseable {

    private static final String READY = "ok ";
    private static final String FAILED = "failed ";

    /** Longest wait in {@link #close()} for the background thread (a cold launch takes about a second). */
    private static final Duration JOIN_BOUND = Duration.ofSeconds(10);

    private final CompletableFuture<AeronMedia> media = new CompletableFuture<>();
    /** The background thread's own store client, once open (not the job's store). */
    private volatile Store lane;
    private volatile Thread thread;
    /** How long {@link #close()} waits for the background thread: the job timeout, at most {@link #JOIN_BOUND}. */
    private final Duration joinBound;

    private HostMedia(Duration timeout) {
        this.joinBound = timeout.compareTo(JOIN_BOUND) < 0 ? timeout : JOIN_BOUND;
    }

    /**
     * Starts (leader) or attaches (others) on a background thread. Collective over the world: every
     * rank starts it at the same point, with the same {@code driver} name.
     *
     * @param lanes          opens a store client of the background thread's own
     * @param afterHostReady the leader launches only once every rank of its host has started this
     *                       (called when its groups are ready): launching costs tens of milliseconds
     *                       of CPU that ranks still creating groups should not lose
     */
    static HostMedia start(GroupFactory factory, HostTopology topology, String driver, Function<Store, Store> lanes,
                           boolean afterHostReady) {
        HostMedia hm = new HostMedia(factory.timeout);
        int rank = factory.config.rank();
        boolean leader = topology.ranksOnHostOf(rank).get(0) == rank;
        String key = JobKeys.media(driver, topology.nodeRankOf(rank));
        AeronMedia.Options mo = factory.mediaOptions(Math.max(1, topology.ranksOnHostOf(rank).size()));
        Thread t = new Thread(() -> {
            AeronMedia m = null;
            try {
                Store lane = lanes.apply(factory.rawStore);
                if (lane != factory.rawStore) {
                    hm.lane = lane;
                }
                try {
                    Store store = new PrefixStore(factory.options.storePrefix(), lane);
                    if (afterHostReady && !leader) {
                        store.set(JobKeys.mediaReady(driver, rank), new byte[] {1});
                    }
                    if (afterHostReady && leader) {
                        List<String> keys = new ArrayList<>();
                        for (int r : topology.ranksOnHostOf(rank)) {
                            if (r != rank) {
                                keys.add(JobKeys.mediaReady(driver, r));
                            }
                        }
                        if (!keys.isEmpty()) {
                            store.wait(keys, factory.timeout);
                        }
                    }
                    if (leader) {
                        try {
                            m = AeronMedia.launch(mo);
                        } catch (RuntimeException e) {
                            // the host's other ranks fail at once instead of at their deadline
                            store.set(key, (FAILED + e.getMessage()).getBytes(StandardCharsets.UTF_8));
                            throw e;
                        }
                        store.set(key, (READY + m.directory()).getBytes(StandardCharsets.UTF_8));
                    } else {
                        String v = new String(store.get(key, factory.timeout), StandardCharsets.UTF_8);
                        if (v.startsWith(FAILED) || !v.startsWith(READY) || v.length() > 4096) {
                            throw new io.jcomm.api.BackendException(null, "the media driver of this host (rank "
                                    + topology.ranksOnHostOf(rank).get(0) + ") did not start: "
                                    + (v.startsWith(FAILED) ? v.substring(FAILED.length()) : "malformed answer"));
                        }
                        m = AeronMedia.attach(Path.of(v.substring(READY.length())), mo);
                    }
                } finally {
                    if (lane != factory.rawStore) {
                        lane.close();
                    }
                }
                if (!hm.media.complete(m)) {
                    m.close(); // closed meanwhile
                }
            } catch (Throwable e) {
                if (m != null) {
                    m.close();
                }
                hm.media.completeExceptionally(e);
            }
        }, "jcomm-ps-media");
        t.setDaemon(true);
        hm.thread = t;
        t.start();
        return hm;
    }

    /** The media once ready (or failed). */
    CompletableFuture<AeronMedia> future() {
        return media;
    }

    /**
     * Closes the media, waiting (bounded) for a launch or attach under way: the driver and its
     * directory must be gone when the state's close returns, even if the process exits right after.
     */
    @Override
    public void close() {
        close(false);
    }

    /**
     * {@link #close()}; with {@code abort} (the job failed) the driver stops without waiting for the
     * host's other clients ({@link AeronMedia#abort()}).
     */
    void close(boolean abort) {
        media.completeExceptionally(new IllegalStateException("closed"));
        Store l = lane;
        if (l != null) {
            l.close(); // a wait for the host's ranks or for the leader's answer ends at once
        }
        Thread t = thread;
        if (t != null && t != Thread.currentThread()) {
            try {
                t.join(joinBound.toMillis()); // a launch that completes now closes what it made
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        media.whenComplete((m, e) -> {
            if (m != null) {
                if (abort) {
                    m.abort();
                } else {
                    m.close();
                }
            }
        });
    }
}
