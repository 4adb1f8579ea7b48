package io.jcomm.transfer;

import io.jcomm.runtime.Providers;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.DeviceCommunicatorProvider;
import io.jcomm.api.device.DeviceMemory;
import io.jcomm.runtime.shm.ShmFiles;
import io.jcomm.api.store.Store;
import io.jcomm.transfer.internal.PeerRecords;
import io.jcomm.transfer.internal.RegionTable;
import io.jcomm.transfer.internal.ShmRegionFile;
import io.jcomm.transfer.internal.tcp.TcpEndpoint;
import io.jcomm.transfer.spi.PeerInfo;
import io.jcomm.transfer.spi.RegionAccess;
import io.jcomm.transfer.spi.Segment;
import io.jcomm.transfer.spi.Transport;
import io.jcomm.transfer.spi.TransportContext;
import io.jcomm.transfer.spi.TransportProvider;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * A named endpoint of one-sided transfers, like a NIXL agent: it registers memory, publishes itself
 * in a {@link Store} (any job's store, or a standalone {@code commstore}, so that agents of different
 * jobs find each other), and writes into or reads from memory other agents registered, without the
 * remote side taking part beyond its transport's service threads.
 *
 * <pre>{@code
 * try (TransferAgent decode = TransferAgent.open(store, TransferOptions.builder("decode-0").build())) {
 *     MemoryRegion kv = decode.allocateShared(64 << 20, Set.of(Permission.WRITE));
 *     store.set("kv/decode-0", kv.descriptor().encode());                  // hand the descriptor over
 *     Notification n = decode.pollNotification(Duration.ofSeconds(30)).orElseThrow();
 * }
 * // in the prefill job:
 * RemoteDescriptor kv = RemoteDescriptor.decode(store.get("kv/decode-0"));
 * prefill.write(blocks.slice(0, 1 << 20), kv.slice(0, 1 << 20), "req-7".getBytes()).await();
 * }</pre>
 *
 * <p>Transports are {@link TransportProvider} plug-ins found with {@link ServiceLoader}: {@code shm}
 * (same host, into a {@link MemoryKind#SHARED} region: one copy straight into the peer's file) and
 * {@code tcp} (any region, several streams per peer). Each transfer goes by the transport of highest
 * priority that reaches its remote range.
 *
 * <p>Guarantees: every remote access is checked by the owner against its registration (a stale,
 * out-of-range or not permitted descriptor is refused with a {@link TransferRefusedException} and
 * writes nothing); with a job token configured, agents prove it to each other before any request;
 * a peer that dies fails its pending transfers with a {@link PeerFailureException} as soon as its
 * connection breaks; {@link #deregister} waits for the transfers using a region (a tcp write into it
 * stops at its next 1 MiB step and fails) and never frees memory still in use.
 *
 * <p>Thread safe. Two agents in one process are independent.
 */
public final class TransferAgent implements AutoCloseable {

    private static final Duration CLOSE_DEREGISTER = Duration.ofSeconds(2);
    private static final int PROBE_MILLIS = 300;

    private final Store store;
    private final TransferOptions options;
    private final String name;
    private final String storeKey;
    private final byte[] record;
    private final RegionTable regions;
    private final Path sharedDirectory;
    private final List<Transport> transports;
    private final ArrayBlockingQueue<Notification> notifications;
    private final Map<String, PeerInfo> peers = new ConcurrentHashMap<>();
    private volatile boolean closed;

    private TransferAgent(Store store, TransferOptions options) {
        this.store = store;
        this.options = options;
        this.name = options.name();
        this.storeKey = keyOf(options.namespace(), name);
        this.regions = new RegionTable(name, options.maxRegions());
        this.notifications = new ArrayBlockingQueue<>(options.notificationQueueCapacity());
        ShmFiles.cleanStale(options.shmDirectory(), ShmRegionFile.DIR_PREFIX);
        this.sharedDirectory = ShmFiles.createOwnedDirectory(options.shmDirectory(), ShmRegionFile.DIR_PREFIX, name);
        List<Transport> opened = new ArrayList<>();
        try {
            TransportContext context = new Context();
            List<TransportProvider> providers = Providers.load(TransportProvider.class, TransferAgent.class.getClassLoader())
                    .available(p -> options.transports().map(s -> s.contains(p.name())).orElse(true));
            if (providers.isEmpty()) {
                throw new CommException(ctx("open"), "no transport available (asked for "
                        + options.transports().map(Object::toString).orElse("any") + ")");
            }
            Map<String, byte[]> endpoints = new LinkedHashMap<>();
            for (TransportProvider p : providers) {
                Transport t = p.open(context);
                opened.add(t);
                endpoints.put(t.name(), t.endpoint());
            }
            this.transports = List.copyOf(opened);
            this.record = PeerRecords.encode(new PeerInfo(name, options.hostId(), endpoints));
            claimName();
        } catch (RuntimeException e) {
            for (Transport t : opened) {
                t.close();
            }
            ShmFiles.deleteRecursively(sharedDirectory);
            throw e;
        }
    }

    /**
     * Opens an agent: starts its transports and publishes it in {@code store} under
     * {@code <namespace>/agents/<name>}.
     *
     * @throws CommException when no transport is available, or the name is held by a live agent (one
     *         whose tcp endpoint still answers; a dead agent's record is taken over)
     */
    public static TransferAgent open(Store store, TransferOptions options) {
        return new TransferAgent(store, options);
    }

    static String keyOf(String namespace, String agent) {
        return namespace + "/agents/" + agent;
    }

    private OpContext ctx(String op) {
        return OpContext.of("transfer:" + name, -1, op);
    }

    private void claimName() {
        byte[] got = store.compareSet(storeKey, new byte[0], record);
        if (Arrays.equals(got, record)) {
            return;
        }
        try {
            PeerInfo old = PeerRecords.decode(got);
            byte[] ep = old.endpoints().get("tcp");
            if (ep != null) {
                TcpEndpoint e = TcpEndpoint.decode(ep, name);
                try (Socket s = new Socket()) {
                    s.connect(new InetSocketAddress(e.host(), e.port()), PROBE_MILLIS);
                    throw new CommException(ctx("open"), "agent name " + name + " is held by a live agent at " + e.host() + ":"
                            + e.port() + " (store key " + storeKey + ")");
                } catch (IOException dead) {
                    // its endpoint does not answer: take the name over
                }
            }
        } catch (ProtocolException unreadable) {
            // not a record of ours: take it over
        }
        store.set(storeKey, record);
    }

    /** This agent's name. */
    public String name() {
        return name;
    }

    /** The options it was opened with. */
    public TransferOptions options() {
        return options;
    }

    /** The names of the transports it opened, highest priority first. */
    public List<String> transports() {
        List<String> l = new ArrayList<>();
        for (Transport t : transports) {
            l.add(t.name());
        }
        return l;
    }

    // ------------------------------------------------------------------ memory

    /**
     * Registers {@code memory} from its position to its limit (a heap buffer, or a direct buffer such
     * as a mapped file or a tensor's memory), without copying.
     *
     * @param remoteAccess what remote agents may do with it (empty: only this agent's transfers use it)
     * @throws IllegalArgumentException for a read-only buffer (a read must be able to land in it)
     */
    public MemoryRegion register(ByteBuffer memory, Set<Permission> remoteAccess) {
        checkOpen("register");
        if (memory.isReadOnly()) {
            throw new IllegalArgumentException("a registered buffer must be writable");
        }
        long[] slot = regions.reserve();
        ByteBuffer m = memory.slice();
        return new MemoryRegion(name, regions.add(slot, m.isDirect() ? MemoryKind.OFF_HEAP : MemoryKind.HEAP, m,
                Permission.bits(remoteAccess), null));
    }

    /**
     * Registers a tensor's memory. A host tensor's bytes are registered as they are (as
     * {@link #register(ByteBuffer, Set)}). A device tensor is registered through the
     * {@link DeviceMemory} of an available {@link DeviceCommunicatorProvider} of its device type (the
     * highest priority one that offers it): the region is {@link MemoryKind#DEVICE}, the agent keeps a host
     * staging buffer of the tensor's size, remote writes land there and are copied to the device before
     * they are answered, remote reads copy from the device first, and this agent's own transfers from or
     * into the region copy the same way around them. Remote agents reach it over tcp.
     *
     * @throws IllegalArgumentException for a device tensor of a type no available provider copies, or of
     *         more than 2 GiB
     */
    public MemoryRegion register(Tensor tensor, Set<Permission> remoteAccess) {
        if (tensor.isHost()) {
            return register(tensor.buffer(), remoteAccess);
        }
        checkOpen("register");
        String type = tensor.device().type();
        DeviceMemory memory = null;
        int best = Integer.MIN_VALUE;
        for (DeviceCommunicatorProvider p : ServiceLoader.load(DeviceCommunicatorProvider.class)) {
            if (p.deviceType().equals(type) && p.priority() > best && p.availability().available()) {
                Optional<DeviceMemory> m = p.deviceMemory();
                if (m.isPresent()) {
                    memory = m.get();
                    best = p.priority();
                }
            }
        }
        if (memory == null) {
            throw new IllegalArgumentException("no available device provider copies " + type + " memory: cannot register " + tensor);
        }
        if (tensor.byteSize() > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException("a region has at most 2 GiB, " + tensor + " has " + tensor.byteSize() + " bytes");
        }
        long[] slot = regions.reserve();
        ByteBuffer staging = ByteBuffer.allocateDirect((int) tensor.byteSize());
        return new MemoryRegion(name, regions.add(slot, MemoryKind.DEVICE, staging, Permission.bits(remoteAccess), null, memory,
                tensor));
    }

    /**
     * Allocates and registers a zero-filled shared-memory region of {@code bytes} (a file in the
     * options' shm directory, {@code 0600}): agents on this host copy straight into it.
     *
     * @throws CommException when the file cannot be made (e.g. /dev/shm too small)
     */
    public MemoryRegion allocateShared(int bytes, Set<Permission> remoteAccess) {
        checkOpen("allocateShared");
        if (bytes < 0) {
            throw new IllegalArgumentException("bytes " + bytes);
        }
        long[] slot = regions.reserve();
        try {
            ShmRegionFile f = ShmRegionFile.create(sharedDirectory, (int) slot[0], slot[1], bytes, Permission.bits(remoteAccess));
            return new MemoryRegion(name, regions.add(slot, MemoryKind.SHARED, f.data(), Permission.bits(remoteAccess), f));
        } catch (IOException e) {
            regions.release(slot);
            throw new CommException(ctx("allocateShared"), "cannot allocate a shared region of " + bytes + " bytes: "
                    + e.getMessage(), e);
        }
    }

    /** {@link #deregister(MemoryRegion, Duration)} with the options' timeout. */
    public void deregister(MemoryRegion region) {
        deregister(region, options.timeout());
    }

    /**
     * Deregisters a region: its descriptors go stale at once (later accesses are refused), a tcp write
     * into it in progress stops at its next 1 MiB step and fails with {@code STALE}, and this call
     * waits for every access in flight (remote and local) before it returns. A shared region's file
     * is removed. Idempotent.
     *
     * @throws CommTimeoutException when accesses are still in flight after {@code timeout}; the region
     *         then stays revoked and its slot is never reused, so nothing is corrupted
     */
    public void deregister(MemoryRegion region, Duration timeout) {
        regions.remove(region.entry(), Deadline.after(timeout));
    }

    // ------------------------------------------------------------------ transfers

    /** Writes one range with the options' timeout; {@code notification} may be null. */
    public TransferHandle write(LocalDescriptor local, RemoteDescriptor remote, byte[] notification) {
        return write(List.of(local), List.of(remote), notification, options.timeout());
    }

    /** Writes one range; {@code notification} may be null. */
    public TransferHandle write(LocalDescriptor local, RemoteDescriptor remote, byte[] notification, Duration timeout) {
        return write(List.of(local), List.of(remote), notification, timeout);
    }

    /**
     * Writes {@code local.get(i)} into {@code remote.get(i)} for every i (all remote ranges of one
     * agent, equal lengths pairwise), then delivers {@code notification} (if not null) to that agent
     * after all of the data is in its memory. Returns at once; the first transfer to a peer also looks
     * it up in the store and connects, within the deadline.
     *
     * @throws IllegalArgumentException for lists of different sizes, unequal lengths, several remote
     *         agents, or a notification over {@link TransferOptions#maxNotificationBytes()}
     */
    public TransferHandle write(List<LocalDescriptor> local, List<RemoteDescriptor> remote, byte[] notification,
                                Duration timeout) {
        return transfer(true, local, remote, notification, timeout);
    }

    /** Reads one range with the options' timeout. */
    public TransferHandle read(LocalDescriptor local, RemoteDescriptor remote) {
        return read(List.of(local), List.of(remote), options.timeout());
    }

    /** Reads {@code remote.get(i)} into {@code local.get(i)} for every i (see {@link #write(List, List, byte[], Duration)}). */
    public TransferHandle read(List<LocalDescriptor> local, List<RemoteDescriptor> remote, Duration timeout) {
        return transfer(false, local, remote, null, timeout);
    }

    /** Delivers a notification alone to {@code agent}. */
    public TransferHandle notify(String agent, byte[] notification, Duration timeout) {
        OpContext c = ctx("notify");
        checkOpen("notify");
        checkNotification(notification);
        Deadline d = Deadline.after(timeout);
        CompletableFuture<Void> f;
        try {
            PeerInfo peer = peer(agent, d);
            f = notifier(peer).notify(peer, notification.clone(), d);
        } catch (CommException e) {
            f = CompletableFuture.failedFuture(e);
        }
        f.whenComplete((v, e) -> onFailure(agent, e));
        return new TransferHandle(f, d, 0, c);
    }

    private TransferHandle transfer(boolean write, List<LocalDescriptor> local, List<RemoteDescriptor> remote,
                                    byte[] notification, Duration timeout) {
        OpContext c = ctx(write ? "write" : "read");
        checkOpen(c.operation());
        if (local.size() != remote.size() || local.isEmpty()) {
            throw new IllegalArgumentException(local.size() + " local and " + remote.size() + " remote ranges");
        }
        if (notification != null) {
            checkNotification(notification);
            notification = notification.clone();
        }
        String agent = remote.get(0).agent();
        long bytes = 0;
        for (int i = 0; i < local.size(); i++) {
            if (!remote.get(i).agent().equals(agent)) {
                throw new IllegalArgumentException("one transfer reaches one agent: " + agent + " and " + remote.get(i).agent());
            }
            if (local.get(i).length() != remote.get(i).length()) {
                throw new IllegalArgumentException("range " + i + ": local " + local.get(i).length() + " bytes, remote "
                        + remote.get(i).length());
            }
            bytes += local.get(i).length();
        }
        Deadline d = Deadline.after(timeout);
        List<RegionTable.Entry> pinned = new ArrayList<>(local.size());
        CompletableFuture<Void> f;
        try {
            List<Segment> segments = new ArrayList<>(local.size());
            List<LocalDescriptor> deviceReads = null;
            for (LocalDescriptor l : local) {
                RegionTable.Entry e = l.region().entry();
                if (!e.pin()) {
                    throw new CommClosedException(c, "local region " + e.id() + " is deregistered");
                }
                pinned.add(e);
                if (e.kind() == MemoryKind.DEVICE) {
                    if (write) {
                        e.fill(l.offset(), l.length()); // the device's bytes into the staging buffer the transport sends
                    } else {
                        (deviceReads == null ? deviceReads = new ArrayList<>() : deviceReads).add(l);
                    }
                }
                segments.add(new Segment(e.view(l.offset(), l.length()), remote.get(segments.size())));
            }
            PeerInfo peer = peer(agent, d);
            f = dispatch(write, peer, segments, notification, d);
            if (deviceReads != null) {
                List<LocalDescriptor> reads = deviceReads;
                f = f.thenRun(() -> {
                    for (LocalDescriptor l : reads) {
                        l.region().entry().flush(l.offset(), l.length()); // what arrived, onto the device
                    }
                });
            }
        } catch (CommException e) {
            f = CompletableFuture.failedFuture(e);
        }
        f.whenComplete((v, e) -> {
            for (RegionTable.Entry p : pinned) {
                p.unpin();
            }
            onFailure(agent, e);
        });
        return new TransferHandle(f, d, bytes, c);
    }

    private CompletableFuture<Void> dispatch(boolean write, PeerInfo peer, List<Segment> segments, byte[] notification,
                                             Deadline d) {
        Transport only = null;
        Map<Transport, List<Segment>> groups = null;
        for (Segment s : segments) {
            Transport t = route(peer, s.remote());
            if (groups == null && (only == null || only == t)) {
                only = t;
                continue;
            }
            if (groups == null) {
                groups = new LinkedHashMap<>();
                for (Segment earlier : segments) {
                    if (earlier == s) {
                        break;
                    }
                    groups.computeIfAbsent(only, k -> new ArrayList<>()).add(earlier);
                }
            }
            groups.computeIfAbsent(t, k -> new ArrayList<>()).add(s);
        }
        if (groups == null) {
            if (!write) {
                return only.read(peer, segments, d);
            }
            if (notification == null || only.carriesNotifications()) {
                return only.write(peer, segments, notification, d);
            }
            Transport n = notifier(peer);
            return only.write(peer, segments, null, d).thenCompose(v -> n.notify(peer, notification, d));
        }
        List<CompletableFuture<Void>> fs = new ArrayList<>();
        for (Map.Entry<Transport, List<Segment>> g : groups.entrySet()) {
            fs.add(write ? g.getKey().write(peer, g.getValue(), null, d) : g.getKey().read(peer, g.getValue(), d));
        }
        CompletableFuture<Void> all = CompletableFuture.allOf(fs.toArray(new CompletableFuture<?>[0]));
        if (notification == null) {
            return all;
        }
        Transport n = notifier(peer);
        return all.thenCompose(v -> n.notify(peer, notification, d));
    }

    private Transport route(PeerInfo peer, RemoteDescriptor remote) {
        for (Transport t : transports) {
            if (t.reaches(peer, remote)) {
                return t;
            }
        }
        throw new PeerFailureException(ctx("route"), -1, "no transport of " + transports() + " reaches region "
                + remote.regionId() + " of agent " + peer.name() + " (it offers " + peer.endpoints().keySet() + ")");
    }

    private Transport notifier(PeerInfo peer) {
        for (Transport t : transports) {
            if (t.carriesNotifications() && peer.endpoints().containsKey(t.name())) {
                return t;
            }
        }
        throw new PeerFailureException(ctx("notify"), -1, "no transport carries notifications to agent " + peer.name());
    }

    private void checkNotification(byte[] n) {
        if (n.length > options.maxNotificationBytes()) {
            throw new IllegalArgumentException("a notification has at most " + options.maxNotificationBytes() + " bytes, got "
                    + n.length);
        }
    }

    private void onFailure(String agent, Throwable e) {
        Throwable c = e;
        while (c instanceof CompletionException && c.getCause() != null) {
            c = c.getCause();
        }
        if (c instanceof PeerFailureException) {
            peers.remove(agent);
            for (Transport t : transports) {
                t.forget(agent);
            }
        }
    }

    private PeerInfo peer(String agent, Deadline d) {
        PeerInfo p = peers.get(agent);
        if (p != null) {
            return p;
        }
        byte[] v;
        try {
            v = store.get(keyOf(options.namespace(), agent), d.remaining());
        } catch (CommTimeoutException e) {
            throw new CommTimeoutException(ctx("lookup"), "agent " + agent + " is not in the store (key "
                    + keyOf(options.namespace(), agent) + ") before the deadline", e);
        }
        p = PeerRecords.decode(v);
        if (!p.name().equals(agent)) {
            throw new ProtocolException(ctx("lookup"), "the store record of agent " + agent + " names " + p.name());
        }
        peers.put(agent, p);
        return p;
    }

    // ------------------------------------------------------------------ notifications

    /** The next notification, if one is queued. Never blocks. */
    public Optional<Notification> pollNotification() {
        return Optional.ofNullable(notifications.poll());
    }

    /** The next notification, waiting up to {@code timeout}; empty if none came. */
    public Optional<Notification> pollNotification(Duration timeout) {
        try {
            return Optional.ofNullable(notifications.poll(timeout.toNanos(), TimeUnit.NANOSECONDS));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Optional.empty();
        }
    }

    private void checkOpen(String op) {
        if (closed) {
            throw new CommClosedException(ctx(op), "transfer agent " + name + " is closed");
        }
    }

    /**
     * Closes the agent: deregisters its regions (waiting briefly for transfers in flight), stops its
     * transports (transfers in flight fail with {@link CommClosedException}), removes its store record
     * and shared files. Idempotent.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        Deadline d = Deadline.after(CLOSE_DEREGISTER);
        for (RegionTable.Entry e : regions.live()) {
            try {
                regions.remove(e, d);
            } catch (CommTimeoutException ignored) {
                // stays revoked; the process keeps the memory
            }
        }
        for (Transport t : transports) {
            t.close();
        }
        try {
            if (store.check(List.of(storeKey)) && Arrays.equals(store.get(storeKey, Duration.ofSeconds(1)), record)) {
                store.deleteKey(storeKey);
            }
        } catch (CommException | UncheckedIOException ignored) {
            // the store is gone: the record names a closed endpoint, which the next owner of the name takes over
        }
        ShmFiles.deleteRecursively(sharedDirectory);
    }

    @Override
    public String toString() {
        return "TransferAgent[" + name + ", transports=" + transports() + (closed ? ", closed" : "") + "]";
    }

    private final class Context implements TransportContext {
        @Override
        public TransferOptions options() {
            return options;
        }

        @Override
        public Path sharedRegionDirectory() {
            return sharedDirectory;
        }

        @Override
        public RegionAccess acquire(int regionId, long generation, long offset, long length, Permission access, String peer) {
            return regions.acquire(regionId, generation, offset, length, access, peer);
        }

        @Override
        public void deliver(Notification notification, Deadline deadline) {
            try {
                Deadline d = deadline.min(Deadline.after(options.notificationOfferTimeout()));
                if (!notifications.offer(notification, d.remainingNanos(), TimeUnit.NANOSECONDS)) {
                    throw new TransferRefusedException(ctx("notify"), TransferRefusedException.Reason.NOTIFICATION_QUEUE_FULL,
                            "agent " + name + " has " + notifications.size() + " notifications waiting");
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CommClosedException(ctx("notify"), "interrupted");
            }
        }
    }
}
