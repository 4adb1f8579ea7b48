package io.jcomm.tools.demo;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ProtocolException;
import io.jcomm.transfer.LocalDescriptor;
import io.jcomm.transfer.MemoryRegion;
import io.jcomm.transfer.Notification;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import io.jcomm.transfer.TransferAgent;
import io.jcomm.transfer.TransferHandle;
import java.io.PrintStream;
import java.nio.BufferUnderflowException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.stream.IntStream;

/**
 * {@code demo --weights trainer|engine}: a trainer job pushes fresh weights into every rank of a
 * running inference engine job, version after version, as RL trainers do; each job under its own
 * {@code commrun}, their transfer agents meeting in one store (the engine job's launcher store, or a
 * standalone {@code commstore}):
 *
 * <pre>
 * bin/commrun --nproc-per-node 2 --master-port 29620 demo --weights engine
 * bin/commrun --nproc-per-node 2 demo --weights trainer --store 127.0.0.1:29620
 * </pre>
 *
 * The weight set is {@code --tensors} tensors of uneven sizes, {@code --weights-mib} in all
 * ({@link #tensorSizes}). Every engine rank holds all of it: it registers shared-memory regions of at
 * most {@code --region-mib} (a tensor never straddles two; {@link #place}) and publishes their
 * descriptors. Trainer rank t owns a shard of the tensors ({@link #owners}, balanced by bytes), kept in
 * shared-memory regions of its own; for each of {@code --versions} versions it fills its tensors with
 * bytes that follow from (version, tensor, offset) and writes all of them into every engine rank, one
 * transfer per engine rank with one notification after the last byte. An engine rank verifies the
 * tensors of each trainer rank as its notification comes; once every trainer rank's tensors of the
 * version are verified it acknowledges the version to every trainer rank, which is the credit for the
 * next (a version overwrites the previous one in place). A wrong byte, a refused transfer, a dead peer
 * or a missed deadline fails the rank (exit 1).
 *
 * <p>Lines for tests: {@code demo --weights: engine rank R verified V versions, B bytes, wrong bytes W, ...}
 * and {@code demo --weights: trainer rank R pushed V versions of N tensors, B bytes, to E engine ranks, ...}.
 */
final class WeightsDemo {

    /** Store keys of a run, under this prefix. */
    static final String KEY_PREFIX = "jcomm/weights-demo/";
    /** Most tensors of a run. */
    static final int MAX_TENSORS = 1 << 16;
    /** Most versions of a run. */
    static final int MAX_VERSIONS = 1 << 20;
    /** Largest region (a shared-memory region is one mapping of its file, header included). */
    static final long MAX_REGION_BYTES = 2040L << 20;
    /** The mark a trainer rank sets for an engine rank when it is done with it. */
    private static final String DONE = "trainer-done";
    /** A version's notification: version, trainer rank, trainer ranks, tensors, bytes, first write's epoch micros. */
    private static final int NOTE_BYTES = 6 * 8;
    /** An engine rank's acknowledgement: version, engine rank. */
    private static final int ACK_BYTES = 2 * 8;

    /**
     * The run's shape: both jobs must be given the same.
     *
     * @param totalBytes  bytes of the whole weight set
     * @param tensors     tensors in it
     * @param versions    versions pushed
     * @param regionBytes largest registered region
     */
    record Shape(long totalBytes, int tensors, int versions, long regionBytes) {

        /** Why this shape cannot run, or null. */
        String problem() {
            if (tensors < 1 || tensors > MAX_TENSORS) {
                return "--tensors must be 1.." + MAX_TENSORS;
            }
            if (versions < 1 || versions > MAX_VERSIONS) {
                return "--versions must be 1.." + MAX_VERSIONS;
            }
            if (regionBytes < 8 || regionBytes > MAX_REGION_BYTES || regionBytes % 8 != 0) {
                return "--region-mib must be 1.." + (MAX_REGION_BYTES >> 20);
            }
            if (totalBytes % 8 != 0 || totalBytes / 8 < 2L * tensors) {
                return "the weight set (" + totalBytes + " bytes) must hold at least 16 bytes per tensor (" + tensors
                        + " tensors); give a larger --weights-mib or fewer --tensors";
            }
            long largest = Arrays.stream(tensorSizes(totalBytes, tensors)).max().orElseThrow();
            if (largest > regionBytes) {
                return "the largest tensor (" + largest + " bytes) does not fit in a region of --region-mib "
                        + (regionBytes >> 20) + "; give more --tensors or a larger --region-mib";
            }
            return null;
        }

        String encode() {
            return "bytes=" + totalBytes + " tensors=" + tensors + " versions=" + versions + " region-bytes=" + regionBytes;
        }
    }

    /**
     * Where tensors lie in a set of regions: tensor {@code tensors[k]} at {@code offset[k]} of region
     * {@code region[k]}; region {@code j} has {@code regionBytes[j]} bytes.
     */
    record Placement(int[] tensors, int[] region, long[] offset, long[] regionBytes) {
    }

    private final String role;
    private final String storeAddress;
    private final Shape shape;
    private final Duration timeout;
    private final PrintStream out;

    WeightsDemo(String role, String storeAddress, Shape shape, Duration timeout, PrintStream out) {
        this.role = role;
        this.storeAddress = storeAddress;
        this.shape = shape;
        this.timeout = timeout;
        this.out = out;
    }

    /**
     * The sizes of {@code tensors} tensors of {@code totalBytes} in all: uneven (weights 3 to 10 in a
     * repeating order, as layers of a model differ), each a positive multiple of 8 ({@code totalBytes} a
     * multiple of 8 with a word per tensor at least).
     */
    static long[] tensorSizes(long totalBytes, int tensors) {
        long words = totalBytes / 8;
        long[] weight = new long[tensors];
        long sum = 0;
        for (int i = 0; i < tensors; i++) {
            weight[i] = 3 + (i * 5L) % 8;
            sum += weight[i];
        }
        long[] sizes = new long[tensors];
        long given = 0;
        for (int i = 0; i < tensors; i++) { // a word each, the rest by weight
            sizes[i] = 1 + Math.multiplyExact(words - tensors, weight[i]) / sum;
            given += sizes[i];
        }
        for (int i = 0; given < words; i = (i + 1) % tensors) { // the rest, a word each
            sizes[i]++;
            given++;
        }
        for (int i = 0; i < tensors; i++) {
            sizes[i] *= 8;
        }
        return sizes;
    }

    /**
     * The trainer rank that owns each tensor, as a sharded trainer holds its shard: largest tensor
     * first, each to the rank with the fewest bytes so far (the lowest such rank), so that the ranks'
     * shards differ by at most one tensor's size.
     */
    static int[] owners(long[] sizes, int trainers) {
        Integer[] order = new Integer[sizes.length];
        for (int i = 0; i < order.length; i++) {
            order[i] = i;
        }
        Arrays.sort(order, (a, b) -> sizes[a] != sizes[b] ? Long.compare(sizes[b], sizes[a]) : Integer.compare(a, b));
        long[] load = new long[trainers];
        int[] owner = new int[sizes.length];
        for (int i : order) {
            int least = 0;
            for (int t = 1; t < trainers; t++) {
                if (load[t] < load[least]) {
                    least = t;
                }
            }
            owner[i] = least;
            load[least] += sizes[i];
        }
        return owner;
    }

    /** The tensors {@code owner} names {@code rank}'s, in index order. */
    static int[] shard(int[] owner, int rank) {
        return IntStream.range(0, owner.length).filter(i -> owner[i] == rank).toArray();
    }

    /**
     * Places {@code tensors} in order into regions of at most {@code regionBytes}: each in the current
     * region if it fits, else at the start of a new one.
     *
     * @throws IllegalArgumentException when a tensor is larger than {@code regionBytes}
     */
    static Placement place(long[] sizes, int[] tensors, long regionBytes) {
        int[] region = new int[tensors.length];
        long[] offset = new long[tensors.length];
        List<Long> regions = new ArrayList<>();
        long used = 0;
        for (int k = 0; k < tensors.length; k++) {
            long size = sizes[tensors[k]];
            if (size > regionBytes) {
                throw new IllegalArgumentException("tensor " + tensors[k] + " of " + size + " bytes exceeds a region of "
                        + regionBytes);
            }
            if (regions.isEmpty() || used + size > regionBytes) {
                if (!regions.isEmpty()) {
                    regions.set(regions.size() - 1, used);
                }
                regions.add(0L);
                used = 0;
            }
            region[k] = regions.size() - 1;
            offset[k] = used;
            used += size;
        }
        if (!regions.isEmpty()) {
            regions.set(regions.size() - 1, used);
        }
        return new Placement(tensors.clone(), region, offset, regions.stream().mapToLong(Long::longValue).toArray());
    }

    /** The first long word of tensor {@code tensor} of version {@code version} ({@link BytePattern}). */
    static long seed(int version, int tensor) {
        return BytePattern.seed(version, tensor, -1);
    }

    int run() {
        String problem = shape.problem();
        if (problem != null) {
            System.err.println("demo --weights: " + problem);
            return 2;
        }
        if (!role.equals("trainer") && !role.equals("engine")) {
            System.err.println("demo --weights: the role is trainer or engine, not " + role);
            return 2;
        }
        int world = DistributedConfig.fromEnvironment().worldSize();
        return DemoLink.run("weights", KEY_PREFIX, role, "engine", storeAddress, timeout,
                link -> role.equals("engine") ? engine(link, world) : trainer(link, world));
    }

    /** Allocates shared regions of {@code p}'s sizes, remote agents granted {@code access}. */
    private static List<MemoryRegion> allocate(TransferAgent agent, Placement p, Set<Permission> access) {
        List<MemoryRegion> l = new ArrayList<>();
        for (long bytes : p.regionBytes()) {
            l.add(agent.allocateShared(Math.toIntExact(bytes), access));
        }
        return l;
    }

    private static List<ByteBuffer> buffers(List<MemoryRegion> regions) {
        List<ByteBuffer> l = new ArrayList<>();
        for (MemoryRegion r : regions) {
            l.add(r.buffer().order(ByteOrder.LITTLE_ENDIAN));
        }
        return l;
    }

    /** Descriptors as one value: a count, then each one's length and bytes. */
    static byte[] encodeDescriptors(List<RemoteDescriptor> ds) {
        List<byte[]> enc = ds.stream().map(RemoteDescriptor::encode).toList();
        ByteBuffer b = ByteBuffer.allocate(4 + enc.stream().mapToInt(e -> 4 + e.length).sum()).order(ByteOrder.LITTLE_ENDIAN);
        b.putInt(enc.size());
        for (byte[] e : enc) {
            b.putInt(e.length).put(e);
        }
        return b.array();
    }

    /** {@link #encodeDescriptors}'s descriptors, every length checked. */
    static List<RemoteDescriptor> decodeDescriptors(byte[] bytes) {
        ByteBuffer b = ByteBuffer.wrap(bytes).order(ByteOrder.LITTLE_ENDIAN);
        try {
            int n = b.getInt();
            if (n < 0 || n > bytes.length / 4) {
                throw new ProtocolException("a list of " + n + " descriptors in " + bytes.length + " bytes");
            }
            List<RemoteDescriptor> l = new ArrayList<>(n);
            for (int i = 0; i < n; i++) {
                int len = b.getInt();
                if (len < 0 || len > b.remaining()) {
                    throw new ProtocolException("descriptor " + i + " of " + len + " bytes in " + b.remaining());
                }
                byte[] d = new byte[len];
                b.get(d);
                l.add(RemoteDescriptor.decode(d));
            }
            if (b.hasRemaining()) {
                throw new ProtocolException(b.remaining() + " bytes after " + n + " descriptors");
            }
            return l;
        } catch (BufferUnderflowException e) {
            throw new ProtocolException("a list of descriptors cut short at " + bytes.length + " bytes");
        }
    }

    // ------------------------------------------------------------------ engine

    private int engine(DemoLink link, int world) {
        int rank = link.rank();
        TransferAgent agent = link.agent();
        long[] sizes = tensorSizes(shape.totalBytes(), shape.tensors());
        int[] all = IntStream.range(0, sizes.length).toArray();
        Placement placement = place(sizes, all, shape.regionBytes());
        List<MemoryRegion> regions = allocate(agent, placement, Set.of(Permission.WRITE));
        List<ByteBuffer> mem = buffers(regions);
        link.publishShape(shape.encode() + " engines=" + world);
        link.store().set(link.key("regions", rank), encodeDescriptors(regions.stream().map(MemoryRegion::descriptor).toList()));
        out.println(link.who() + " published " + regions.size() + " regions of " + shape.totalBytes() + " bytes in all ("
                + shape.tensors() + " tensors) as " + agent.name() + " via " + agent.transports());
        out.flush();
        int trainers = -1;
        int[] owner = null;
        long[] versionMicros = new long[shape.versions()];
        long firstSend = 0;
        long lastVerified = 0;
        for (int v = 0; v < shape.versions(); v++) {
            boolean[] seen = trainers < 0 ? null : new boolean[trainers];
            int got = 0;
            long versionStart = Long.MAX_VALUE;
            while (trainers < 0 || got < trainers) {
                Notification n = link.next("version " + v + " from the trainer ranks (" + got + " of "
                        + (trainers < 0 ? "?" : Integer.toString(trainers)) + " so far)");
                ByteBuffer p = ByteBuffer.wrap(n.payload()).order(ByteOrder.LITTLE_ENDIAN);
                int t = p.remaining() == NOTE_BYTES ? (int) p.getLong(8) : -1;
                p = link.payload(n, link.agentName("trainer", t), NOTE_BYTES);
                long version = p.getLong();
                p.getLong();
                long theirTrainers = p.getLong();
                long tensors = p.getLong();
                long bytes = p.getLong();
                long sentMicros = p.getLong();
                if (trainers < 0) {
                    if (theirTrainers < 1 || theirTrainers > shape.tensors()) {
                        throw new IllegalStateException(link.who() + ": " + n.from() + " says there are " + theirTrainers
                                + " trainer ranks");
                    }
                    trainers = (int) theirTrainers;
                    seen = new boolean[trainers];
                    owner = owners(sizes, trainers);
                    for (int k = 0; k < trainers; k++) {
                        link.clearDone(DONE, k); // a mark of an earlier run; this run's come after the last version
                    }
                }
                if (version != v || theirTrainers != trainers || t < 0 || t >= trainers || seen[t]) {
                    throw new IllegalStateException(link.who() + ": " + n.from() + " sent version " + version + " of "
                            + theirTrainers + " trainer ranks, expected version " + v + " of " + trainers
                            + (t >= 0 && t < trainers && seen[t] ? " (a second time)" : ""));
                }
                seen[t] = true;
                got++;
                versionStart = Math.min(versionStart, sentMicros);
                int[] mine = shard(owner, t);
                long expectBytes = Arrays.stream(mine).mapToLong(i -> sizes[i]).sum();
                if (tensors != mine.length || bytes != expectBytes) {
                    throw new IllegalStateException(link.who() + ": " + n.from() + " pushed " + tensors + " tensors, "
                            + bytes + " bytes; its shard is " + mine.length + " tensors, " + expectBytes + " bytes");
                }
                for (int i : mine) {
                    long w = BytePattern.wrongBytes(mem.get(placement.region()[i]), placement.offset()[i], sizes[i], seed(v, i));
                    if (w != 0) {
                        throw new IllegalStateException(link.who() + ": version " + v + " of tensor " + i + " (" + sizes[i]
                                + " bytes, from " + n.from() + ") has " + w + " wrong bytes");
                    }
                }
            }
            long verified = DemoLink.epochMicros();
            versionMicros[v] = verified - versionStart;
            if (v == 0) {
                firstSend = versionStart;
            }
            lastVerified = verified;
            // the credit: every trainer rank may push the next version
            List<TransferHandle> acks = new ArrayList<>();
            for (int t = 0; t < trainers; t++) {
                acks.add(agent.notify(link.agentName("trainer", t), DemoLink.longs(v, rank), timeout));
            }
            for (TransferHandle h : acks) {
                h.await();
            }
        }
        // each trainer rank says when it is done with this rank; then this agent may go
        for (int t = 0; t < trainers; t++) {
            link.awaitDone(DONE, t);
        }
        long bytes = shape.totalBytes() * shape.versions();
        double seconds = Math.max(1, lastVerified - firstSend) / 1e6;
        long[] sorted = versionMicros.clone();
        Arrays.sort(sorted);
        out.printf(Locale.ROOT, "%s verified %d versions, %d bytes, wrong bytes 0, %.2f GB/s, version p50 %.1f ms max %.1f ms "
                        + "(trainers' first write to verified, %d trainer ranks)%n", link.who(), shape.versions(), bytes,
                bytes / seconds / 1e9, DemoLink.percentile(sorted, 50) / 1e3, sorted[sorted.length - 1] / 1e3, trainers);
        out.flush();
        link.store().deleteKey(link.key("shape", rank));
        link.store().deleteKey(link.key("regions", rank));
        for (int t = 0; t < trainers; t++) {
            link.clearDone(DONE, t);
        }
        for (MemoryRegion r : regions) {
            agent.deregister(r);
        }
        return 0;
    }

    // ------------------------------------------------------------------ trainer

    private int trainer(DemoLink link, int world) {
        int rank = link.rank();
        TransferAgent agent = link.agent();
        if (world > shape.tensors()) {
            System.err.println(link.who() + ": " + world + " trainer ranks need at least as many --tensors, not "
                    + shape.tensors());
            return 2;
        }
        String expected = shape.encode() + " engines=";
        String first = link.shapeOf(0);
        if (!first.startsWith(expected) || !first.substring(expected.length()).matches("[1-9][0-9]{0,5}")) {
            System.err.println(link.who() + ": the engine job runs with " + first + ", this job with " + shape.encode()
                    + "; give both jobs the same options and sizes");
            return 2;
        }
        int engines = Integer.parseInt(first.substring(expected.length()));
        long[] sizes = tensorSizes(shape.totalBytes(), shape.tensors());
        int[] all = IntStream.range(0, sizes.length).toArray();
        Placement theirs = place(sizes, all, shape.regionBytes());
        int[] mine = shard(owners(sizes, world), rank);
        Placement ours = place(sizes, mine, shape.regionBytes());
        List<List<RemoteDescriptor>> remotes = new ArrayList<>();
        for (int e = 0; e < engines; e++) {
            String s = e == 0 ? first : link.shapeOf(e);
            if (!s.equals(first)) {
                System.err.println(link.who() + ": engine rank " + e + " runs with " + s + ", engine rank 0 with " + first);
                return 2;
            }
            List<RemoteDescriptor> regions = decodeDescriptors(link.getKey(link.key("regions", e), "regions of engine rank " + e));
            if (regions.size() != theirs.regionBytes().length) {
                throw new IllegalStateException(link.who() + ": engine rank " + e + " published " + regions.size()
                        + " regions, expected " + theirs.regionBytes().length);
            }
            List<RemoteDescriptor> r = new ArrayList<>(mine.length);
            for (int i : mine) {
                r.add(regions.get(theirs.region()[i]).slice(theirs.offset()[i], sizes[i]));
            }
            remotes.add(List.copyOf(r));
        }
        // the source: shared memory as well (mapped, so not bounded by the worker's direct-memory limit)
        List<MemoryRegion> source = allocate(agent, ours, Set.of());
        List<ByteBuffer> src = buffers(source);
        List<LocalDescriptor> locals = new ArrayList<>(mine.length);
        long shardBytes = 0;
        for (int k = 0; k < mine.length; k++) {
            locals.add(source.get(ours.region()[k]).slice(ours.offset()[k], sizes[mine[k]]));
            shardBytes += sizes[mine[k]];
        }
        out.println(link.who() + " pushes " + mine.length + " tensors, " + shardBytes + " bytes, to " + engines
                + " engine ranks, " + shape.versions() + " versions");
        out.flush();
        boolean[][] acked = new boolean[shape.versions()][engines];
        long[] pushNanos = new long[shape.versions()];
        for (int v = 0; v < shape.versions(); v++) {
            for (int k = 0; k < mine.length; k++) {
                BytePattern.fill(src.get(ours.region()[k]), ours.offset()[k], sizes[mine[k]], seed(v, mine[k]));
            }
            if (v > 0) {
                awaitAcks(link, acked, v - 1); // every engine rank verified the last version: it may be overwritten
            }
            long t0 = System.nanoTime();
            byte[] note = DemoLink.longs(v, rank, world, mine.length, shardBytes, DemoLink.epochMicros());
            List<TransferHandle> writes = new ArrayList<>(engines);
            for (int e = 0; e < engines; e++) {
                writes.add(agent.write(locals, remotes.get(e), note, timeout));
            }
            for (TransferHandle h : writes) {
                h.await();
            }
            pushNanos[v] = System.nanoTime() - t0;
        }
        awaitAcks(link, acked, shape.versions() - 1);
        for (int e = 0; e < engines; e++) {
            link.markDone(DONE, e);
        }
        long written = shardBytes * engines * shape.versions();
        long[] sorted = pushNanos.clone();
        Arrays.sort(sorted);
        out.printf(Locale.ROOT, "%s pushed %d versions of %d tensors, %d bytes, to %d engine ranks, %.2f GB/s, push p50 %.1f ms "
                        + "max %.1f ms (first write to last completion, all engine ranks)%n", link.who(), shape.versions(),
                mine.length, shardBytes * shape.versions(), engines,
                written / (Math.max(1, Arrays.stream(pushNanos).sum()) / 1e9) / 1e9, DemoLink.percentile(sorted, 50) / 1e6,
                sorted[sorted.length - 1] / 1e6);
        out.flush();
        for (MemoryRegion r : source) {
            agent.deregister(r);
        }
        return 0;
    }

    /** Takes the engine ranks' acknowledgements until every one acknowledged version {@code v}. */
    private static void awaitAcks(DemoLink link, boolean[][] acked, int v) {
        boolean[] want = acked[v];
        for (int e = 0; e < want.length; e++) {
            while (!want[e]) {
                Notification n = link.next("engine rank " + e + "'s acknowledgement of version " + v);
                ByteBuffer p = ByteBuffer.wrap(n.payload()).order(ByteOrder.LITTLE_ENDIAN);
                long from = p.remaining() == ACK_BYTES ? p.getLong(8) : -1;
                long version = link.payload(n, link.agentName("engine", (int) from), ACK_BYTES).getLong();
                if (from < 0 || from >= want.length || version < 0 || version >= acked.length || acked[(int) version][(int) from]) {
                    throw new IllegalStateException(link.who() + ": unexpected acknowledgement " + version + " from " + n.from());
                }
                acked[(int) version][(int) from] = true;
            }
        }
    }
}
