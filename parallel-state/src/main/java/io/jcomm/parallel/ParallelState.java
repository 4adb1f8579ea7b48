package io.jcomm.parallel;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ObjectCodec;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.runtime.recorder.FlightRecorder;
import io.jcomm.api.store.PrefixStore;
import io.jcomm.api.store.Store;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.device.DeviceCommunicators;
import io.jcomm.mq.AeronMedia;
import io.jcomm.runtime.registry.JobRegistration;
import io.jcomm.runtime.registry.JobRegistry;
import io.jcomm.parallel.internal.JobKeys;
import io.jcomm.parallel.internal.recovery.Joining;
import io.jcomm.parallel.internal.recovery.RecoveryRound;
import io.jcomm.parallel.internal.recovery.Vacancy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionStage;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The distributed environment of one process and its model-parallel groups (vLLM's
 * {@code parallel_state}), as an object: no module-level globals. Two instances in one JVM are
 * independent (threads can play ranks of a job, or of two jobs with different store prefixes).
 *
 * <pre>{@code
 * try (ParallelState ps = ParallelState.initialize(DistributedConfig.fromEnvironment())) {
 *     ps.initializeModelParallel(2, 2);               // TP=2, PP=2 (DP=1)
 *     Tensor h = ps.tp().allReduce(partial);
 *     ps.pp().sendTensorDict(Map.of("hidden", h), ps.pp().nextInGroup(), ps.tp());
 * }
 * }</pre>
 *
 * <h2>What {@link #initialize} does</h2>
 * Makes (or takes) the rendezvous store, creates the {@code world} group, and all-gathers every
 * rank's host id once ({@link #topology()}). The world group is the only one every rank must create.
 *
 * <h2>Model-parallel groups</h2>
 * {@link #initializeModelParallel(int, int, int)} lays ranks out exactly as vLLM does
 * ({@link RankLayout}) and creates only the groups this rank belongs to ({@code tp:i},
 * {@code pp:i}, {@code dp:i}, {@code ep:i}, where i is the group's index in the layout). Each group
 * has its own store prefix, so the groups of one rank are created concurrently and no rank creates
 * groups it is not in (torch's {@code new_group} makes every rank create every group, in order).
 * TP groups get a shared-memory broadcaster. By default it is made after the groups, on another
 * thread and through the store (the media driver first, then the queue), so the groups are ready
 * without waiting for it; broadcasts switch to it once it is ready everywhere
 * ({@link ParallelStateOptions#broadcasterInBackground()}).
 *
 * <h2>Lifecycle</h2>
 * {@link #destroyModelParallel()} destroys TP, PP, DP then EP; {@link #close()} also the world
 * group and, when it made it, the store. Methods are thread safe (they serialise on this object);
 * the groups themselves are driven by one thread at a time.
 */
public final class ParallelState implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger(ParallelState.class);

    /** Name of the group of every rank. */
    public static final String WORLD = "world";

    private final DistributedConfig config;
    private final ParallelStateOptions options;
    private final Store ownedStore;
    private GroupFactory factory;
    private final GroupRegistry registry = new GroupRegistry();
    private volatile GroupCoordinator world;
    private HostTopology topology;
    private final long jobNonce;
    /** This start of the job on the store ({@link JobKeys}): every group namespace starts with {@code s<incarnation>}. */
    private final long incarnation;
    private HostMedia hostMedia;
    private RankLayout layout;
    private GroupCoordinator tp;
    private GroupCoordinator pp;
    private GroupCoordinator dp;
    private GroupCoordinator ep;
    /** How many times this state made its model-parallel groups ({@link JobKeys}: the layout epoch). */
    private int layoutEpoch;
    private final Map<String, Integer> newGroupCounts = new HashMap<>();
    private boolean closed;
    private JobRegistration jobRegistration;
    /**
     * Recovery rounds started ({@link #shrink}); every survivor counts them alike. Round r, when it succeeds,
     * makes generation r of the job's groups ({@link JobKeys}).
     */
    private int rounds;
    /** The store client of the current generation after a recovery (declared under its own job id), or null. */
    private Store generationStore;
    /** The layout of the current generation (kept when a recovery round fails half way, for the next one). */
    private RankLayout generationLayout;
    /** For a process that took a lost rank's place: the round it joined. */
    private Recovery joined;

    private ParallelState(DistributedConfig config, ParallelStateOptions options, Store ownedStore, GroupFactory factory,
                          GroupCoordinator world, HostTopology topology, long jobNonce, long incarnation,
                          HostMedia hostMedia) {
        this.config = config;
        this.options = options;
        this.ownedStore = ownedStore;
        this.factory = factory;
        this.world = world;
        this.topology = topology;
        this.jobNonce = jobNonce;
        this.incarnation = incarnation;
        this.hostMedia = hostMedia;
        if (world != null) { // null: a replacement, whose groups the recovery round makes
            registry.register(world);
            options.listener().created(world);
        }
    }

    private void adoptModelParallel(RankLayout l, GroupCoordinator[] made) {
        generationLayout = l;
        tp = made[0];
        pp = made[1];
        dp = made[2];
        ep = made[3];
        layout = l;
        for (GroupCoordinator g : made) {
            registry.register(g);
            options.listener().created(g);
        }
    }

    /** {@link #initialize(DistributedConfig, ParallelStateOptions)} with default options. */
    public static ParallelState initialize(DistributedConfig config) {
        return initialize(config, ParallelStateOptions.defaults());
    }

    /**
     * Makes the store the torchrun way ({@link TcpRendezvous}: rank 0 hosts it at
     * {@code MASTER_ADDR:MASTER_PORT} unless the options say otherwise) and initialises the
     * environment on it; the store is closed with this state. Collective over the world.
     *
     * <p>A process whose {@link DistributedConfig#role()} is {@code RESTARTED} or {@code SPARE} does not start
     * a job: it waits for the survivors of a rank loss to post a vacancy ({@link #replace}), takes the lost
     * rank's place and returns the state of the generation it joined, with the job's model-parallel groups
     * ({@link #joined()} says which round).
     */
    public static ParallelState initialize(DistributedConfig config, ParallelStateOptions options) {
        Objects.requireNonNull(config, "config");
        Objects.requireNonNull(options, "options");
        if (config.role() != DistributedConfig.Role.WORKER) {
            return join(config, options, null);
        }
        Store store = TcpRendezvous.connect(config, options.rendezvous());
        try {
            return initialize(config, store, options, store, null);
        } catch (RuntimeException e) {
            store.close();
            throw e;
        }
    }

    /**
     * Initialises the environment on a store the caller owns (it stays open after {@link #close()}).
     * Collective over the world.
     */
    public static ParallelState initialize(DistributedConfig config, Store store, ParallelStateOptions options) {
        Objects.requireNonNull(store, "store");
        return initialize(config, store, options, null, null);
    }

    /**
     * Initialises the environment and the model-parallel groups in one step, with every group (the
     * world included) created at once: the fastest start. Equivalent to {@link #initialize} followed
     * by {@link #initializeModelParallel(int, int, int)}; the store is made as in
     * {@link #initialize(DistributedConfig, ParallelStateOptions)} and owned by the state; a restarted or
     * spare process joins the job as described there.
     */
    public static ParallelState initialize(DistributedConfig config, ParallelStateOptions options, ParallelSizes sizes) {
        Objects.requireNonNull(config, "config");
        Objects.requireNonNull(options, "options");
        Objects.requireNonNull(sizes, "sizes");
        RankLayout.of(config.worldSize(), sizes.tp(), sizes.pp(), sizes.dp()); // fail before connecting
        if (config.role() != DistributedConfig.Role.WORKER) {
            return join(config, options, sizes);
        }
        Store store = TcpRendezvous.connect(config, options.rendezvous());
        try {
            return initialize(config, store, options, store, sizes);
        } catch (RuntimeException e) {
            store.close();
            throw e;
        }
    }

    /** {@link #initialize(DistributedConfig, ParallelStateOptions, ParallelSizes)} on a store the caller owns. */
    public static ParallelState initialize(DistributedConfig config, Store store, ParallelStateOptions options,
                                           ParallelSizes sizes) {
        Objects.requireNonNull(store, "store");
        Objects.requireNonNull(sizes, "sizes");
        return initialize(config, store, options, null, sizes);
    }

    private static ParallelState initialize(DistributedConfig config, Store store, ParallelStateOptions options,
                                            Store owned, ParallelSizes sizes) {
        Objects.requireNonNull(config, "config");
        Objects.requireNonNull(options, "options");
        RankLayout l = sizes == null ? null : RankLayout.of(config.worldSize(), sizes.tp(), sizes.pp(), sizes.dp());
        ObjectCodec codec = options.codec() != null ? options.codec() : ParallelStateOptions.defaultCodec();
        DeviceCommunicators registry = options.deviceCommunicators() != null ? options.deviceCommunicators()
                : ParallelStateOptions.defaultDeviceCommunicators();
        GroupFactory factory = new GroupFactory(config, options, store, codec, registry);
        HostExchange.Result hx = HostExchange.run(config, new PrefixStore(options.storePrefix(), store), factory.timeout);
        List<Integer> all = IntStream.range(0, config.worldSize()).boxed().collect(Collectors.toList());
        List<GroupFactory.Spec> specs = new ArrayList<>();
        // namespaces of this state's groups: fresh on every incarnation of the state on the store
        String ns = "s" + hx.incarnation() + "-";
        specs.add(new GroupFactory.Spec(WORLD, all, false, ns + "w", true));
        if (l != null) {
            specs.addAll(modelParallelSpecs(l, config.rank(), options, hx.topology(), ns + "mp1"));
        }
        boolean wantMedia = l != null && needsHostMedia(options, l, hx.topology());
        HostMedia media = wantMedia && !factory.lateBroadcasters
                ? startHostMedia(factory, hx.topology(), hx.incarnation(), false) : null;
        GroupCoordinator[] made;
        try {
            made = createGroups(factory, hx.topology(), hx.nonce(), specs, media);
        } catch (RuntimeException e) {
            if (media != null) {
                media.close();
            }
            throw e;
        }
        if (wantMedia && factory.lateBroadcasters) {
            media = startHostMedia(factory, hx.topology(), hx.incarnation(), true);
            startLateBroadcasters(factory, specs, made, media, hx.incarnation());
        }
        ParallelState ps = new ParallelState(config, options, owned, factory, made[0], hx.topology(), hx.nonce(),
                hx.incarnation(), media);
        if (l != null) {
            ps.layoutEpoch = 1;
            ps.adoptModelParallel(l, Arrays.copyOfRange(made, 1, made.length));
        }
        LOG.debug("rank {}: world of {} ready, {} node(s), device {}", config.rank(), config.worldSize(),
                hx.topology().nodeCount(), factory.device);
        ps.startJobRegistration();
        return ps;
    }

    /**
     * Registers this state in the host's job registry ({@code bin/commtop}) from a background thread:
     * never delays initialisation, and a registry that cannot be opened only costs a debug line. With
     * host media (made once every rank of the host has its groups) the entry is written after it, off the
     * path of the host's ranks still creating groups.
     */
    private synchronized void startJobRegistration() {
        try {
            FlightRecorder rec = FlightRecorder.process();
            String job = JobRegistry.Entry.jobOf(config.jobId(), DistributedConfig.JOB_ID_DEFAULT, config.masterAddr(),
                    config.masterPort());
            CompletionStage<?> notBefore = hostMedia != null ? hostMedia.future()
                    : CompletableFuture.completedFuture(null);
            jobRegistration = JobRegistration.start(System.getenv(), job, config.rank(), config.worldSize(),
                    rec == null ? null : rec.file(), registry::names, notBefore);
        } catch (RuntimeException | LinkageError e) {
            LOG.debug("rank {}: no job registration: {}", config.rank(), e.toString());
        }
    }

    // ------------------------------------------------------------------ model parallel groups

    /** {@link #initializeModelParallel(int, int, int)} with DP = 1. */
    public void initializeModelParallel(int tensorParallelSize, int pipelineParallelSize) {
        initializeModelParallel(tensorParallelSize, pipelineParallelSize, 1);
    }

    /**
     * Creates this rank's TP, PP, DP and EP groups with vLLM's layout. Collective over the world:
     * every rank calls it with the same sizes.
     *
     * @throws IllegalArgumentException if {@code tp * pp * dp} does not divide the world size
     * @throws IllegalStateException    if the groups already exist, or after a {@link #shrink}
     * @throws CommException            if a group cannot be created (every part already made is released)
     */
    public synchronized void initializeModelParallel(int tensorParallelSize, int pipelineParallelSize,
                                                     int dataParallelSize) {
        checkOpen();
        if (layout != null) {
            throw new IllegalStateException("model parallel groups are already initialized (" + describeSizes()
                    + "); call destroyModelParallel() first");
        }
        if (rounds > 0) {
            throw new IllegalStateException("after a shrink the model-parallel groups are the recovery's (ranks "
                    + world.ranks() + "); they cannot be laid out again over the configured world of " + config.worldSize());
        }
        RankLayout l = RankLayout.of(config.worldSize(), tensorParallelSize, pipelineParallelSize, dataParallelSize);
        // every rank counts its initializeModelParallel calls alike: a fresh namespace each time
        List<GroupFactory.Spec> specs = modelParallelSpecs(l, config.rank(), options, topology,
                "s" + incarnation + "-mp" + (layoutEpoch + 1));
        for (GroupFactory.Spec s : specs) {
            registry.requireFree(s.name());
        }
        layoutEpoch++;
        GroupCoordinator[] made = createWithMedia(factory, specs, needsHostMedia(options, l, topology), "m" + incarnation);
        adoptModelParallel(l, made);
    }

    /**
     * Creates the groups of {@code specs} with this host's media driver for their broadcasters when they want
     * one: started first (broadcasters made with the groups) or after the groups (made in the background), under
     * {@code mediaName} unless this state already has it.
     */
    private GroupCoordinator[] createWithMedia(GroupFactory f, List<GroupFactory.Spec> specs, boolean wantMedia,
                                               String mediaName) {
        if (hostMedia == null && wantMedia && !f.lateBroadcasters) {
            hostMedia = startHostMedia(f, topology, mediaName, false);
        }
        GroupCoordinator[] made = createGroups(f, topology, jobNonce, specs, hostMedia);
        if (wantMedia && f.lateBroadcasters) {
            if (hostMedia == null) {
                hostMedia = startHostMedia(f, topology, mediaName, true);
            }
            startLateBroadcasters(f, specs, made, hostMedia, incarnation);
        }
        return made;
    }

    /**
     * Starts the broadcasters of the groups that want one, now that the groups exist (when the
     * factory makes them late; every member starts its part at the same point).
     */
    private static void startLateBroadcasters(GroupFactory factory, List<GroupFactory.Spec> specs, GroupCoordinator[] made,
                                              HostMedia media, long incarnation) {
        for (int i = 0; i < specs.size(); i++) {
            GroupFactory.Spec s = specs.get(i);
            if (s.messageQueue() && factory.lateBroadcasters) {
                made[i].attachLater(LateBroadcaster.start(factory, s, media == null ? null : media.future(),
                        lateKeyPrefix(incarnation, s), ParallelState::openLane));
            }
        }
    }

    private static String lateKeyPrefix(long incarnation, GroupFactory.Spec s) {
        return JobKeys.lateBroadcaster(incarnation, s.namespace(), s.name());
    }

    /** Whether the TP groups of {@code l} get broadcasters (and the store allows a background client). */
    private static boolean needsHostMedia(ParallelStateOptions options, RankLayout l, HostTopology topology) {
        return l.tpGroups().stream().anyMatch(g -> wantsMessageQueue(options, g, topology));
    }

    /** Whether the TP group of {@code ranks} gets a broadcaster. */
    private static boolean wantsMessageQueue(ParallelStateOptions options, List<Integer> ranks, HostTopology topology) {
        return options.tpMessageQueue() && ranks.size() > 1
                && !(options.messageQueueAcrossHostsOnly() && topology.allOnOneHost(ranks));
    }

    private static HostMedia startHostMedia(GroupFactory factory, HostTopology topology, long incarnation,
                                            boolean afterHostReady) {
        return startHostMedia(factory, topology, "m" + incarnation, afterHostReady);
    }

    /** @param name names the driver's store keys: the same on every rank of a host, new for a new driver */
    private static HostMedia startHostMedia(GroupFactory factory, HostTopology topology, String name,
                                            boolean afterHostReady) {
        if (!concurrentStores(factory.rawStore)) {
            return null; // each broadcaster then starts its own driver
        }
        return HostMedia.start(factory, topology, name, ParallelState::openLane, afterHostReady);
    }

    /** This rank's TP, PP, DP and EP groups of {@code l}. */
    private static List<GroupFactory.Spec> modelParallelSpecs(RankLayout l, int rank, ParallelStateOptions options,
                                                              HostTopology topology, String gen) {
        List<Integer> tpRanks = l.tpGroups().get(RankLayout.indexOf(l.tpGroups(), rank));
        return List.of(
                spec("tp", l.tpGroups(), rank, wantsMessageQueue(options, tpRanks, topology), gen),
                spec("pp", l.ppGroups(), rank, false, gen),
                spec("dp", l.dpGroups(), rank, false, gen),
                spec("ep", l.epGroups(), rank, false, gen));
    }

    private static GroupFactory.Spec spec(String kind, List<List<Integer>> groups, int rank, boolean mq, String gen) {
        int i = RankLayout.indexOf(groups, rank);
        List<Integer> ranks = groups.get(i);
        return new GroupFactory.Spec(kind + ":" + i, ranks, mq && ranks.size() > 1, gen, false);
    }

    /**
     * Creates the groups, concurrently when allowed (each creating thread with its own store
     * client); all or nothing: on any failure every group made is destroyed and the first failure
     * is thrown.
     */
    private static GroupCoordinator[] createGroups(GroupFactory factory, HostTopology topology, long jobNonce,
                                                   List<GroupFactory.Spec> specs, HostMedia hostMedia) {
        ParallelStateOptions options = factory.options;
        int n = specs.size();
        CompletableFuture<AeronMedia> shared = hostMedia == null ? null : hostMedia.future();
        List<CompletableFuture<AeronMedia>> media = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            boolean owner = shared == null && specs.get(i).messageQueue() && !factory.lateBroadcasters
                    && factory.ownsMedia(specs.get(i), topology);
            media.add(owner ? factory.launchMediaAsync() : null);
        }
        GroupCoordinator[] made = new GroupCoordinator[n];
        if (!options.concurrentGroupCreation() || !concurrentStores(factory.rawStore)) {
            try {
                for (int i = 0; i < n; i++) {
                    // create() releases the media itself when it fails
                    made[i] = factory.create(specs.get(i), factory.rawStore, topology, jobNonce, media.set(i, null), shared);
                }
                return made;
            } catch (RuntimeException ex) {
                for (CompletableFuture<AeronMedia> m : media) {
                    GroupFactory.closeMedia(m);
                }
                destroyAll(made);
                throw ex;
            }
        }
        List<CompletableFuture<GroupCoordinator>> futures = new ArrayList<>(n);
        int inline = -1; // the last group that needs the network is made on this thread
        for (int i = 0; i < n; i++) {
            futures.add(new CompletableFuture<>());
            if (specs.get(i).ranks().size() > 1) {
                inline = i;
            }
        }
        List<Thread> threads = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            if (i == inline || specs.get(i).ranks().size() == 1) {
                continue;
            }
            int ii = i;
            Thread t = new Thread(() -> {
                // a client of its own: a blocking wait must not hold the store of the other threads
                Store lane;
                try {
                    lane = openLane(factory.rawStore);
                } catch (RuntimeException ex) {
                    GroupFactory.closeMedia(media.get(ii));
                    futures.get(ii).completeExceptionally(ex);
                    return;
                }
                try {
                    createInto(factory, topology, jobNonce, futures.get(ii), specs.get(ii), lane, media.get(ii), shared);
                } finally {
                    if (lane != factory.rawStore) {
                        lane.close();
                    }
                }
            }, "jcomm-ps-create-" + specs.get(i).name());
            t.setDaemon(true);
            threads.add(t);
        }
        threads.forEach(Thread::start);
        for (int i = 0; i < n; i++) {
            if (!futures.get(i).isDone() && (i == inline || specs.get(i).ranks().size() == 1)) {
                createInto(factory, topology, jobNonce, futures.get(i), specs.get(i), factory.rawStore, media.get(i), shared);
            }
        }
        RuntimeException first = null;
        long deadline = System.nanoTime() + factory.timeout.toNanos() + TimeUnit.SECONDS.toNanos(10);
        for (int i = 0; i < n; i++) {
            try {
                made[i] = futures.get(i).get(Math.max(0, deadline - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (ExecutionException ex) {
                Throwable c = ex.getCause();
                if (first == null) {
                    first = c instanceof RuntimeException ? (RuntimeException) c
                            : new CommException(OpContext.of(specs.get(i).name(), -1, "create"), String.valueOf(c), c);
                }
            } catch (TimeoutException ex) {
                if (first == null) {
                    first = new CommTimeoutException(OpContext.of(specs.get(i).name(), -1, "create"),
                            "group creation did not finish within " + factory.timeout.toMillis() + " ms");
                }
            } catch (InterruptedException ex) {
                Thread.currentThread().interrupt();
                if (first == null) {
                    first = new CommException(OpContext.of(specs.get(i).name(), -1, "create"), "interrupted", ex);
                }
            }
        }
        if (first != null) {
            destroyAll(made);
            throw first;
        }
        return made;
    }

    /**
     * Whether groups can be made concurrently: the store says it can give each creating thread a client
     * of its own ({@link Store#supportsConcurrentClients()}: the TCP store, the in-memory store).
     */
    static boolean concurrentStores(Store store) {
        return store.supportsConcurrentClients();
    }

    /** A store client for one creating thread (closed by the caller unless it is {@code store}). */
    private static Store openLane(Store store) {
        return store.supportsConcurrentClients() ? store.concurrentClient() : store;
    }

    private static void createInto(GroupFactory factory, HostTopology topology, long jobNonce,
                                   CompletableFuture<GroupCoordinator> f, GroupFactory.Spec s, Store store,
                                   CompletableFuture<AeronMedia> media, CompletableFuture<AeronMedia> shared) {
        try {
            f.complete(factory.create(s, store, topology, jobNonce, media, shared));
        } catch (Throwable ex) {
            f.completeExceptionally(ex);
        }
    }

    private static void destroyAll(GroupCoordinator[] groups) {
        for (GroupCoordinator g : groups) {
            if (g != null) {
                g.destroy();
            }
        }
    }

    /**
     * Initialises the model-parallel groups once; afterwards only checks that the sizes match
     * (vLLM's {@code ensure_model_parallel_initialized}).
     *
     * @throws IllegalStateException if the groups exist with other sizes
     */
    public void ensureModelParallelInitialized(int tensorParallelSize, int pipelineParallelSize) {
        ensureModelParallelInitialized(tensorParallelSize, pipelineParallelSize, 1);
    }

    /** {@link #ensureModelParallelInitialized(int, int)} with an explicit DP size. */
    public synchronized void ensureModelParallelInitialized(int tensorParallelSize, int pipelineParallelSize,
                                                            int dataParallelSize) {
        checkOpen();
        if (layout == null) {
            initializeModelParallel(tensorParallelSize, pipelineParallelSize, dataParallelSize);
            return;
        }
        if (tp.worldSize() != tensorParallelSize) {
            throw new IllegalStateException("tensor parallel group already initialized, but of unexpected size: got "
                    + tp.worldSize() + ", expected " + tensorParallelSize);
        }
        if (pp.worldSize() != pipelineParallelSize) {
            throw new IllegalStateException("pipeline parallel group already initialized, but of unexpected size: got "
                    + pp.worldSize() + ", expected " + pipelineParallelSize);
        }
        if (dp.worldSize() != dataParallelSize) {
            throw new IllegalStateException("data parallel group already initialized, but of unexpected size: got "
                    + dp.worldSize() + ", expected " + dataParallelSize);
        }
    }

    public synchronized boolean isModelParallelInitialized() {
        return layout != null;
    }

    /** Destroys the TP, PP, DP and EP groups, in that order. Idempotent. */
    public synchronized void destroyModelParallel() {
        GroupCoordinator[] order = {tp, pp, dp, ep};
        tp = pp = dp = ep = null;
        layout = null;
        for (GroupCoordinator g : order) {
            if (g != null) {
                g.closeTransports(); // peers waiting on this rank learn it at once
            }
        }
        for (GroupCoordinator g : order) {
            if (g != null) {
                g.destroy();
                registry.remove(g.name());
                options.listener().destroyed(g.name());
            }
        }
    }

    /**
     * Creates a group of the given global ranks outside the standard layout (vLLM's
     * {@code init_model_parallel_group}). Collective over its members only; {@code name} must be
     * unique in this state and the same on every member.
     */
    public synchronized GroupCoordinator newGroup(String name, List<Integer> ranks, boolean messageQueue) {
        checkOpen();
        Objects.requireNonNull(name, "name");
        if (name.isEmpty() || name.contains("/")) {
            throw new IllegalArgumentException("group name must be non-empty and contain no '/': '" + name + "'");
        }
        if (!ranks.contains(config.rank())) {
            throw new IllegalArgumentException("rank " + config.rank() + " is not in " + ranks + "; only members create a group");
        }
        List<Integer> current = world.ranks();
        for (int r : ranks) {
            if (!current.contains(r)) {
                throw new IllegalArgumentException("rank " + r + " not in the world of " + current.size()
                        + (rounds > 0 ? " (the survivors " + current + ")" : ""));
            }
        }
        registry.requireFree(name);
        // members count their instances of this (name, members) alike: a fresh namespace each time
        String key = name + ranks;
        int instance = newGroupCounts.merge(key, 1, Integer::sum);
        String gen = "s" + incarnation + "-g" + instance + "-" + Integer.toHexString(key.hashCode());
        GroupFactory.Spec s = new GroupFactory.Spec(name, ranks, messageQueue && ranks.size() > 1, gen, false);
        CompletableFuture<AeronMedia> shared = s.messageQueue() && hostMedia != null ? hostMedia.future() : null;
        CompletableFuture<AeronMedia> media = s.messageQueue() && !factory.lateBroadcasters && shared == null
                && factory.ownsMedia(s, topology) ? factory.launchMediaAsync() : null;
        GroupCoordinator g = factory.create(s, factory.rawStore, topology, jobNonce, media, shared);
        if (s.messageQueue() && factory.lateBroadcasters) {
            // the state's host driver if there is one; else the queue starts one of its own
            g.attachLater(LateBroadcaster.start(factory, s, shared, lateKeyPrefix(incarnation, s), ParallelState::openLane));
        }
        registry.register(g);
        options.listener().created(g);
        return g;
    }

    /** Destroys a group made with {@link #newGroup}. */
    public synchronized void destroyGroup(String name) {
        if (WORLD.equals(name) || isStandard(name)) {
            throw new IllegalArgumentException("'" + name + "' is destroyed by destroyModelParallel() or close()");
        }
        GroupCoordinator g = registry.get(name);
        g.destroy();
        registry.remove(name);
        options.listener().destroyed(name);
    }

    private boolean isStandard(String name) {
        for (GroupCoordinator g : new GroupCoordinator[] {tp, pp, dp, ep}) {
            if (g != null && g.name().equals(name)) {
                return true;
            }
        }
        return false;
    }

    // ------------------------------------------------------------------ recovery

    /**
     * Goes on after a rank loss with the configured policy ({@link DistributedConfig#recovery()}:
     * {@link #shrink()} or {@link #replace()}), with the groups' default timeout.
     */
    public Recovery recover() {
        return config.recovery() == DistributedConfig.RecoveryPolicy.REPLACE ? replace() : shrink();
    }

    /** {@link #shrink(Duration)} with the groups' default timeout. */
    public Recovery shrink() {
        return shrink(factory.timeout);
    }

    /**
     * Goes on after a rank loss: the data-parallel replicas that lost a rank leave the job, the others
     * re-form their groups among themselves (same TP and PP groups, smaller DP and EP groups), as
     * generation {@code round} of the job. Call it on every rank that is still alive once one of its
     * groups failed with a {@link PeerFailureException} (or a {@link CommClosedException}
     * from a rank that left); the world group of every process is poisoned within about 0.2 s of a
     * death ({@code world().cpuGroup().isPoisoned()}), so a rank can also look before its next call.
     *
     * <ol>
     *   <li>Roll call: each rank marks itself alive in the store (through the current generation's
     *       client) and waits until every rank of the current generation is alive, dead, or gone with its
     *       replica in an earlier round. Dead means that its store connection ended without a
     *       goodbye ({@link Store#deadMembers()}: a jcomm store server); a rank that is alive but never
     *       calls this keeps the others waiting until {@code timeout}.</li>
     *   <li>Each replica with a dead rank is lost. A rank of a lost replica gets
     *       {@link Recovery#member()} {@code false} and should {@link #close()} this state: its groups of the
     *       new generation do not exist.</li>
     *   <li>The survivors check that they all decided alike (the survivors' list, through the new
     *       generation's store client, which only they open, declared under the job id {@code <job>/g<round>}:
     *       a survivor's death during the recovery fails it at once) and create the new generation's groups in a fresh namespace: the
     *       world of the survivors and their TP, PP, DP and EP groups (the TP and PP groups have the same
     *       members as before; the broadcasters of TP groups are made again in the background). Global ranks
     *       keep their numbers; group ranks are those of the new groups.</li>
     * </ol>
     * Every group of the state stops when this is called (groups made with {@link #newGroup} too: make them
     * again afterwards), so that a peer blocked in a collective with this rank fails at once and recovers too;
     * call this on every rank of the job that is alive.
     * A failure during the recovery (another death, a timeout) is thrown; calling this again starts the
     * next round. Needs the model-parallel groups of a layout without outer replicas
     * ({@code world == tp * pp * dp}) and a store that tracks its members' liveness (a jcomm store).
     *
     * @throws IllegalStateException         if the model-parallel groups are not initialized
     * @throws UnsupportedOperationException for a layout with outer replicas
     * @throws PeerFailureException when no replica survives, or a rank dies during the recovery
     * @throws CommTimeoutException when a rank neither answers the roll call nor dies in time
     */
    public synchronized Recovery shrink(Duration timeout) {
        return recoverRound(false, timeout);
    }

    /** {@link #replace(Duration)} with the groups' default timeout. */
    public Recovery replace() {
        return replace(factory.timeout);
    }

    /**
     * Goes on after a rank loss with the same layout: a process started for the purpose takes each lost
     * rank's place (same global rank), and every group is made again as the next generation, the
     * replacements' included. The replacement is a process that {@code commrun --max-restarts} started
     * again with the lost rank ({@link DistributedConfig.Role#RESTARTED}) or a waiting spare
     * ({@code commrun --spares}, {@link DistributedConfig.Role#SPARE}); either calls
     * {@link #initialize(DistributedConfig, ParallelStateOptions, ParallelSizes)} as at the start, which for
     * such a process waits for a vacancy and joins the survivors' round instead of starting a job.
     *
     * <ol>
     *   <li>Roll call, as in {@link #shrink(Duration)}.</li>
     *   <li>The lowest living rank posts one vacancy per dead rank in the store, with the layout, the
     *       generation and every rank's host.</li>
     *   <li>Every survivor waits until each vacancy is taken (a replacement claims it atomically, declares
     *       itself to the store under the next generation's job id, and says it joined), then all of them,
     *       the replacements included, check that they decided alike and create every group in a fresh
     *       namespace. The host's media driver is started again where its rank was lost.</li>
     * </ol>
     * Call it on every living rank, like {@link #shrink(Duration)}; a failure (another death, no
     * replacement within {@code timeout}) is thrown, and calling it again starts the next round, in which the
     * replacements of the failed round take part as members if they joined it, else claim the new vacancies.
     *
     * @return the recovery: {@link Recovery#member()} is always true, {@link Recovery#replaced()} the ranks that
     *         new processes took
     * @throws PeerFailureException when a survivor or a replacement dies during the recovery
     * @throws CommTimeoutException when a rank neither answers the roll call nor dies, or a vacancy is
     *                                           not taken, within {@code timeout}
     */
    public synchronized Recovery replace(Duration timeout) {
        return recoverRound(true, timeout);
    }

    /** Runs recovery round {@code ++rounds} ({@link RecoveryRound}); this state forms the new generation's groups. */
    private Recovery recoverRound(boolean replace, Duration timeout) {
        checkOpen();
        RankLayout before = generationLayout;
        if (before == null) {
            throw new IllegalStateException("recovery needs the model-parallel groups (initializeModelParallel)");
        }
        int round = ++rounds;
        Store current = generationStore != null ? generationStore : factory.rawStore;
        return RecoveryRound.run(recoveryContext(), replace, round, before, topology, current, timeout,
                new RecoveryRound.Generations() {
                    @Override
                    public void stopGroups() {
                        for (String name : registry.names()) {
                            registry.get(name).closeTransports();
                        }
                    }

                    @Override
                    public void form(Store next, int r, RankLayout after, List<Integer> replaced, HostTopology hosts) {
                        topology = hosts;
                        formGeneration(next, r, after, replaced);
                    }
                });
    }

    private RecoveryRound.Context recoveryContext() {
        return new RecoveryRound.Context(config.rank(), config.jobId(), options.storePrefix(), options.rollCallGrace(),
                incarnation, jobNonce);
    }

    /**
     * Makes generation {@code round}'s groups (the members agreed on it: {@link RecoveryRound#agree}) through
     * {@code next}, the next generation's store client; the state uses them, and {@code next}, from now on.
     */
    private void formGeneration(Store next, int round, RankLayout after, List<Integer> replaced) {
        List<Integer> members = after.ranks();
        GroupFactory nextFactory = factory.withStore(next);
        String ns = "s" + incarnation + "-r" + round + "-";
        List<GroupFactory.Spec> specs = new ArrayList<>();
        specs.add(new GroupFactory.Spec(WORLD, members, false, ns + "w", true));
        specs.addAll(modelParallelSpecs(after, config.rank(), options, topology, ns + "mp"));
        // the old generation goes first: its names are taken again
        destroyAllGroups();
        boolean wantMedia = needsHostMedia(options, after, topology);
        if (!replaced.isEmpty() && hostMedia != null && replaced.contains(topology.ranksOnHostOf(config.rank()).get(0))) {
            // the rank that ran this host's media driver was replaced: its replacement runs a new one
            HostMedia old = hostMedia;
            hostMedia = null;
            old.close(true);
        }
        GroupCoordinator[] made = createWithMedia(nextFactory, specs, wantMedia, mediaName(round, replaced));
        world = made[0];
        registry.register(world);
        options.listener().created(world);
        adoptModelParallel(after, Arrays.copyOfRange(made, 1, made.length));
        Store previous = generationStore;
        generationStore = next;
        factory = nextFactory;
        rounds = round;
        if (previous != null) {
            previous.close();
        }
    }

    /**
     * The name of this host's media driver in the next generation: the job's first one, unless the rank that
     * ran it was replaced in this round (a new one, of the round).
     */
    private String mediaName(int round, List<Integer> replaced) {
        return replaced.contains(topology.ranksOnHostOf(config.rank()).get(0)) ? "m" + incarnation + "r" + round
                : "m" + incarnation;
    }

    /**
     * A restarted or spare process ({@link DistributedConfig#role()}) joins the job in place of a lost
     * rank ({@link Joining}: it waits for a vacancy and claims it), agrees with the survivors and forms the
     * next generation with them ({@link #replace}).
     */
    private static ParallelState join(DistributedConfig config, ParallelStateOptions options, ParallelSizes sizes) {
        // a client of the store that outlives the lost rank, not declared under the job id: the lost rank stays
        // dead there, and this process is declared under the job id of the generation it joins
        Store store = TcpRendezvous.connect(config, options.rendezvous().toBuilder().hostServer(false)
                .declareMember(false).waitForWorkers(false).build());
        try {
            ObjectCodec codec = options.codec() != null ? options.codec() : ParallelStateOptions.defaultCodec();
            DeviceCommunicators devices = options.deviceCommunicators() != null ? options.deviceCommunicators()
                    : ParallelStateOptions.defaultDeviceCommunicators();
            if (config.role() == DistributedConfig.Role.SPARE) {
                // while nothing is lost: load and compile what joining will run, so that the survivors wait less
                SpareWarmup.run(config, options, codec, devices, Duration.ofSeconds(10));
            }
            return Joining.run(config, store, options.storePrefix(), sizes, claim -> {
                Vacancy v = claim.vacancy();
                long t0 = System.nanoTime();
                GroupFactory factory = new GroupFactory(claim.config(), options, store, codec, devices);
                ParallelState ps = new ParallelState(claim.config(), options, store, factory, null, claim.topology(),
                        v.nonce(), v.incarnation(), null);
                ps.generationLayout = v.layout();
                OpContext ctx = OpContext.of("recovery", claim.rank(), "join#" + claim.round());
                RecoveryRound.agree(ps.recoveryContext(), claim.next(), List.of(), claim.keys(), v.layout(),
                        new TreeSet<>(v.lost()), v.lost(), System.nanoTime() + config.timeout().toNanos(),
                        config.timeout(), ctx);
                ps.formGeneration(claim.next(), claim.round(), v.layout(), v.lost());
                ps.layoutEpoch = 1;
                ps.joined = new Recovery(claim.round(), v.lost(), List.of(), v.ranks(), true, v.layout(),
                        Duration.ofNanos(System.nanoTime() - t0), v.lost());
                LOG.info("rank {}: joined the job in round {} in place of a lost process ({} ms)", claim.rank(),
                        claim.round(), ps.joined.took().toMillis());
                ps.startJobRegistration();
                return ps;
            });
        } catch (RuntimeException e) {
            store.close();
            throw e;
        }
    }

    /**
     * For a process that joined the job in place of a lost rank ({@link DistributedConfig.Role#RESTARTED} or
     * {@link DistributedConfig.Role#SPARE}): the round it joined. Empty for a process started with the job.
     */
    public synchronized Optional<Recovery> joined() {
        return Optional.ofNullable(joined);
    }

    /** Destroys every group of this state (model-parallel ones, {@link #newGroup}'s, the world), for a new generation. */
    private void destroyAllGroups() {
        for (String name : registry.names()) {
            registry.get(name).closeTransports();
        }
        destroyModelParallel();
        for (String name : registry.names()) {
            GroupCoordinator g = registry.get(name);
            g.destroy();
            registry.remove(name);
            options.listener().destroyed(name);
        }
    }

    // ------------------------------------------------------------------ accessors

    public synchronized GroupCoordinator tp() {
        return require(tp, "tensor parallel");
    }

    public synchronized GroupCoordinator pp() {
        return require(pp, "pipeline parallel");
    }

    public synchronized GroupCoordinator dp() {
        return require(dp, "data parallel");
    }

    public synchronized GroupCoordinator ep() {
        return require(ep, "expert parallel");
    }

    public GroupCoordinator world() {
        return world;
    }

    /**
     * Data-parallel agreement, what vLLM does every step to agree on token counts and padding (and on
     * whether any DP rank still has work): {@code values} reduced element-wise with {@code op} over this
     * rank's DP group; every DP rank gets the same array. One small int64 all-reduce on the DP group's
     * CPU group (never the device communicator), bounded by the group's default timeout; a DP group of
     * one returns a copy. {@code values} is not modified.
     *
     * @throws IllegalStateException if the model-parallel groups are not initialized
     */
    public long[] dpAgree(long[] values, ReduceOp op) {
        java.util.Objects.requireNonNull(values, "values");
        java.util.Objects.requireNonNull(op, "op");
        ProcessGroup g = dp().cpuGroup();
        Tensor t = Tensor.ofLongs(values.clone());
        if (g.size() > 1) {
            g.allReduce(t, op);
        }
        return t.toLongArray();
    }

    private GroupCoordinator require(GroupCoordinator g, String what) {
        checkOpen();
        if (g == null) {
            throw new IllegalStateException(what + " group is not initialized (call initializeModelParallel)");
        }
        return g;
    }

    /** The live groups of this process by name. */
    public GroupRegistry groups() {
        return registry;
    }

    /** Which ranks share a host; the node count. */
    public HostTopology topology() {
        return topology;
    }

    /** The layout of the model-parallel groups. */
    public synchronized RankLayout layout() {
        if (layout == null) {
            throw new IllegalStateException("model parallel groups are not initialized");
        }
        return layout;
    }

    public DistributedConfig config() {
        return config;
    }

    public ParallelStateOptions options() {
        return options;
    }

    /** Global rank of this process. */
    public int rank() {
        return config.rank();
    }

    /** Ranks in the current world group: the configured world size until a {@link #shrink}, the survivors after. */
    public int worldSize() {
        return world.worldSize();
    }

    private String describeSizes() {
        return "tp=" + layout.tensorParallelSize() + " pp=" + layout.pipelineParallelSize() + " dp="
                + layout.dataParallelSize();
    }

    private void checkOpen() {
        if (closed) {
            throw new IllegalStateException("parallel state of rank " + config.rank() + " is closed");
        }
    }

    /**
     * Destroys the model-parallel groups (TP, PP, DP, EP), the groups made with {@link #newGroup},
     * then the world group, and closes the store when this state made it. After a failure (a group is
     * poisoned) the host's media driver, if this rank runs it, stops without waiting for the other
     * ranks of the host to leave it. Idempotent.
     */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        if (jobRegistration != null) {
            jobRegistration.close();
        }
        boolean failed = false;
        for (String name : registry.names()) {
            failed |= registry.get(name).cpuGroup().isPoisoned();
        }
        for (String name : registry.names()) {
            registry.get(name).closeTransports(); // first what peers notice, in every group
        }
        destroyModelParallel();
        for (String name : registry.names()) {
            if (!WORLD.equals(name)) {
                destroyGroup(name);
            }
        }
        closed = true;
        world.destroy();
        registry.remove(WORLD);
        options.listener().destroyed(WORLD);
        if (hostMedia != null) {
            // after every broadcaster that used it; after a failure without waiting for the host's
            // other ranks to leave the driver (they are failing too, and a dead one would hold it)
            hostMedia.close(failed);
        }
        if (generationStore != null) {
            generationStore.close();
        }
        if (ownedStore != null) {
            ownedStore.close();
        }
    }

    @Override
    public String toString() {
        return "ParallelState{rank " + config.rank() + "/" + config.worldSize() + ", " + registry + ", " + topology + "}";
    }
}
