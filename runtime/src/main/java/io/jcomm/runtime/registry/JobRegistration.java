package io.jcomm.runtime.registry;

import io.jcomm.api.config.Settings;
import io.jcomm.runtime.shm.ProcessIdentity;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Supplier;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps one {@link JobRegistry.Entry} of this process in the host's registry, from a daemon thread:
 * the thread opens the registry (never on the caller's path and, with a {@code notBefore} stage, not
 * before it completes), registers the entry, re-registers it when the group names change (checked
 * every second) and the entry is removed by {@link #close()} or, at exit, by a shutdown hook. Every
 * failure (no {@code /dev/shm}, a directory of another user, a symbolic link in its place) is logged at
 * debug level and ends the registration: the job runs on without it.
 */
public final class JobRegistration implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(JobRegistration.class);
    private static final AtomicInteger SERIALS = new AtomicInteger();
    private static final long CHECK_MILLIS = 1000;
    /** The longest the registration waits for its {@code notBefore} stage. */
    static final long NOT_BEFORE_BOUND_MILLIS = 60_000;

    private final Path directory;
    private final Supplier<List<String>> groups;
    private JobRegistry registry;
    private JobRegistry.Entry entry;
    private Thread hook;
    private boolean closed;

    private JobRegistration(Path directory, JobRegistry.Entry entry, Supplier<List<String>> groups) {
        this.directory = directory;
        this.entry = entry;
        this.groups = groups;
    }

    /**
     * Starts registering a parallel state of this process; returns at once. Null when the registry is
     * disabled ({@code JCOMM_REGISTRY}{@code =off}).
     *
     * @param env          the environment ({@code JCOMM_REGISTRY})
     * @param job          the job's identity ({@link JobRegistry.Entry#jobOf})
     * @param rank         global rank
     * @param worldSize    world size
     * @param recorderFile this process's flight recorder file, or null
     * @param groups       the current group names (called from the registration thread; must be thread safe)
     */
    public static JobRegistration start(Map<String, String> env, String job, int rank, int worldSize, Path recorderFile,
                                        Supplier<List<String>> groups) {
        return start(env, job, rank, worldSize, recorderFile, groups, CompletableFuture.completedFuture(null));
    }

    /**
     * {@link #start(Map, String, int, int, Path, Supplier)} that opens the registry only once
     * {@code notBefore} has completed (either way; at most {@value #NOT_BEFORE_BOUND_MILLIS} ms later),
     * e.g. once every rank of the host has its groups, so that registering stays off the path of ranks
     * still creating groups.
     */
    public static JobRegistration start(Map<String, String> env, String job, int rank, int worldSize, Path recorderFile,
                                        Supplier<List<String>> groups, CompletionStage<?> notBefore) {
        Objects.requireNonNull(groups, "groups");
        Objects.requireNonNull(notBefore, "notBefore");
        Optional<Path> directory = JobRegistry.configuredDirectory(env);
        if (directory.isEmpty()) {
            return null;
        }
        ProcessIdentity me = ProcessIdentity.self();
        JobRegistry.Entry e = new JobRegistry.Entry(job, rank, worldSize, me.pid(), me.startTicks(),
                SERIALS.incrementAndGet(), List.of(), recorderFile == null ? "" : recorderFile.toString(),
                System.currentTimeMillis());
        JobRegistration r = new JobRegistration(directory.get(), e, groups);
        CompletableFuture<?> gate = notBefore.toCompletableFuture();
        gate.whenComplete((v, x) -> r.wake());
        Thread t = new Thread(() -> {
            if (r.awaitGate(gate)) {
                r.run();
            }
        }, "jcomm-registry-r" + rank);
        t.setDaemon(true);
        t.start();
        return r;
    }

    /** The registry directory this registration uses. */
    public Path directory() {
        return directory;
    }

    /** Whether the entry is in the registry now (false while the registry is being opened, or after a failure). */
    public synchronized boolean registered() {
        return registry != null && !closed;
    }

    private synchronized void wake() {
        notifyAll();
    }

    /** Waits for {@code gate} (bounded); false when closed meanwhile. */
    private synchronized boolean awaitGate(CompletableFuture<?> gate) {
        long end = System.nanoTime() + NOT_BEFORE_BOUND_MILLIS * 1_000_000L;
        try {
            while (!closed && !gate.isDone()) {
                long left = (end - System.nanoTime()) / 1_000_000L;
                if (left <= 0) {
                    break;
                }
                wait(left);
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
        return !closed;
    }

    private void run() {
        JobRegistry opened;
        try {
            opened = JobRegistry.open(directory);
        } catch (RuntimeException e) {
            LOG.debug("not registered in the job registry {}: {}", directory, e.toString());
            return;
        }
        try {
            synchronized (this) {
                if (closed) {
                    opened.close();
                    return;
                }
                entry = withGroups(entry, groups.get());
                opened.register(entry);
                registry = opened;
                hook = new Thread(this::removeAtExit, "jcomm-registry-exit");
                Runtime.getRuntime().addShutdownHook(hook);
            }
            LOG.debug("registered rank {} of {} in {}", entry.rank(), entry.job(), directory);
            while (true) {
                synchronized (this) {
                    wait(CHECK_MILLIS);
                    if (closed) {
                        return;
                    }
                    List<String> now = groups.get();
                    if (!now.equals(entry.groups())) {
                        entry = withGroups(entry, now);
                        registry.register(entry);
                    }
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (RuntimeException e) {
            LOG.debug("job registry {} failed: {}", directory, e.toString());
            close();
        }
    }

    private static JobRegistry.Entry withGroups(JobRegistry.Entry e, List<String> groups) {
        return new JobRegistry.Entry(e.job(), e.rank(), e.worldSize(), e.pid(), e.startTicks(), e.serial(),
                groups.stream().sorted().toList(), e.recorderFile(), e.registeredMillis());
    }

    private synchronized void removeAtExit() {
        if (registry != null && !closed) {
            try {
                registry.remove(entry);
            } catch (RuntimeException e) {
                // readers clean the entry of a dead pid
            }
        }
    }

    /** Removes the entry and closes the registry; stops a registration still waiting to open it. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        notifyAll();
        if (registry == null) {
            return;
        }
        try {
            registry.remove(entry);
        } catch (RuntimeException e) {
            LOG.debug("could not remove rank {} from {}: {}", entry.rank(), directory, e.toString());
        }
        try {
            registry.close();
        } catch (RuntimeException e) {
            LOG.debug("could not close {}: {}", directory, e.toString());
        }
        if (hook != null) {
            try {
                Runtime.getRuntime().removeShutdownHook(hook);
            } catch (IllegalStateException e) {
                // shutting down
            }
        }
    }
}
