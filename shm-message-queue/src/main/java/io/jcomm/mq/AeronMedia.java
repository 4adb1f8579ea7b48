package io.jcomm.mq;

import io.aeron.Aeron;
import io.aeron.AeronCounters;
import io.aeron.driver.MediaDriver;
import io.aeron.driver.ThreadingMode;
import io.aeron.exceptions.DriverTimeoutException;
import io.jcomm.api.BackendException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.runtime.shm.ProcessIdentity;
import io.jcomm.runtime.shm.ShmFiles;
import io.jcomm.mq.internal.Handshake;
import io.jcomm.mq.internal.Handshake.Peer;
import io.jcomm.mq.internal.Handshake.Step;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.locks.LockSupport;
import org.agrona.concurrent.status.CountersReader;
import org.agrona.concurrent.ringbuffer.RingBufferDescriptor;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The Aeron media driver of this host for a job, and this process's Aeron client of it.
 *
 * <p>{@link #launch(Options)} starts an <em>embedded</em> driver owned by this process in
 * {@code <baseDir>/jcomm-aeron-<tag>-<pid>-<random>/aeron}, inside a fresh {@code 0700} job directory
 * holding an owner marker (default base {@code /dev/shm}), sized to fit a container's 64 MiB {@code /dev/shm}: small counters and
 * ring buffers, a 2 s client/image liveness timeout, one shared driver thread that yields for
 * 200 µs after its last work (so that UDP round trips do not wait for it to wake) and then parks
 * for up to 4 ms (an idle driver costs ~2 % of a core; 1 ms would cost ~5 %). Before creating anything it removes stale directories of dead
 * owners ({@link #cleanStale}) and checks free space. {@link #attach(Path, Options)} only connects a
 * client to a driver that another process (the first local rank, or a launcher) owns.
 *
 * <p>{@link #close()} closes the client; the owner then waits (bounded by
 * {@link Options#ownerLinger()}) until every other client of the driver has gone, stops the driver
 * and deletes the directory. A JVM shutdown hook does the same on {@code SIGTERM}; after
 * {@code kill -9} the directory is removed by the next {@link #cleanStale} on the host.
 *
 * <p>Death of the driver (its owner process died) is seen by attached clients within about the
 * liveness timeout: {@link #driverAlive()} turns false.
 *
 * <p>Thread safe. One instance can serve many queues of the process.
 */
public final class AeronMedia implements AutoCloseable {

    /** Prefix of every directory this class creates (and the only ones it ever deletes). */
    public static final String DIR_PREFIX = "jcomm-aeron-";
    /** What to lower when shared memory is short (for {@link ShmFiles#spaceProblem}). */
    static final String SMALLER = "smaller term lengths (MessageQueueOptions.ipcTermLength/udpTermLength)";

    private static final Logger LOG = LoggerFactory.getLogger(AeronMedia.class);

    /** Name of the Aeron directory inside the job directory. */
    public static final String AERON_SUBDIR = "aeron";

    private final Options options;
    private final Path directory;
    private final Path jobDirectory;
    private final MediaDriver driver;
    private final Aeron aeron;
    private final long ownerPid;
    private final AtomicBoolean closed = new AtomicBoolean();
    private final Thread shutdownHook;
    private volatile boolean driverTimedOut;
    private volatile Throwable clientError;
    /** The driver owner's process, for an attached client whose owner is known (its exit = the driver's death). */
    private final ProcessIdentity owner;
    private volatile long nextOwnerCheck;
    /** How often {@link #driverAlive()} asks whether the driver owner's process still lives. */
    private static final long OWNER_CHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(5);

    private AeronMedia(Options options, Path directory, MediaDriver driver, ProcessIdentity ownerId) {
        this.options = options;
        this.directory = directory;
        this.jobDirectory = jobDirectoryOf(directory);
        this.driver = driver;
        this.ownerPid = ownerId == null ? -1L : ownerId.pid();
        this.owner = driver == null && ownerId != null && ownerId.alive() ? ownerId : null;
        Aeron client = null;
        try {
            Aeron.Context ctx = new Aeron.Context()
                    .aeronDirectoryName(directory.toString())
                    .clientName("jcomm-mq")
                    .driverTimeoutMs(options.livenessTimeout.toMillis())
                    .keepAliveIntervalNs(Math.min(TimeUnit.MILLISECONDS.toNanos(500), options.livenessTimeout.toNanos() / 4))
                    .preTouchMappedMemory(true)
                    .threadFactory(daemon("jcomm-aeron-client"))
                    .errorHandler(this::onClientError);
            client = Aeron.connect(ctx);
        } catch (RuntimeException e) {
            if (driver != null) {
                driver.close();
                ShmFiles.deleteRecursively(jobDirectory != null ? jobDirectory : directory);
            }
            throw new BackendException(null, "cannot connect an Aeron client to the media driver in " + directory
                    + ": " + e.getMessage(), e);
        }
        this.aeron = client;
        if (driver != null) {
            this.shutdownHook = new Thread(this::shutdownNow, "jcomm-aeron-shutdown");
            Runtime.getRuntime().addShutdownHook(shutdownHook);
        } else {
            this.shutdownHook = null;
        }
    }

    /**
     * Starts an embedded media driver owned by this process, after removing stale directories of
     * dead owners and checking free space.
     *
     * @throws BackendException if the base directory lacks space (the message says what to do) or
     *                          the driver does not start
     */
    public static AeronMedia launch(Options options) {
        Objects.requireNonNull(options, "options");
        Path base = options.baseDir;
        if (!Files.isDirectory(base)) {
            throw new BackendException(null, "shared-memory directory " + base + " does not exist; "
                    + "set AeronMedia.Options.baseDir to a tmpfs directory");
        }
        List<Path> stale = cleanStale(base);
        if (!stale.isEmpty()) {
            LOG.info("removed {} stale media-driver director{} of dead processes: {}", stale.size(),
                    stale.size() == 1 ? "y" : "ies", stale);
        }
        long needed = options.driverFileBytes() + options.reserveBytes;
        ShmFiles.spaceProblem(base, needed, ShmFiles.usableBytes(base), "the Aeron media driver", AeronMedia.SMALLER)
                .ifPresent(msg -> {
                    throw new BackendException(null, msg);
                });
        Path jobDir = ShmFiles.createOwnedDirectory(base, DIR_PREFIX, options.tag);
        Path dir = jobDir.resolve(AERON_SUBDIR);
        MediaDriver driver;
        try {
            long liveness = options.livenessTimeout.toNanos();
            MediaDriver.Context ctx = new MediaDriver.Context()
                    .aeronDirectoryName(dir.toString())
                    .dirDeleteOnStart(false)
                    .dirDeleteOnShutdown(true)
                    .warnIfDirectoryExists(false)
                    .printConfigurationOnStart(false)
                    .threadingMode(options.threadingMode)
                    .sharedThreadFactory(daemon("jcomm-aeron-driver"))
                    .sharedNetworkThreadFactory(daemon("jcomm-aeron-net"))
                    .conductorThreadFactory(daemon("jcomm-aeron-conductor"))
                    .senderThreadFactory(daemon("jcomm-aeron-sender"))
                    .receiverThreadFactory(daemon("jcomm-aeron-receiver"))
                    .sharedIdleStrategy(options.driverIdle.newStrategy())
                    .sharedNetworkIdleStrategy(options.driverIdle.newStrategy())
                    .conductorIdleStrategy(options.driverIdle.newStrategy())
                    .senderIdleStrategy(options.driverIdle.newStrategy())
                    .receiverIdleStrategy(options.driverIdle.newStrategy())
                    // the driver's async executor (name resolution) polls with its own idle strategy: Aeron's
                    // default parks 1 ms, ~1.5 % of a core on an idle rank; ours parks up to the driver's maximum
                    .asyncExecutorThreadFactory(daemon("jcomm-aeron-executor"))
                    .asyncExecutorIdleStrategy(options.driverIdle.newStrategy())
                    .clientLivenessTimeoutNs(liveness)
                    .imageLivenessTimeoutNs(liveness)
                    .publicationConnectionTimeoutNs(liveness)
                    .publicationUnblockTimeoutNs(liveness * 2)
                    .flowControlReceiverTimeoutNs(liveness)
                    .publicationLingerTimeoutNs(TimeUnit.MILLISECONDS.toNanos(100))
                    .timerIntervalNs(Math.min(TimeUnit.MILLISECONDS.toNanos(100), liveness / 10))
                    .driverTimeoutMs(options.livenessTimeout.toMillis())
                    .conductorBufferLength(options.ringBufferLength + RingBufferDescriptor.TRAILER_LENGTH)
                    .toClientsBufferLength(options.ringBufferLength
                            + org.agrona.concurrent.broadcast.BroadcastBufferDescriptor.TRAILER_LENGTH)
                    .counterValuesBufferLength(options.counterValuesLength)
                    .errorBufferLength(options.errorBufferLength)
                    .lossReportBufferLength(options.lossReportLength)
                    .initialWindowLength(options.udpWindowLength)
                    .socketRcvbufLength(options.udpWindowLength)
                    .socketSndbufLength(options.udpWindowLength)
                    .ipcTermBufferLength(64 * 1024)
                    .publicationTermBufferLength(64 * 1024)
                    .termBufferSparseFile(false)
                    .performStorageChecks(true)
                    .errorHandler(t -> LOG.warn("media driver in {}: {}", dir, t.toString()));
            driver = MediaDriver.launch(ctx);
        } catch (RuntimeException e) {
            ShmFiles.deleteRecursively(jobDir);
            throw new BackendException(null, "cannot start the Aeron media driver in " + dir + ": " + e.getMessage(), e);
        }
        return new AeronMedia(options, dir, driver, ProcessIdentity.self());
    }

    /**
     * Connects to the driver another process owns in {@code directory} (waiting up to the liveness
     * timeout for it to be ready).
     */
    public static AeronMedia attach(Path directory, Options options) {
        Objects.requireNonNull(directory, "directory");
        Path job = jobDirectoryOf(directory);
        ProcessIdentity owner = job == null ? null : ShmFiles.readOwner(job).orElse(null);
        return new AeronMedia(options, directory, null, owner);
    }

    /** The enclosing job directory if {@code aeronDir} is one of ours ({@code <base>/jcomm-aeron-*}/aeron), else null. */
    private static Path jobDirectoryOf(Path aeronDir) {
        Path parent = aeronDir.toAbsolutePath().getParent();
        if (parent != null && aeronDir.getFileName().toString().equals(AERON_SUBDIR)
                && parent.getFileName() != null && parent.getFileName().toString().startsWith(DIR_PREFIX)) {
            return parent;
        }
        return null;
    }

    /**
     * Collectively starts one media driver per host for the whole group (typically the world group,
     * once per job): the lowest rank of each host (by {@code hostId}) launches it, the others attach.
     * Pass the result to any number of queues with {@link MessageQueueOptions.Builder#media}; close
     * the queues first, then this. Every rank of {@code group} must call it.
     *
     * @throws io.jcomm.api.CommException if any rank fails (every rank fails, naming it)
     */
    public static AeronMedia forGroup(ProcessGroup group, String hostId, Options options) {
        Objects.requireNonNull(group, "group");
        Objects.requireNonNull(hostId, "hostId");
        OpContext ctx = OpContext.of(group.name(), group.rank(), "createMedia");
        Deadline deadline = Deadline.after(group.defaultTimeout());
        List<byte[]> hosts = group.allGatherObject(Handshake.encode(
                new Peer(hostId, ProcessHandle.current().pid())), byte[].class, deadline.remaining());
        int owner = -1;
        for (int r = 0; r < hosts.size() && owner < 0; r++) {
            if (Handshake.decode(hosts.get(r), Peer.class).hostId().equals(hostId)) {
                owner = r;
            }
        }
        AeronMedia mine = null;
        Step step = Step.ok("", null);
        RuntimeException failure = null;
        if (owner == group.rank()) {
            try {
                mine = launch(options);
                step = Step.ok(mine.directory().toString(), null);
            } catch (RuntimeException e) {
                failure = e;
                step = Step.failed(e);
            }
        }
        List<byte[]> steps;
        try {
            steps = group.allGatherObject(Handshake.encode(step), byte[].class, deadline.remaining());
        } catch (RuntimeException e) {
            if (mine != null) {
                mine.close();
            }
            throw e;
        }
        if (failure != null) {
            throw failure;
        }
        List<String> errors = new ArrayList<>();
        for (int r = 0; r < steps.size(); r++) {
            Step st = Handshake.decode(steps.get(r),
                    Step.class);
            if (st.isError()) {
                errors.add("rank " + r + ": " + st.error());
            }
        }
        if (!errors.isEmpty()) {
            if (mine != null) {
                mine.close();
            }
            throw new BackendException(ctx, "other ranks failed starting their host's media driver: " + String.join("; ", errors));
        }
        if (mine != null) {
            return mine;
        }
        String dir = Handshake.decode(steps.get(owner), Step.class).text();
        return attach(Path.of(dir), options);
    }

    /**
     * Removes {@code baseDir/jcomm-aeron-*} directories whose owner process is dead (pid and start
     * time from the marker file). Returns what was removed; never touches other names.
     */
    public static List<Path> cleanStale(Path baseDir) {
        return ShmFiles.cleanStale(baseDir, DIR_PREFIX);
    }

    private static ThreadFactory daemon(String name) {
        return r -> {
            Thread t = new Thread(r, name);
            t.setDaemon(true);
            return t;
        };
    }

    private void onClientError(Throwable t) {
        if (t instanceof DriverTimeoutException) {
            driverTimedOut = true;
        }
        if (clientError == null) {
            clientError = t;
        }
        if (!closed.get()) {
            LOG.debug("Aeron client in {}: {}", directory, t.toString());
        }
    }

    /** The Aeron client (shared by every queue using this media). */
    public Aeron aeron() {
        return aeron;
    }

    /** The Aeron directory (what {@link #attach} takes). */
    public Path directory() {
        return directory;
    }

    /** The enclosing {@code 0700} job directory with the owner marker, or {@code null} for a foreign driver. */
    public Path jobDirectory() {
        return jobDirectory;
    }

    /** True if this process runs the driver. */
    public boolean ownsDriver() {
        return driver != null;
    }

    /** Pid of the driver's owner process ({@code -1} if unknown). */
    public long ownerPid() {
        return ownerPid;
    }

    public Options options() {
        return options;
    }

    /** This client's id (the key of its heartbeat counter in the driver). */
    public long clientId() {
        return aeron.clientId();
    }

    /** The driver's counters (positions, heartbeats). */
    public CountersReader counters() {
        return aeron.countersReader();
    }

    /**
     * False once the driver stopped answering or its owner process exited (seen within a few
     * milliseconds, not at the client's driver timeout), or this client was closed.
     */
    public boolean driverAlive() {
        if (driverTimedOut || aeron.isClosed()) {
            return false;
        }
        if (owner != null) {
            long now = System.nanoTime();
            if (now - nextOwnerCheck >= 0) {
                nextOwnerCheck = now + OWNER_CHECK_NANOS;
                if (!owner.alive()) {
                    driverTimedOut = true;
                    return false;
                }
            }
        }
        return true;
    }

    /** The first error the Aeron client reported, or {@code null}. */
    public Throwable clientError() {
        return clientError;
    }

    /** Number of clients of the driver other than this one (from the driver's heartbeat counters). */
    public int otherClients() {
        CountersReader c = counters();
        long self = aeron.clientId();
        int[] n = {0};
        c.forEach((counterId, typeId, key, label) -> {
            if (typeId == AeronCounters.DRIVER_HEARTBEAT_TYPE_ID && key.getLong(0) != self) {
                n[0]++;
            }
        });
        return n[0];
    }

    /**
     * Closes the client; the owner waits (bounded) for the other clients to leave, stops the driver
     * and deletes the directory. Attached clients whose driver owner died delete the orphaned
     * directory. Idempotent.
     */
    @Override
    public void close() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        if (driver != null) {
            long end = System.nanoTime() + options.ownerLinger.toNanos();
            try {
                while (!aeron.isClosed() && otherClients() > 0 && System.nanoTime() - end < 0) {
                    LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(5));
                }
            } catch (RuntimeException e) {
                // counters unreadable: stop waiting
            }
        }
        shutdownNow();
        if (shutdownHook != null) {
            try {
                Runtime.getRuntime().removeShutdownHook(shutdownHook);
            } catch (IllegalStateException e) {
                // JVM shutting down: the hook runs (and finds everything closed)
            }
        }
    }

    /**
     * Closes at once, without waiting for the driver's other clients to leave: for a job that failed,
     * whose other ranks are failing too (a killed rank's client would hold the owner for the driver's
     * client liveness timeout). Idempotent; {@link #close()} after it does nothing.
     */
    public void abort() {
        if (!closed.compareAndSet(false, true)) {
            return;
        }
        shutdownNow();
        if (shutdownHook != null) {
            try {
                Runtime.getRuntime().removeShutdownHook(shutdownHook);
            } catch (IllegalStateException e) {
                // JVM shutting down: the hook runs (and finds everything closed)
            }
        }
    }

    private synchronized void shutdownNow() {
        closed.set(true);
        if (driver == null && (driverTimedOut || (owner != null && !owner.alive()))) {
            // the driver is gone with its owner: the client's conductor takes seconds to stop (it waits
            // for a driver that never answers); nobody needs to wait for that
            Thread t = new Thread(this::closeClient, "jcomm-aeron-close");
            t.setDaemon(true);
            t.start();
        } else {
            closeClient();
        }
        if (driver != null) {
            try {
                driver.close();
            } catch (RuntimeException e) {
                LOG.debug("closing media driver: {}", e.toString());
            }
            ShmFiles.deleteRecursively(jobDirectory != null ? jobDirectory : directory);
        } else if (jobDirectory != null && Files.isDirectory(jobDirectory) && !ShmFiles.ownerAlive(jobDirectory)) {
            // the owner died (kill -9): nobody else will remove its directory
            ShmFiles.deleteRecursively(jobDirectory);
        }
    }

    private void closeClient() {
        try {
            aeron.close();
        } catch (RuntimeException e) {
            LOG.debug("closing Aeron client: {}", e.toString());
        }
    }

    @Override
    public String toString() {
        return "AeronMedia{" + directory + (driver != null ? ", owner" : ", attached to pid " + ownerPid) + "}";
    }

    /** Immutable configuration of the media driver and client. */
    public static final class Options {
        private final Path baseDir;
        private final String tag;
        private final Duration livenessTimeout;
        private final IdleConfig driverIdle;
        private final ThreadingMode threadingMode;
        private final Duration ownerLinger;
        private final int ringBufferLength;
        private final int counterValuesLength;
        private final int errorBufferLength;
        private final int lossReportLength;
        private final long reserveBytes;
        private final int udpWindowLength;

        private Options(Builder b) {
            this.baseDir = Objects.requireNonNull(b.baseDir, "baseDir");
            this.tag = ShmFiles.sanitizeTag(Objects.requireNonNull(b.tag, "tag"));
            this.livenessTimeout = Objects.requireNonNull(b.livenessTimeout, "livenessTimeout");
            this.driverIdle = Objects.requireNonNull(b.driverIdle, "driverIdle");
            this.threadingMode = Objects.requireNonNull(b.threadingMode, "threadingMode");
            this.ownerLinger = Objects.requireNonNull(b.ownerLinger, "ownerLinger");
            this.ringBufferLength = b.ringBufferLength;
            this.counterValuesLength = b.counterValuesLength;
            this.errorBufferLength = b.errorBufferLength;
            this.lossReportLength = b.lossReportLength;
            this.reserveBytes = b.reserveBytes;
            this.udpWindowLength = b.udpWindowLength;
            if (livenessTimeout.toMillis() < 200) {
                throw new IllegalArgumentException("livenessTimeout must be at least 200 ms, got " + livenessTimeout);
            }
            if (Integer.bitCount(ringBufferLength) != 1 || Integer.bitCount(counterValuesLength) != 1) {
                throw new IllegalArgumentException("ring buffer and counter lengths must be powers of two");
            }
        }

        public static Builder builder() {
            return new Builder();
        }

        /** Defaults: {@code /dev/shm}, tag {@code job}, 2 s liveness. */
        public static Options defaults() {
            return builder().build();
        }

        public Path baseDir() {
            return baseDir;
        }

        public String tag() {
            return tag;
        }

        public Duration livenessTimeout() {
            return livenessTimeout;
        }

        public IdleConfig driverIdle() {
            return driverIdle;
        }

        public ThreadingMode threadingMode() {
            return threadingMode;
        }

        public Duration ownerLinger() {
            return ownerLinger;
        }

        /** Bytes the driver's own files take (cnc.dat, loss report), without any stream. */
        public long driverFileBytes() {
            // cnc: to-driver ring + to-clients broadcast + counters (values, metadata = 4 x values) + error log
            return 2L * ringBufferLength + 5L * counterValuesLength + errorBufferLength + lossReportLength + 64 * 1024;
        }

        public Builder toBuilder() {
            Builder b = builder().baseDir(baseDir).tag(tag).livenessTimeout(livenessTimeout).driverIdle(driverIdle)
                    .threadingMode(threadingMode).ownerLinger(ownerLinger).reserveBytes(reserveBytes);
            b.ringBufferLength = ringBufferLength;
            b.counterValuesLength = counterValuesLength;
            b.errorBufferLength = errorBufferLength;
            b.lossReportLength = lossReportLength;
            b.udpWindowLength = udpWindowLength;
            return b;
        }

        @Override
        public String toString() {
            return "AeronMedia.Options{base=" + baseDir + ", tag=" + tag + ", liveness=" + livenessTimeout
                    + ", idle=" + driverIdle + ", threading=" + threadingMode + "}";
        }

        /** Mutable builder of {@link Options}. */
        public static final class Builder {
            private Path baseDir = Path.of("/dev/shm");
            private String tag = "job";
            private Duration livenessTimeout = Duration.ofSeconds(2);
            private IdleConfig driverIdle = IdleConfig.of(Duration.ZERO, Duration.ofNanos(200_000),
                    Duration.ofNanos(1_000), Duration.ofMillis(4));
            private int udpWindowLength = 1024 * 1024;
            private ThreadingMode threadingMode = ThreadingMode.SHARED;
            private Duration ownerLinger = Duration.ofSeconds(5);
            private int ringBufferLength = 1024 * 1024;
            private int counterValuesLength = 1024 * 1024;
            private int errorBufferLength = 4 * 1024 * 1024;
            private int lossReportLength = 1024 * 1024;
            private long reserveBytes = 0;

            private Builder() {
            }

            /** Where the job directory goes (a tmpfs; default {@code /dev/shm}). */
            public Builder baseDir(Path v) { this.baseDir = v; return this; }
            /** Part of the directory name, to recognise a job's files (letters, digits, {@code _.}). */
            public Builder tag(String v) { this.tag = v; return this; }
            /** How long a silent client, driver or image stays "alive" (default 2 s). */
            public Builder livenessTimeout(Duration v) { this.livenessTimeout = v; return this; }
            /** Idle strategy of the driver's thread(s). */
            public Builder driverIdle(IdleConfig v) { this.driverIdle = v; return this; }
            /** {@code SHARED} (one thread, default) or {@code DEDICATED} (three, for UDP throughput). */
            public Builder threadingMode(ThreadingMode v) { this.threadingMode = v; return this; }
            /** How long the owner waits on close for other clients to leave (default 5 s). */
            public Builder ownerLinger(Duration v) { this.ownerLinger = v; return this; }
            /** UDP receiver window and socket buffers (default 1 MiB; the kernel may cap the buffers). */
            public Builder udpWindowLength(int v) { this.udpWindowLength = v; return this; }
            /** Extra bytes that must be free at launch (the streams the caller will create). */
            public Builder reserveBytes(long v) { this.reserveBytes = v; return this; }

            public Options build() {
                return new Options(this);
            }
        }
    }
}
