package io.jcomm.parallel;

import io.jcomm.api.DebugLevel;
import io.jcomm.api.Device;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ObjectCodec;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.api.device.DeviceCommunicatorProvider;
import io.jcomm.api.store.PrefixStore;
import io.jcomm.api.store.Store;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuBackends;
import io.jcomm.cpu.CpuGroups;
import io.jcomm.cpu.TcpOptions;
import io.jcomm.cpu.spi.CpuBackendProvider;
import io.jcomm.device.CpuDeviceCommunicatorProvider;
import io.jcomm.device.DeviceCommunicators;
import io.jcomm.mq.AeronMedia;
import io.jcomm.mq.MessageQueue;
import io.jcomm.mq.MessageQueueOptions;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.agrona.CloseHelper;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Builds the {@link GroupCoordinator}s of one {@link ParallelState}: everything every group of the
 * job shares (store, codec, timeout, backends, device, host topology, job nonce), resolved once.
 * Immutable apart from the topology, which is known once the world group exists.
 */
final class GroupFactory {

    private static final Logger LOG = LoggerFactory.getLogger(GroupFactory.class);

    /** Ring size for CPU groups that carry only control messages (the device moves the data). */
    static final int CONTROL_RING_BYTES = 64 << 10;

    final DistributedConfig config;
    final ParallelStateOptions options;
    /** The job's store as given (without the job prefix). */
    final Store rawStore;
    final ObjectCodec codec;
    final Duration timeout;
    final String cpuBackend;
    /** Address the CPU groups of this rank listen on and advertise ({@link DistributedConfig#hostname()}). */
    final String hostname;
    final Device device;
    final DeviceCommunicatorProvider hostProvider;
    final DeviceCommunicatorProvider deviceProvider;
    private final CpuBackendProvider cpuProvider;
    /** Broadcasters are made after their groups ({@link LateBroadcaster}), not by {@link #create}. */
    final boolean lateBroadcasters;
    /** MoE dispatch/combine of every group (selected once: a class-path scan). */
    final All2AllManager all2all;
    /** Whether device collectives are fingerprinted and CPU backends run every check ({@code JCOMM_DEBUG=detail}). */
    final boolean debugChecks;

    GroupFactory(DistributedConfig config, ParallelStateOptions options, Store store, ObjectCodec codec,
                 DeviceCommunicators registry) {
        this.config = config;
        this.options = options;
        this.rawStore = store;
        this.codec = codec;
        this.timeout = options.timeout() != null ? options.timeout() : config.timeout();
        this.cpuBackend = options.cpuBackend() != null ? options.cpuBackend() : config.cpuBackend();
        this.hostname = config.hostname();
        String providerName = options.deviceCommunicator() != null ? options.deviceCommunicator() : config.deviceCommunicator();
        this.device = options.device() != null ? options.device() : chooseDevice(registry, providerName, config.localRank());
        this.deviceProvider = registry.select(providerName, device);
        this.hostProvider = device.isCpu() ? deviceProvider : registry.byName(CpuDeviceCommunicatorProvider.NAME);
        this.cpuProvider = config.worldSize() > 1 ? selectQuietly(cpuBackend) : null;
        this.lateBroadcasters = options.broadcasterInBackground() && ParallelState.concurrentStores(store);
        this.debugChecks = options.debugChecks() != null ? options.debugChecks() : config.debug() == DebugLevel.DETAIL;
        this.all2all = All2AllManagers.resolve(options.all2allBackend(), System.getenv(),
                ParallelStateOptions.class.getClassLoader());
    }

    /** The same factory on another store (a new generation's client: {@link ParallelState#shrink}). */
    private GroupFactory(GroupFactory f, Store store) {
        this.config = f.config;
        this.options = f.options;
        this.rawStore = store;
        this.codec = f.codec;
        this.timeout = f.timeout;
        this.cpuBackend = f.cpuBackend;
        this.hostname = f.hostname;
        this.device = f.device;
        this.deviceProvider = f.deviceProvider;
        this.hostProvider = f.hostProvider;
        this.cpuProvider = f.cpuProvider;
        this.lateBroadcasters = f.lateBroadcasters;
        this.debugChecks = f.debugChecks;
        this.all2all = f.all2all;
    }

    GroupFactory withStore(Store store) {
        return new GroupFactory(this, store);
    }

    /** The CPU backend, chosen once per state (a class-path scan); null leaves the choice, and its error, to each group. */
    private static CpuBackendProvider selectQuietly(String backend) {
        try {
            return CpuBackends.select(backend);
        } catch (RuntimeException e) {
            return null;
        }
    }

    /**
     * {@code cuda:LOCAL_RANK} when the configured provider (or, for {@code auto}, any available
     * provider) moves CUDA tensors, the configured provider's device type otherwise, else the host.
     */
    static Device chooseDevice(DeviceCommunicators registry, String providerName, int localRank) {
        if (providerName == null || providerName.isBlank() || providerName.trim().equalsIgnoreCase(DeviceCommunicators.AUTO)) {
            try {
                registry.auto(Device.cuda(localRank));
                return Device.cuda(localRank);
            } catch (RuntimeException e) {
                // on a host with an NVIDIA driver, host memory is a surprise worth a line (typically the
                // io.jcomm:device-communicator-nccl artifact is missing); elsewhere it is the norm
                if (java.nio.file.Files.exists(java.nio.file.Path.of("/proc/driver/nvidia"))) {
                    LOG.warn("device: host memory, although this host has an NVIDIA driver: {}", e.getMessage());
                } else {
                    LOG.debug("device: host memory ({})", e.getMessage());
                }
                return Device.CPU;
            }
        }
        String type = registry.byName(providerName.trim()).deviceType();
        return type.equals("cpu") ? Device.CPU : Device.of(type, localRank);
    }

    /**
     * What one group is: its name, members (global ranks), whether it gets a broadcaster, and the
     * namespace of its store keys and files ({@code namespace}, the same on every member: a group
     * name that is made again, perhaps with other members, must not meet the keys of its previous
     * incarnation); {@code checkCodec}: whether creation checks that every member registered the
     * same classes (once per job is enough: the world group does it).
     */
    record Spec(String name, List<Integer> ranks, boolean messageQueue, String namespace, boolean checkCodec) {
        Spec {
            ranks = List.copyOf(ranks);
        }
    }

    /**
     * Options of the CPU group of {@code spec} for this rank, rendezvousing through {@code store}
     * (the job's store or another client of it).
     */
    CpuGroupOptions cpuOptions(Spec spec, Store store, boolean checkCodec) {
        Store scoped = new PrefixStore(spec.namespace(), new PrefixStore(options.storePrefix(), store));
        CpuGroupOptions.Builder b = CpuGroupOptions.builder().store(scoped)
                .groupName(spec.name())
                .rank(spec.ranks().indexOf(config.rank())).size(spec.ranks().size()).globalRanks(spec.ranks())
                .backend(cpuBackend).timeout(timeout).codec(codec).hostname(hostname);
        TcpOptions.Builder tcp = TcpOptions.builder().hostId(config.hostId())
                // the spec's namespace is this incarnation's alone (it names the state's generation)
                .freshNamespace(true);
        if (!device.isCpu()) {
            // control plane only: small rings, and no staging region (it serves large CPU
            // collectives: 16 MiB of /dev/shm per rank and group, and its pre-faulting at creation)
            tcp.shmRingBytes(CONTROL_RING_BYTES).shmStagingBytes(0);
        }
        b.options(tcp.build());
        if (!checkCodec) {
            // the world group already checked that every rank registered the same classes
            b.option(CpuGroups.CODEC_CHECK_OPTION, "false");
        }
        options.cpuOptions().forEach(b::option);
        if (debugChecks) {
            // after the user's options: debugging wins over a tuning option such as gloo.checkArgs=false
            b.option(CpuGroupOptions.DEBUG_OPTION, CpuGroupOptions.debugValue(DebugLevel.DETAIL));
        }
        return b.build();
    }

    /**
     * Whether this rank launches the media driver of its host for the broadcaster of {@code spec}:
     * the lowest group rank on this host does (as {@link MessageQueue#create} decides).
     */
    boolean ownsMedia(Spec spec, HostTopology topology) {
        for (int r : spec.ranks()) {
            if (topology.sameHost(r, config.rank())) {
                return r == config.rank();
            }
        }
        return false;
    }

    /** Media options for a driver that serves the broadcasters (with room for their streams). */
    AeronMedia.Options mediaOptions(int streams) {
        MessageQueueOptions mq = options.messageQueueOptions();
        return mq.mediaOptions().toBuilder()
                .reserveBytes(streams * (3L * mq.ipcTermLength() + 3L * mq.udpTermLength())).build();
    }

    /** Starts this host's media driver for a broadcaster, on another thread. */
    CompletableFuture<AeronMedia> launchMediaAsync() {
        AeronMedia.Options mo = mediaOptions(1);
        CompletableFuture<AeronMedia> f = new CompletableFuture<>();
        Thread t = new Thread(() -> {
            try {
                f.complete(AeronMedia.launch(mo));
            } catch (Throwable e) {
                f.completeExceptionally(e);
            }
        }, "jcomm-ps-media");
        t.setDaemon(true);
        t.start();
        return f;
    }

    /**
     * Creates the group (collective over its members): CPU group, communicators, broadcaster. {@code store} is the job's store, or another client of it when groups are made
     * concurrently (a blocking wait on a shared network client would hold it for every thread).
     * {@code media} is this rank's launched driver when it owns the host's driver for the
     * broadcaster (else {@code null}); on failure everything made here is released, including it.
     */
    GroupCoordinator create(Spec spec, Store store, HostTopology topology, long jobNonce,
                            CompletableFuture<AeronMedia> media, CompletableFuture<AeronMedia> sharedMedia) {
        int n = spec.ranks().size();
        long t0 = System.nanoTime();
        boolean singleHost = n > 1 && topology.allOnOneHost(spec.ranks());
        ProcessGroup cpu;
        try {
            cpu = CpuGroups.create(cpuOptions(spec, store, spec.checkCodec()), cpuProvider);
        } catch (RuntimeException e) {
            closeMedia(media);
            throw e;
        }
        long t1 = System.nanoTime();
        GroupCoordinator g = assemble(spec, cpu, singleHost, media, sharedMedia);
        if (LOG.isDebugEnabled()) {
            LOG.debug("group {} rank {}: CPU group in {} ms, the rest in {} ms{}", spec.name(), cpu.rank(),
                    String.format("%.2f", (t1 - t0) / 1e6), String.format("%.2f", (System.nanoTime() - t1) / 1e6),
                    singleHost ? " (one host)" : "");
        }
        return g;
    }

    /** Builds the rest of a group around its connected CPU group (which it owns from here on). */
    private GroupCoordinator assemble(Spec spec, ProcessGroup cpu, boolean singleHost,
                                      CompletableFuture<AeronMedia> media, CompletableFuture<AeronMedia> sharedMedia) {
        int n = spec.ranks().size();
        DeviceCommunicator hostComm = null;
        DeviceCommunicator deviceComm = null;
        MessageQueue mq = null;
        AeronMedia ownedMedia = null;
        try {
            if (n > 1) {
                hostComm = hostProvider.create(new DeviceCommunicatorContext(cpu, Device.CPU, timeout, Map.of()));
                deviceComm = device.isCpu() ? hostComm
                        : deviceProvider.create(new DeviceCommunicatorContext(cpu, device, timeout, Map.of()));
                if (spec.messageQueue() && !lateBroadcasters) {
                    ownedMedia = media == null ? null : await(media, spec);
                    media = null;
                    AeronMedia use = sharedMedia != null ? await(sharedMedia, spec) : ownedMedia;
                    MessageQueueOptions mo = options.messageQueueOptions().toBuilder().hostId(config.hostId())
                            .codec(codec).timeout(timeout).media(use).build();
                    mq = MessageQueue.create(cpu, 0, mo);
                }
            }
            return new GroupCoordinator(spec.name(), spec.ranks(), config.rank(), cpu, hostComm, deviceComm, device,
                    mq, ownedMedia, singleHost, options.deviceAllocator(), timeout, deviceProvider.name(), all2all, debugChecks);
        } catch (RuntimeException e) {
            closeMedia(media);
            CloseHelper.quietCloseAll(mq, ownedMedia);
            if (deviceComm != null && deviceComm != hostComm) {
                deviceComm.close();
            }
            if (hostComm != null) {
                hostComm.close();
            }
            cpu.close();
            throw e;
        }
    }

    private AeronMedia await(CompletableFuture<AeronMedia> media, Spec spec) {
        try {
            return media.get(timeout.toNanos(), TimeUnit.NANOSECONDS);
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof RuntimeException) {
                throw (RuntimeException) c;
            }
            throw new io.jcomm.api.BackendException(OpContext.of(spec.name(), -1, "launchMediaDriver"),
                    "media driver failed to start: " + c, c);
        } catch (TimeoutException e) {
            closeMedia(media);
            throw new io.jcomm.api.CommTimeoutException(OpContext.of(spec.name(), -1, "launchMediaDriver"),
                    "media driver did not start within " + timeout.toMillis() + " ms");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            closeMedia(media);
            throw new io.jcomm.api.CommException(OpContext.of(spec.name(), -1, "launchMediaDriver"), "interrupted", e);
        }
    }

    /** Closes a launched (or still launching) media driver. */
    static void closeMedia(CompletableFuture<AeronMedia> media) {
        if (media != null) {
            media.whenComplete((m, t) -> {
                if (m != null) {
                    m.close();
                }
            });
        }
    }
}
