package io.jcomm.cpu.internal.tcp;

import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DType;
import io.jcomm.api.Deadline;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.internal.NativeCopy;
import io.jcomm.cpu.internal.OpCodes;
import io.jcomm.cpu.spi.CpuBackend;
import io.jcomm.cpu.spi.Reductions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * The pure-Java CPU backend: collectives over TCP connections ({@link Engine}; a full mesh, or in a
 * group of more than 16 ranks across hosts each link made when an operation first needs it), with
 * large payloads between processes on one host going through shared-memory rings.
 *
 * <h2>Algorithms</h2>
 * <ul>
 *   <li>barrier: dissemination (ceil(log2 N) rounds of one zero-byte message).</li>
 *   <li>allReduce / reduceScatter: up to {@code tcp.smallBytes} direct (everyone sends to everyone,
 *       one round, reduced in rank order); above, a pipelined ring (reduce-scatter then all-gather,
 *       each message cut into {@code tcp.segmentBytes} segments that are forwarded as soon as they
 *       are reduced).</li>
 *   <li>broadcast: direct from the root when small or N = 2, else a pipelined chain.</li>
 *   <li>allGather / allGatherV: direct when small, else a pipelined ring receiving straight into the
 *       output.</li>
 *   <li>gather, scatter, send/recv and the object payloads: one direct message per peer; in a lazily
 *       connected group the object all-gather takes ceil(log2 N) rounds instead (Bruck), and the object
 *       broadcast and gather the binomial tree, so that they need the barrier's peers only.</li>
 * </ul>
 * A lazily connected group keeps every world-sized collective on the barrier's peers (rank ± 2^k):
 * all-reduce by recursive doubling up to a size that grows with N ({@link #doublingBeatsRing}: about
 * 0.5 MiB at 17 ranks, 16 MiB at 1,024), above by the ring; broadcast up to
 * {@code tcp.smallBytes} over a binomial tree, above down the chain; all-gather(V) up to
 * {@code tcp.smallBytes} in ceil(log2 N) rounds (Bruck), above on the ring; reduce-scatter up to
 * {@code tcp.smallBytes} in all as a recursive-doubling all-reduce of the whole input, above on the ring; gather and scatter, and the object broadcast and gather, over the binomial tree rooted at
 * the root (each rank moves its subtree's parts in one message); all-to-all with small parts in ceil(log2 N)
 * rounds (Bruck, {@link #bruckBeatsPairwise}). What still connects every pair there: all-to-all with larger
 * parts and all-to-all-V, and the monitored barrier, whose rank 0 hears from each rank itself to name the
 * ones missing.
 * Every rank computes the same reduction order, so all ranks get bit-identical results.
 *
 * <h2>Same-host fast path</h2>
 * When every rank of the group shares this host, the group gets a small shared region per rank at
 * creation ({@code tcp.shm.fastBytes}, {@link ShmPlane#setUpFast}). Operations whose data fit it run
 * without a socket: barrier (publish a piece number, wait for everyone's), all-reduce (everyone copies its
 * input in; each rank reduces all inputs in rank order: one synchronisation), all-gather(V), reduce-scatter,
 * broadcast, and the object all-gather and broadcast (the lengths travel in the descriptors; when an object
 * does not fit, every rank goes on with the socket algorithm). The waits spin, then yield, then park, and
 * drive the sockets between, so peer failures, aborts and mismatches surface as before.
 *
 * <p>Every message carries a header (operation, collective number, dtype, count, root/tag,
 * algorithm); a receiver that finds a header different from what it expects fails with
 * {@link io.jcomm.api.CollectiveMismatchException} before it touches the payload, and the group is
 * then poisoned (the ranks abort each other).
 */
final class TcpBackend implements CpuBackend {

    private static final int ALGO_DIRECT = 1;
    private static final int ALGO_PIPELINE = 2;
    private static final int ALGO_SHARED = 3;
    /** Binomial tree (broadcast) or recursive doubling (all-reduce): lazily connected groups, small tensors. */
    private static final int ALGO_TREE = 4;
    /** Bruck's all-gather or all-to-all: lazily connected groups, small tensors. */
    private static final int ALGO_BRUCK = 5;
    private static final ByteBuffer EMPTY = ByteBuffer.allocateDirect(0);

    private final Engine e;
    private final int rank;
    private final int size;
    /** The barrier's peers in a lazily connected group (made on the first barrier). */
    private int[] barrierPeers;
    private final TcpConfig cfg;
    private ByteBuffer work;

    TcpBackend(Engine engine) {
        this.e = engine;
        this.rank = engine.rank;
        this.size = engine.size;
        this.cfg = engine.cfg;
    }

    @Override
    public String name() {
        return "tcp";
    }

    @Override
    public java.util.Optional<java.util.List<String>> memberTags() {
        return java.util.Optional.of(java.util.List.of(e.memberTags));
    }

    /** The transport in use ({@code epoll} or {@code nio}). */
    String transport() {
        return e.transportName();
    }

    /** Whether large collectives run through the shared staging regions (set up by the first one). */
    boolean sharedCollectives() {
        return e.shm.staging() != null;
    }

    /**
     * The staging regions for a collective of {@code bytes} in total, when it is large enough to use
     * them (set up on first use, a collective step: every rank decides alike), else null.
     */
    private ShmStaging stagingFor(long bytes, Deadline deadline) {
        if (bytes <= 0 || bytes < cfg.shmCollectiveMinBytes) {
            return null;
        }
        return e.shm.stagingFor((mine, max, dl) -> allGatherBytes(mine, rank, size, max, dl), deadline);
    }

    /**
     * The fast-path region for an operation with {@code bytes} of data per rank, when this group has one
     * and they fit (every rank decides alike), else null.
     */
    private ShmStaging fastFor(long bytes) {
        ShmStaging f = e.shm.fast();
        return f != null && bytes <= f.pieceBytes() ? f : null;
    }

    /** Makes the fast path's regions (group creation, right after the mesh is up; every rank calls it). */
    void setUpFastPath(Deadline deadline) {
        e.shm.setUpFast((mine, max, dl) -> allGatherBytes(mine, rank, size, max, dl), deadline);
    }

    /** Whether small operations of this group run through the fast path (tests and the benchmark). */
    boolean fastPath() {
        return e.shm.fast() != null;
    }

    /** The descriptor code of a fast-path operation without dtype. */
    private static long fastCode(Op op, long root) {
        return ((long) op.code << 24) | (root << 32) | ALGO_SHARED;
    }

    /** The incarnation the mesh set-up counted in the group's namespace. */
    @Override
    public long incarnation() {
        return e.generation;
    }

    /** The transport (tests of this package). */
    Engine engine() {
        return e;
    }

    /** Whether this rank connects to its peers on first use (tests). */
    boolean connectsLazily() {
        return e.lazy;
    }

    /** Whether the world-sized collectives take their O(log N)-peer algorithms (tests). */
    boolean large() {
        return e.large;
    }

    /** Peers this rank has a link to now (tests). */
    int linkedPeers() {
        int n = 0;
        for (Link l : e.links) {
            if (l != null && l.channel != null && l.channel.isActive()) {
                n++;
            }
        }
        return n;
    }

    /** Connections this rank holds for the group, bound or not (tests). */
    int heldConnections() {
        return e.allLinks.size();
    }

    /** Whether payloads to {@code peer} go through shared memory. */
    boolean sharedMemoryTo(int peer) {
        return e.shm.sharedMemoryTo(peer);
    }

    private int mod(int x) {
        return ((x % size) + size) % size;
    }

    /** A reusable direct buffer of at least {@code bytes} (its first {@code bytes} bytes). */
    private ByteBuffer work(long bytes) {
        int n = Math.toIntExact(bytes);
        if (work == null || work.capacity() < n) {
            int cap = Math.max(n, work == null ? 0 : (int) Math.min(Integer.MAX_VALUE, 2L * work.capacity()));
            work = ByteBuffer.allocateDirect(cap).order(ByteOrder.LITTLE_ENDIAN);
        }
        return slice(work, 0, n);
    }

    /**
     * {@code dst.put(src)} for copies into and out of shared memory: with {@link NativeCopy} where
     * {@code tcp.shm.nativeCopy} allows it.
     */
    private ByteBuffer copy(ByteBuffer dst, ByteBuffer src) {
        return NativeCopy.put(dst, src, cfg.shmNativeCopy);
    }

    private static ByteBuffer slice(ByteBuffer b, long offset, long length) {
        return b.slice((int) offset, (int) length).order(ByteOrder.LITTLE_ENDIAN);
    }

    /** Splits {@code elements} into segments of at most {@code tcp.segmentBytes}. */
    private long segmentElements(DType t) {
        return Math.max(1, cfg.segmentBytes / t.byteSize());
    }

    private static int segments(long elements, long segElems) {
        return (int) Math.max(1, (elements + segElems - 1) / segElems);
    }

    // ------------------------------------------------------------------ barrier

    @Override
    public void barrier(Deadline deadline) {
        ShmStaging f = e.shm.fast();
        e.enter("barrier");
        try {
            Op op = e.lazy ? e.begin(Frame.DATA, OpCodes.BARRIER, deadline, barrierPeers(), barrierPeers.length)
                    : e.begin(Frame.DATA, OpCodes.BARRIER, deadline);
            if (f != null) {
                long code = fastCode(op, 0);
                long piece = f.nextPiece();
                e.shm.gateStaging(f, op, piece);
                f.publishInput(piece, op.seq, 0, code, 0);
                e.shm.awaitStaging(f, op, ShmStaging.INPUT_SEQ, piece, code, 0, 0);
                return;
            }
            int rounds = 0;
            while ((1 << rounds) < size) {
                rounds++;
            }
            Recv[] recvs = new Recv[rounds];
            int[] sent = {0};
            int total = rounds;
            Runnable advance = () -> {
                while (sent[0] < total && (sent[0] == 0 || recvs[sent[0] - 1].done)) {
                    int k = sent[0]++;
                    e.send(op, mod(rank + (1 << k)), op.frame(k), null);
                }
            };
            for (int k = 0; k < rounds; k++) {
                recvs[k] = Recv.into(op, mod(rank - (1 << k)), op.frame(k), EMPTY, advance);
            }
            for (Recv r : recvs) {
                e.post(r);
            }
            advance.run();
            e.await(op);
        } finally {
            e.exit();
        }
    }

    /** ceil(log2 n): the rounds of a dissemination barrier of {@code n} ranks. */
    private static int rounds(int n) {
        int rounds = 0;
        while ((1 << rounds) < n) {
            rounds++;
        }
        return rounds;
    }

    /** The peers of this rank's dissemination barrier: rank + 2^k and rank - 2^k for every round k (made once). */
    private int[] barrierPeers() {
        if (barrierPeers == null) {
            int rounds = rounds(size);
            int[] peers = new int[2 * rounds];
            for (int k = 0; k < rounds; k++) {
                peers[2 * k] = mod(rank + (1 << k));
                peers[2 * k + 1] = mod(rank - (1 << k));
            }
            barrierPeers = peers;
        }
        return barrierPeers;
    }

    // ------------------------------------------------------------------ monitored barrier

    /** How long past its deadline a rank other than 0 waits for rank 0's verdict in {@link #monitoredBarrier}. */
    private static final long MONITOR_GRACE_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(1);

    /**
     * Every rank sends message 0 to rank 0, which posts a receive from every peer at once, so that at
     * its deadline it knows exactly who did not arrive; then rank 0 sends message 1 to each as the
     * release.
     */
    @Override
    public void monitoredBarrier(Deadline deadline) {
        e.enter("monitoredBarrier");
        try {
            Op op = e.begin(Frame.DATA, OpCodes.MONITORED_BARRIER, deadline);
            if (rank == 0) {
                Recv[] arrivals = new Recv[size];
                for (int r = 1; r < size; r++) {
                    arrivals[r] = e.post(Recv.into(op, r, op.frame(0), EMPTY, null));
                }
                e.await(op, () -> {
                    java.util.List<Integer> missing = new java.util.ArrayList<>();
                    for (int r = 1; r < size; r++) {
                        if (!arrivals[r].done) {
                            missing.add(r);
                        }
                    }
                    StringBuilder sb = new StringBuilder("ranks ").append(missing).append(" of ").append(size)
                            .append(" did not arrive at the monitored barrier before its deadline");
                    for (int r : missing) {
                        e.whatPeerDoes(sb, r);
                    }
                    return sb.toString();
                });
                Op release = e.begin(Frame.DATA, OpCodes.MONITORED_BARRIER, deadline);
                for (int r = 1; r < size; r++) {
                    e.send(release, r, release.frame(1), null);
                }
                e.await(release);
            } else {
                e.send(op, 0, op.frame(0), null);
                // rank 0 knows who is missing: wait a little past the deadline for its verdict (it
                // reaches this rank as an abort naming them) rather than abort the group first
                Deadline verdict = Deadline.afterNanos(Math.max(0, deadline.remainingNanos()) + MONITOR_GRACE_NANOS);
                Op release = e.begin(Frame.DATA, OpCodes.MONITORED_BARRIER, verdict);
                e.post(Recv.into(release, 0, release.frame(1), EMPTY, null));
                e.await(op);
                e.await(release);
            }
        } finally {
            e.exit();
        }
    }

    // ------------------------------------------------------------------ broadcast

    @Override
    public void broadcast(Tensor tensor, int src, Deadline deadline) {
        long bytes = tensor.byteSize();
        ShmStaging st = fastFor(bytes);
        if (st == null) {
            st = stagingFor(bytes, deadline);
        }
        e.enter("broadcast");
        try {
            boolean direct = bytes <= cfg.smallBytes || size == 2;
            if (e.large && st == null) {
                broadcastLazy(tensor, src, direct, deadline);
                return;
            }
            Op op = e.begin(Frame.DATA, OpCodes.BROADCAST, deadline);
            if (st != null) {
                broadcastShared(op, st, tensor, src);
                return;
            }
            op.template.dtype(tensor.dtype()).count(tensor.numel()).root(src).algo(direct ? ALGO_DIRECT : ALGO_PIPELINE);
            ByteBuffer buf = tensor.buffer();
            if (direct) {
                if (rank == src) {
                    for (int p = 0; p < size; p++) {
                        if (p != rank) {
                            e.send(op, p, op.frame(0), buf);
                        }
                    }
                } else {
                    e.post(Recv.into(op, src, op.frame(0), buf, null));
                }
            } else {
                int pos = mod(rank - src);
                broadcastChain(op, buf, tensor.dtype(), tensor.numel(), pos, pos == size - 1 ? -1 : mod(rank + 1),
                        mod(rank - 1), src);
            }
            e.await(op);
        } finally {
            e.exit();
        }
    }

    /**
     * Broadcast in a lazily connected group: small tensors over a binomial tree (ceil(log2 N) rounds; each
     * rank receives once from its parent at distance 2^k and sends to its children at smaller powers of
     * two), large ones down the pipelined chain. Either way every peer is at a distance ± 2^k, so that the
     * operation connects the barrier's peers only. Inside {@code enter}.
     */
    private void broadcastLazy(Tensor tensor, int src, boolean small, Deadline deadline) {
        int pos = mod(rank - src);
        ByteBuffer buf = tensor.buffer();
        if (small) {
            int[] peers = new int[33];
            int n = treePeers(src, peers);
            Op op = e.begin(Frame.DATA, OpCodes.BROADCAST, deadline, peers, n);
            op.template.dtype(tensor.dtype()).count(tensor.numel()).root(src).algo(ALGO_TREE);
            if (pos != 0) {
                e.post(Recv.into(op, peers[0], op.frame(0), buf, null));
                e.await(op);
            }
            for (int i = pos == 0 ? 0 : 1; i < n; i++) {
                e.send(op, peers[i], op.frame(0), buf);
            }
            e.await(op);
            return;
        }
        int next = pos == size - 1 ? -1 : mod(rank + 1);
        int prev = mod(rank - 1);
        int[] peers = {pos == 0 ? next : prev, next};
        Op op = e.begin(Frame.DATA, OpCodes.BROADCAST, deadline, peers, pos == 0 || next < 0 ? 1 : 2);
        op.template.dtype(tensor.dtype()).count(tensor.numel()).root(src).algo(ALGO_PIPELINE);
        broadcastChain(op, buf, tensor.dtype(), tensor.numel(), pos, next, prev, src);
        e.await(op);
    }

    /** The pipelined chain src, src + 1, ...: each segment is forwarded as soon as it arrived. */
    private void broadcastChain(Op op, ByteBuffer buf, DType t, long numel, int pos, int next, int prev, int src) {
        long segE = segmentElements(t);
        int nseg = segments(numel, segE);
        for (int k = 0; k < nseg; k++) {
            long from = k * segE;
            long len = Math.min(segE, numel - from);
            ByteBuffer seg = slice(buf, from * t.byteSize(), len * t.byteSize());
            int kk = k;
            if (rank == src) {
                e.send(op, next, op.frame(k), seg);
            } else {
                e.post(Recv.into(op, prev, op.frame(k), seg, next < 0 ? null : () -> e.send(op, next, op.frame(kk), seg)));
            }
        }
    }

    // ------------------------------------------------------------------ all-reduce

    @Override
    public void allReduce(Tensor tensor, ReduceOp rop, Deadline deadline) {
        long bytes = tensor.byteSize();
        ShmStaging f = fastFor(bytes);
        ShmStaging st = f == null ? stagingFor(bytes, deadline) : null;
        e.enter("allReduce");
        try {
            if (f != null) {
                allReduceFast(e.begin(Frame.DATA, OpCodes.ALLREDUCE, deadline), f, tensor, rop);
                return;
            }
            boolean direct = bytes <= cfg.smallBytes;
            boolean shared = st != null;
            if (e.large && !shared) {
                if (doublingBeatsRing(bytes, size, cfg.smallBytes)) {
                    allReduceDoubling(tensor.buffer(), work(bytes), tensor.dtype(), (int) tensor.numel(), rop, deadline,
                            OpCodes.ALLREDUCE);
                } else {
                    Op op = beginRing(OpCodes.ALLREDUCE, deadline);
                    op.template.dtype(tensor.dtype()).count(tensor.numel()).redop(rop).algo(ALGO_PIPELINE);
                    allReduceRing(op, tensor, rop);
                }
                return;
            }
            Op op = e.begin(Frame.DATA, OpCodes.ALLREDUCE, deadline);
            op.template.dtype(tensor.dtype()).count(tensor.numel()).redop(rop)
                    .algo(shared ? ALGO_SHARED : direct ? ALGO_DIRECT : ALGO_PIPELINE);
            if (shared) {
                allReduceShared(op, st, tensor, rop);
            } else if (direct) {
                allReduceDirect(op, tensor, rop);
            } else {
                allReduceRing(op, tensor, rop);
            }
        } finally {
            e.exit();
        }
    }

    /**
     * Whether a lazily connected group of {@code n} ranks all-reduces {@code bytes} faster by recursive
     * doubling than by the ring, in the usual model of a step as a latency plus bytes over bandwidth, with
     * the latency worth {@code smallBytes} of transfer: doubling takes ceil(log2 n) steps of all the bytes,
     * the ring 2 (n - 1) steps of a 1/n part each. So the doubling covers more with more ranks: always
     * {@code smallBytes}, and with the default 64 KiB about 0.5 MiB at 17 ranks, 1.9 MiB at 64 and 16 MiB at 1,024.
     */
    static boolean doublingBeatsRing(long bytes, int n, long smallBytes) {
        if (bytes > DOUBLING_MAX_BYTES) {
            return false; // its scratch copy is one buffer
        }
        if (bytes <= smallBytes) {
            return true;
        }
        int log2 = ceilLog2(n);
        double doubling = log2 * ((double) smallBytes + bytes);
        double ring = 2.0 * (n - 1) * ((double) smallBytes + (double) bytes / n);
        return doubling < ring;
    }

    /** ceil(log2 n) for n >= 1: the rounds of the O(log N) algorithms. */
    static int ceilLog2(int n) {
        return 32 - Integer.numberOfLeadingZeros(n - 1);
    }

    /** The largest all-reduce the recursive doubling takes, whatever the model says. */
    static final long DOUBLING_MAX_BYTES = 1L << 30;

    /**
     * Starts a ring operation of a lazily connected group: connects this rank's ring neighbours only
     * (rank - 1 and rank + 1). Inside {@code enter}.
     */
    private Op beginRing(int code, Deadline deadline) {
        int[] peers = {mod(rank - 1), mod(rank + 1)};
        return e.begin(Frame.DATA, code, deadline, peers, 2);
    }

    /**
     * All-reduce by recursive doubling (lazily connected groups, small tensors). With P the largest power
     * of two not above N, rank P + i first hands its input to rank i, which reduces it into its own; ranks
     * 0 .. P-1 then exchange with rank XOR 2^k in round k and reduce what they got; finally rank i hands the
     * result back to rank P + i. Every peer is at distance 2^k or P, so the operation needs the barrier's
     * peers only, in ceil(log2 N) + 1 rounds at most. Each pair reduces the same two operands (in either
     * order: the reductions are commutative), so every rank gets bit-identical results. {@code buf} holds
     * the input and gets the result; {@code tmp} (as large, apart from it) receives. {@code code} is the
     * collective's (a small reduce-scatter runs as this all-reduce). Inside {@code enter}.
     */
    private void allReduceDoubling(ByteBuffer buf, ByteBuffer tmp, DType t, int count, ReduceOp rop, Deadline deadline,
                                   int code) {
        int p = Integer.highestOneBit(size);
        int rounds = Integer.numberOfTrailingZeros(p);
        int[] peers = new int[rounds + 1];
        int n = 0;
        if (rank >= p) {
            peers[n++] = rank - p;
        } else {
            if (rank + p < size) {
                peers[n++] = rank + p;
            }
            for (int k = 0; k < rounds; k++) {
                peers[n++] = rank ^ (1 << k);
            }
        }
        Op op = e.begin(Frame.DATA, code, deadline, peers, n);
        op.template.dtype(t).count(count).redop(rop).algo(ALGO_TREE);
        int last = rounds + 1;
        if (rank >= p) {
            e.send(op, rank - p, op.frame(0), buf);
            e.post(Recv.into(op, rank - p, op.frame(last), buf, null));
            e.await(op);
            return;
        }
        if (rank + p < size) {
            e.post(Recv.into(op, rank + p, op.frame(0), tmp, null));
            e.await(op);
            Reductions.reduceInto(t, rop, buf, tmp, count);
        }
        for (int k = 0; k < rounds; k++) {
            int q = rank ^ (1 << k);
            e.post(Recv.into(op, q, op.frame(1 + k), tmp, null));
            e.send(op, q, op.frame(1 + k), buf);
            e.await(op); // the send is out of buf before buf changes
            Reductions.reduceInto(t, rop, buf, tmp, count);
        }
        if (rop == ReduceOp.AVG) {
            Reductions.divide(t, buf, count, size);
        }
        if (rank + p < size) {
            e.send(op, rank + p, op.frame(last), buf);
            e.await(op);
        }
    }

    private void allReduceDirect(Op op, Tensor tensor, ReduceOp rop) {
        int b = (int) tensor.byteSize();
        ByteBuffer buf = tensor.buffer();
        ByteBuffer tmp = work((long) b * size);
        for (int p = 0; p < size; p++) {
            if (p != rank) {
                e.post(Recv.into(op, p, op.frame(0), slice(tmp, (long) p * b, b), null));
            }
        }
        for (int p = 0; p < size; p++) {
            if (p != rank) {
                e.send(op, p, op.frame(0), buf);
            }
        }
        e.await(op);
        // rank order: x0 op x1 op ... op x(N-1), identical on every rank
        DType t = tensor.dtype();
        int n = (int) tensor.numel();
        if (rank != 0) {
            slice(tmp, (long) rank * b, b).put(buf.duplicate());
            buf.duplicate().put(slice(tmp, 0, b));
        }
        for (int p = 1; p < size; p++) {
            Reductions.reduceInto(t, rop, buf, slice(tmp, (long) p * b, b), n);
        }
        if (rop == ReduceOp.AVG) {
            Reductions.divide(t, buf, n, size);
        }
    }

    private void allReduceRing(Op op, Tensor tensor, ReduceOp rop) {
        DType t = tensor.dtype();
        int es = t.byteSize();
        long count = tensor.numel();
        ByteBuffer buf = tensor.buffer();
        long segE = segmentElements(t);
        long[] start = new long[size + 1];
        int maxSeg = 1;
        for (int c = 0; c <= size; c++) {
            start[c] = count * c / size;
        }
        for (int c = 0; c < size; c++) {
            maxSeg = Math.max(maxSeg, segments(start[c + 1] - start[c], segE));
        }
        ByteBuffer[][] segs = new ByteBuffer[size][];
        for (int c = 0; c < size; c++) {
            long len = start[c + 1] - start[c];
            int nseg = segments(len, segE);
            segs[c] = new ByteBuffer[nseg];
            for (int k = 0; k < nseg; k++) {
                long from = start[c] + k * segE;
                long l = Math.min(segE, start[c + 1] - from);
                segs[c][k] = slice(buf, from * es, Math.max(0, l) * es);
            }
        }
        int next = mod(rank + 1);
        int prev = mod(rank - 1);
        int steps = size - 1;
        int ms = maxSeg;
        // reduce-scatter: step s receives chunk rank-s-1 and reduces it; forwards it, or (last step) owns it
        for (int s = 0; s < steps; s++) {
            int c = mod(rank - s - 1);
            for (int k = 0; k < segs[c].length; k++) {
                ByteBuffer seg = segs[c][k];
                int ss = s;
                int kk = k;
                Runnable then = s < steps - 1
                        ? () -> e.send(op, next, op.frame((ss + 1) * ms + kk), seg)
                        : () -> {
                            if (rop == ReduceOp.AVG) {
                                Reductions.divide(t, seg, seg.remaining() / es, size);
                            }
                            e.send(op, next, op.frame((steps) * ms + kk), seg);
                        };
                e.post(Recv.reduce(op, prev, op.frame(s * ms + k), seg, null, t, rop, then));
            }
        }
        // all-gather: step s receives the final chunk rank-s and forwards it
        for (int s = 0; s < steps; s++) {
            int c = mod(rank - s);
            for (int k = 0; k < segs[c].length; k++) {
                ByteBuffer seg = segs[c][k];
                int ss = s;
                int kk = k;
                Runnable then = s < steps - 1 ? () -> e.send(op, next, op.frame((steps + ss + 1) * ms + kk), seg) : null;
                e.post(Recv.into(op, prev, op.frame((steps + s) * ms + k), seg, then));
            }
        }
        for (int k = 0; k < segs[rank].length; k++) {
            e.send(op, next, op.frame(k), segs[rank][k]);
        }
        e.await(op);
    }

    /**
     * All-reduce through the shared staging regions (ranks on one host), piece by piece: copy the parts
     * of the piece that other ranks reduce into this rank's region; once every rank did, reduce this
     * rank's share (its own data straight from the tensor, the others' from their regions, in rank
     * order) into the tensor, copying each finished block to the result area too; once every rank did,
     * copy the other ranks' shares from their result areas. Two synchronisations per piece, and about
     * (5N-2)/N bytes of memory traffic per byte of tensor (4 for two ranks; the ring needs 4.5).
     */
    private void allReduceShared(Op op, ShmStaging st, Tensor tensor, ReduceOp rop) {
        DType t = tensor.dtype();
        int es = t.byteSize();
        long count = tensor.numel();
        ByteBuffer buf = tensor.buffer();
        long pieceElems = st.pieceBytes() / es;
        long code = sharedCode(op, t, rop);
        for (long p0 = 0; p0 < count; p0 += pieceElems) {
            int pe = (int) Math.min(pieceElems, count - p0);
            long piece = st.nextPiece();
            int c0 = (int) ((long) pe * rank / size);
            int c1 = (int) ((long) pe * (rank + 1) / size);
            e.shm.gateStaging(st, op, piece);
            ByteBuffer mine = st.input(rank, piece);
            if (c0 > 0) {
                copy(slice(mine, 0, (long) c0 * es), slice(buf, p0 * es, (long) c0 * es));
            }
            if (c1 < pe) {
                copy(slice(mine, (long) c1 * es, (long) (pe - c1) * es), slice(buf, (p0 + c1) * es, (long) (pe - c1) * es));
            }
            st.publishInput(piece, op.seq, count, code, p0);
            e.shm.awaitStaging(st, op, ShmStaging.INPUT_SEQ, piece, code, count, p0);
            ByteBuffer out = slice(buf, (p0 + c0) * es, (long) (c1 - c0) * es);
            ByteBuffer[] ins = new ByteBuffer[size];
            for (int r = 0; r < size; r++) {
                ins[r] = r == rank ? null : slice(st.input(r, piece), (long) c0 * es, (long) (c1 - c0) * es);
            }
            ByteBuffer result = slice(st.result(rank, piece), (long) c0 * es, (long) (c1 - c0) * es);
            if (rop == ReduceOp.AVG) {
                Reductions.reduceManyInPlace(t, rop, out, ins, rank, c1 - c0, null);
                Reductions.divide(t, out, c1 - c0, size);
                copy(result, out.duplicate());
            } else {
                Reductions.reduceManyInPlace(t, rop, out, ins, rank, c1 - c0, result);
            }
            st.publishResult(piece);
            e.shm.awaitStaging(st, op, ShmStaging.RESULT_SEQ, piece, code, count, p0);
            for (int r = 0; r < size; r++) {
                if (r == rank) {
                    continue;
                }
                int q0 = (int) ((long) pe * r / size);
                int q1 = (int) ((long) pe * (r + 1) / size);
                copy(slice(buf, (p0 + q0) * es, (long) (q1 - q0) * es),
                        slice(st.result(r, piece), (long) q0 * es, (long) (q1 - q0) * es));
            }
        }
    }

    /**
     * All-reduce through the fast path: every rank copies its input into its region and publishes it;
     * once all did, each rank reduces every input in rank order into its tensor (the same order on every
     * rank: bit-identical results). One synchronisation.
     */
    private void allReduceFast(Op op, ShmStaging f, Tensor tensor, ReduceOp rop) {
        DType t = tensor.dtype();
        int n = (int) tensor.numel();
        int b = (int) tensor.byteSize();
        ByteBuffer buf = slice(tensor.buffer(), 0, b);
        long code = sharedCode(op, t, rop);
        long piece = f.nextPiece();
        e.shm.gateStaging(f, op, piece);
        copy(f.input(rank, piece), buf.duplicate());
        f.publishInput(piece, op.seq, n, code, 0);
        e.shm.awaitStaging(f, op, ShmStaging.INPUT_SEQ, piece, code, n, 0);
        if (n == 0) {
            return;
        }
        // this rank's input is in its slot too: reduce every slot in rank order straight into the tensor
        ByteBuffer[] ins = new ByteBuffer[size];
        for (int r = 0; r < size; r++) {
            ins[r] = slice(f.input(r, piece), 0, b);
        }
        Reductions.reduceMany(t, rop, buf, ins, n);
        if (rop == ReduceOp.AVG) {
            Reductions.divide(t, buf, n, size);
        }
    }

    private static long sharedCode(Op op, DType t, ReduceOp rop) {
        return ((long) op.code << 24) | ((long) t.code() << 16) | ((long) (rop == null ? 0 : rop.code()) << 8) | ALGO_SHARED;
    }

    /**
     * All-gather (equal or variable counts) through the staging regions: per piece every rank copies
     * its next part in once and every other rank's part out once; one synchronisation per piece.
     */
    /**
     * All-gather(V) of at most {@code tcp.smallBytes} in a lazily connected group: ceil(log2 N) rounds
     * (Bruck), with the barrier's peers only. In round k this rank sends the parts it holds, those of ranks
     * {@code rank .. rank + 2^k - 1} (mod N, in that order in a work buffer), to {@code rank - 2^k} and
     * receives the next ones from {@code rank + 2^k}; at the end it puts them in rank order. Inside
     * {@code enter}.
     */
    private void allGatherBruck(int code, Tensor output, Tensor input, long[] counts, long countField, Deadline deadline) {
        DType t = output.dtype();
        long[] rel = new long[size + 1]; // rel[i]: where the part of rank + i begins
        for (int i = 0; i < size; i++) {
            rel[i + 1] = rel[i] + counts[mod(rank + i)] * t.byteSize();
        }
        ByteBuffer held = work(rel[size]);
        slice(held, 0, rel[1]).put(input.buffer());
        int[] peers = new int[2];
        for (int dist = 1; dist < size; dist <<= 1) {
            int count = Math.min(dist, size - dist);
            peers[0] = mod(rank - dist);
            peers[1] = mod(rank + dist);
            Op op = e.begin(Frame.DATA, code, deadline, peers, 2);
            op.template.dtype(t).count(countField).algo(ALGO_BRUCK);
            e.post(Recv.into(op, peers[1], op.frame(0), slice(held, rel[dist], rel[dist + count] - rel[dist]), null));
            e.send(op, peers[0], op.frame(0), slice(held, 0, rel[count]));
            e.await(op);
        }
        ByteBuffer out = output.buffer();
        long mine = rel[size] - rel[size - rank]; // the bytes of ranks 0 .. rank - 1
        slice(out, mine, rel[size - rank]).put(slice(held, 0, rel[size - rank]));
        slice(out, 0, mine).put(slice(held, rel[size - rank], mine));
    }

    private void gatherAllShared(Op op, ShmStaging st, ByteBuffer out, ByteBuffer in, long[] counts, long[] off,
                                 DType t, long countField) {
        int es = t.byteSize();
        long pieceElems = st.pieceBytes() / es;
        long max = 0;
        for (long c : counts) {
            max = Math.max(max, c);
        }
        long code = sharedCode(op, t, null);
        for (long p0 = 0; p0 < max; p0 += pieceElems) {
            long piece = st.nextPiece();
            e.shm.gateStaging(st, op, piece);
            long mine = Math.max(0, Math.min(pieceElems, counts[rank] - p0));
            if (mine > 0) {
                copy(slice(st.input(rank, piece), 0, mine * es), slice(in, p0 * es, mine * es));
            }
            st.publishInput(piece, op.seq, countField, code, p0);
            e.shm.awaitStaging(st, op, ShmStaging.INPUT_SEQ, piece, code, countField, p0);
            for (int r = 0; r < size; r++) {
                long n = Math.max(0, Math.min(pieceElems, counts[r] - p0));
                if (r != rank && n > 0) {
                    copy(slice(out, (off[r] + p0) * es, n * es), slice(st.input(r, piece), 0, n * es));
                }
            }
        }
    }

    /**
     * Broadcast through the staging regions: the root copies each piece in once (after every rank
     * finished the piece that used the same slot) and does not wait for the readers of this piece;
     * every other rank waits for the root's piece only and copies it out.
     */
    private void broadcastShared(Op op, ShmStaging st, Tensor tensor, int src) {
        DType t = tensor.dtype();
        int es = t.byteSize();
        long count = tensor.numel();
        ByteBuffer buf = tensor.buffer();
        long pieceElems = st.pieceBytes() / es;
        long code = sharedCode(op, t, null) | ((long) src << 32);
        for (long p0 = 0; p0 < count; p0 += pieceElems) {
            long n = Math.min(pieceElems, count - p0);
            long piece = st.nextPiece();
            // publishing writes the slot's descriptor: every rank must be done with the piece before the
            // previous one (same slot), whose descriptor a slow rank may still be checking
            e.shm.gateStaging(st, op, piece);
            if (rank == src) {
                copy(slice(st.input(rank, piece), 0, n * es), slice(buf, p0 * es, n * es));
                st.publishInput(piece, op.seq, count, code, p0);
            } else {
                st.publishInput(piece, op.seq, count, code, p0); // "done with the previous piece"
                e.shm.awaitStagingFrom(st, op, src, piece, code, count, p0);
                copy(slice(buf, p0 * es, n * es), slice(st.input(src, piece), 0, n * es));
            }
        }
    }

    /**
     * Reduce-scatter through the staging regions: per piece every rank copies the piece of all its
     * chunks in, then reduces its own chunk's piece from all regions in rank order into the output.
     */
    private void reduceScatterShared(Op op, ShmStaging st, Tensor output, Tensor input, ReduceOp rop) {
        DType t = output.dtype();
        int es = t.byteSize();
        long count = output.numel();
        ByteBuffer in = input.buffer();
        ByteBuffer out = output.buffer();
        long pieceElems = Math.max(1, st.pieceBytes() / es / size);
        long code = sharedCode(op, t, rop);
        for (long p0 = 0; p0 < count; p0 += pieceElems) {
            int pe = (int) Math.min(pieceElems, count - p0);
            long piece = st.nextPiece();
            e.shm.gateStaging(st, op, piece);
            ByteBuffer mine = st.input(rank, piece);
            for (int c = 0; c < size; c++) {
                copy(slice(mine, (long) c * pe * es, (long) pe * es), slice(in, (c * count + p0) * es, (long) pe * es));
            }
            st.publishInput(piece, op.seq, count, code, p0);
            e.shm.awaitStaging(st, op, ShmStaging.INPUT_SEQ, piece, code, count, p0);
            ByteBuffer[] ins = new ByteBuffer[size];
            for (int r = 0; r < size; r++) {
                ins[r] = slice(st.input(r, piece), (long) rank * pe * es, (long) pe * es);
            }
            ByteBuffer o = slice(out, p0 * es, (long) pe * es);
            Reductions.reduceMany(t, rop, o, ins, pe);
            if (rop == ReduceOp.AVG) {
                Reductions.divide(t, o, pe, size);
            }
        }
    }

    // ------------------------------------------------------------------ all-gather

    @Override
    public void allGather(Tensor output, Tensor input, Deadline deadline) {
        long[] counts = new long[size];
        java.util.Arrays.fill(counts, input.numel());
        gatherAll("allGather", OpCodes.ALLGATHER, output, input, counts, input.numel(), deadline);
    }

    @Override
    public void allGatherV(Tensor output, Tensor input, long[] counts, Deadline deadline) {
        long digest = 0xcbf29ce484222325L;
        for (long c : counts) {
            digest = (digest ^ c) * 0x100000001b3L;
        }
        gatherAll("allGatherV", OpCodes.ALLGATHERV, output, input, counts, digest, deadline);
    }

    private void gatherAll(String name, int code, Tensor output, Tensor input, long[] counts, long countField,
                           Deadline deadline) {
        long most = 0;
        for (long c : counts) {
            most = Math.max(most, c);
        }
        ShmStaging st = fastFor(most * output.dtype().byteSize());
        if (st == null) {
            st = stagingFor(output.byteSize(), deadline);
        }
        e.enter(name);
        try {
            DType t = output.dtype();
            int es = t.byteSize();
            long total = output.byteSize();
            if (e.large && st == null && total <= cfg.smallBytes) {
                allGatherBruck(code, output, input, counts, countField, deadline);
                return;
            }
            // a lazily connected group takes the ring above tcp.smallBytes: it needs two peers
            boolean direct = total <= cfg.smallBytes && !(e.large && st == null);
            Op op = e.large && st == null ? beginRing(code, deadline) : e.begin(Frame.DATA, code, deadline);
            op.template.dtype(t).count(countField).algo(direct ? ALGO_DIRECT : ALGO_PIPELINE);
            ByteBuffer out = output.buffer();
            long[] off = new long[size + 1];
            for (int r = 0; r < size; r++) {
                off[r + 1] = off[r] + counts[r];
            }
            ByteBuffer mine = slice(out, off[rank] * es, counts[rank] * es);
            mine.duplicate().put(input.buffer());
            if (st != null) {
                gatherAllShared(op, st, out, input.buffer(), counts, off, t, countField);
            } else if (direct) {
                for (int p = 0; p < size; p++) {
                    if (p != rank) {
                        e.post(Recv.into(op, p, op.frame(0), slice(out, off[p] * es, counts[p] * es), null));
                    }
                }
                for (int p = 0; p < size; p++) {
                    if (p != rank) {
                        e.send(op, p, op.frame(0), mine);
                    }
                }
            } else {
                long segE = segmentElements(t);
                ByteBuffer[][] segs = new ByteBuffer[size][];
                int maxSeg = 1;
                for (int c = 0; c < size; c++) {
                    int nseg = segments(counts[c], segE);
                    maxSeg = Math.max(maxSeg, nseg);
                    segs[c] = new ByteBuffer[nseg];
                    for (int k = 0; k < nseg; k++) {
                        long from = off[c] + k * segE;
                        long l = Math.max(0, Math.min(segE, off[c + 1] - from));
                        segs[c][k] = slice(out, from * es, l * es);
                    }
                }
                int next = mod(rank + 1);
                int prev = mod(rank - 1);
                int steps = size - 1;
                int ms = maxSeg;
                for (int s = 0; s < steps; s++) {
                    int c = mod(rank - s - 1);
                    for (int k = 0; k < segs[c].length; k++) {
                        ByteBuffer seg = segs[c][k];
                        int ss = s;
                        int kk = k;
                        Runnable then = s < steps - 1 ? () -> e.send(op, next, op.frame((ss + 1) * ms + kk), seg) : null;
                        e.post(Recv.into(op, prev, op.frame(s * ms + k), seg, then));
                    }
                }
                for (int k = 0; k < segs[rank].length; k++) {
                    e.send(op, next, op.frame(k), segs[rank][k]);
                }
            }
            e.await(op);
        } finally {
            e.exit();
        }
    }

    // ------------------------------------------------------------------ all-to-all

    @Override
    public void allToAll(Tensor output, Tensor input, Deadline deadline) {
        long block = input.numel() / size;
        if (e.large && bruckBeatsPairwise(block * input.dtype().byteSize(), size, cfg.smallBytes)) {
            e.enter("allToAll");
            try {
                allToAllBruck(output, input, block, deadline);
            } finally {
                e.exit();
            }
            return;
        }
        long[] counts = new long[size];
        java.util.Arrays.fill(counts, block);
        exchangeAll("allToAll", OpCodes.ALLTOALL, output, input, counts, counts, deadline);
    }

    /**
     * Whether a lazily connected group of {@code n} ranks exchanges parts of {@code blockBytes} faster by
     * Bruck's all-to-all than pairwise, in the model of {@link #doublingBeatsRing}: Bruck takes ceil(log2 n)
     * steps and sends each rank's parts {@link #bruckBlocks} times in all (about (n / 2) log2 n), pairwise
     * n - 1 steps of one part each. With the default 64 KiB that is parts up to about 43 KiB at 20 ranks
     * and 16 KiB at 1,024. Bruck needs the barrier's peers only; pairwise connects every pair.
     */
    static boolean bruckBeatsPairwise(long blockBytes, int n, long smallBytes) {
        long moved = bruckBlocks(n);
        if (2.0 * ((n + 1) / 2) * blockBytes > BRUCK_MAX_BYTES) {
            return false; // its packing buffers are one buffer
        }
        int log2 = ceilLog2(n);
        double bruck = log2 * (double) smallBytes + (double) moved * blockBytes;
        double pairwise = (n - 1) * ((double) smallBytes + blockBytes);
        return bruck < pairwise;
    }

    /** The parts one rank sends in Bruck's all-to-all of {@code n} ranks: over rounds k, the indexes below n with bit k set. */
    static long bruckBlocks(int n) {
        long moved = 0;
        for (int dist = 1; dist < n; dist <<= 1) {
            moved += bruckRoundBlocks(n, dist);
        }
        return moved;
    }

    /** The indexes {@code i < n} with bit {@code dist} (a power of two) set: the parts of one Bruck round. */
    private static int bruckRoundBlocks(int n, int dist) {
        int full = n / (2 * dist);
        return full * dist + Math.max(0, n % (2 * dist) - dist);
    }

    /** The largest packing buffer of Bruck's all-to-all. */
    static final long BRUCK_MAX_BYTES = 1L << 30;

    /**
     * Bruck's all-to-all (lazily connected groups, small parts). The part at index i is the one on its way
     * from rank (r - i) to rank (r - i) + i: this rank keeps it, all along, in the output's part r - i, which
     * starts as the input's part r + i (index i, from this rank). In round k each rank sends the parts
     * whose index has bit k set to rank + 2^k, packed in index order, and puts the ones it receives from
     * rank - 2^k at the same indexes; after ceil(log2 N) rounds every part has moved by its index, so
     * the output's part q holds what rank q sent this rank. Every peer is rank ± 2^k: the barrier's.
     * Every message carries the input's count (equal everywhere), so a rank with another count fails
     * with a mismatch before its parts are used.
     */
    private void allToAllBruck(Tensor output, Tensor input, long block, Deadline deadline) {
        DType t = output.dtype();
        long b = block * t.byteSize();
        ByteBuffer out = output.buffer();
        ByteBuffer in = input.buffer();
        for (int i = 0; i < size; i++) {
            slice(out, mod(rank - i) * b, b).put(slice(in, mod(rank + i) * b, b));
        }
        int most = bruckRoundBlocks(size, 1); // round 0 moves the most parts (every odd index)
        ByteBuffer pack = work(2L * most * b);
        ByteBuffer sent = slice(pack, 0, most * b);
        ByteBuffer got = slice(pack, most * b, most * b);
        int[] peers = new int[2];
        for (int dist = 1; dist < size; dist <<= 1) {
            peers[0] = mod(rank + dist);
            peers[1] = mod(rank - dist);
            int count = 0;
            for (int i = dist; i < size; i++) {
                if ((i & dist) != 0) {
                    slice(sent, count++ * b, b).put(slice(out, mod(rank - i) * b, b));
                }
            }
            Op op = e.begin(Frame.DATA, OpCodes.ALLTOALL, deadline, peers, 2);
            op.template.dtype(t).count(input.numel()).algo(ALGO_BRUCK);
            e.post(Recv.into(op, peers[1], op.frame(0), slice(got, 0, count * b), null));
            e.send(op, peers[0], op.frame(0), slice(sent, 0, count * b));
            e.await(op);
            int j = 0;
            for (int i = dist; i < size; i++) {
                if ((i & dist) != 0) {
                    slice(out, mod(rank - i) * b, b).put(slice(got, j++ * b, b));
                }
            }
        }
    }

    @Override
    public void allToAllV(Tensor output, Tensor input, long[] outputCounts, long[] inputCounts, Deadline deadline) {
        exchangeAll("allToAllV", OpCodes.ALLTOALLV, output, input, outputCounts, inputCounts, deadline);
    }

    /**
     * Pairwise exchange: every rank posts a receive from every peer straight into that peer's part of
     * {@code output}, copies its own part, then sends every peer its part of {@code input} (each rank
     * starts with the next rank, so that they do not all send to rank 0 first). Each message's header
     * carries its element count, so a receiver that expects another count fails with a mismatch naming
     * the sender (and aborts the others) before it touches the payload. Parts of {@value #A2A_SHM_BYTES}
     * bytes or more for peers on this host take the shared-memory rings (see {@link Engine#send}); zero
     * counts still send a header, which keeps the check.
     */
    private void exchangeAll(String name, int code, Tensor output, Tensor input, long[] outCounts, long[] inCounts,
                             Deadline deadline) {
        ShmStaging fast = e.shm.fast();
        if (fast != null && exchangeFast(name, code, fast, output, input, outCounts, inCounts, deadline)) {
            return;
        }
        e.enter(name);
        try {
            DType t = output.dtype();
            int es = t.byteSize();
            Op op = e.begin(Frame.DATA, code, deadline);
            op.template.dtype(t).algo(ALGO_DIRECT);
            if (outCounts[rank] != inCounts[rank]) {
                throw e.fail(new io.jcomm.api.CollectiveMismatchException(e.ctx(), "this rank sends " + inCounts[rank]
                        + " elements to itself but expects " + outCounts[rank] + " (" + name + " #" + op.seq + ")"));
            }
            ByteBuffer out = output.buffer();
            ByteBuffer in = input.buffer();
            long[] outOff = offsets(outCounts);
            long[] inOff = offsets(inCounts);
            for (int i = 1; i < size; i++) {
                int p = mod(rank - i);
                Frame f = op.frame(0);
                f.count = outCounts[p];
                e.post(Recv.into(op, p, f, slice(out, outOff[p] * es, outCounts[p] * es), null));
            }
            slice(out, outOff[rank] * es, outCounts[rank] * es).put(slice(in, inOff[rank] * es, inCounts[rank] * es));
            for (int i = 1; i < size; i++) {
                int p = mod(rank + i);
                Frame f = op.frame(0);
                f.count = inCounts[p];
                e.send(op, p, f, slice(in, inOff[p] * es, inCounts[p] * es),
                        Math.min(cfg.shmThresholdBytes, A2A_SHM_BYTES));
            }
            e.await(op);
        } finally {
            e.exit();
        }
    }

    /**
     * The exchange through the fast path: every rank copies its whole input into its region (for
     * all-to-all-v after the counts it sends each rank) and publishes the length; once all did, each copies
     * its part out of every peer's region. All-to-all's equal parts are checked by the descriptors' count
     * (the input's length, equal on every rank); all-to-all-v's by the count each peer sends this rank
     * against the count it expects (a mismatch names the peer and aborts the group, as over the links).
     *
     * <p>When some rank's input does not fit its region, every rank has also offered its input's address in
     * its process ({@value io.jcomm.cpu.TcpOptions#SHM_CROSS_MEMORY}, the native library loaded): then each
     * reads its part of every peer's input straight into its output ({@link #exchangeCross}). False when the
     * inputs do not fit and some rank made no offer, or a cross-memory read failed somewhere: every rank sees
     * every length, offer and failure, so all then exchange over the links.
     */
    private boolean exchangeFast(String name, int code, ShmStaging f, Tensor output, Tensor input, long[] outCounts,
                                 long[] inCounts, Deadline deadline) {
        e.enter(name);
        try {
            DType t = output.dtype();
            int es = t.byteSize();
            Op op = e.begin(Frame.DATA, code, deadline);
            if (outCounts[rank] != inCounts[rank]) {
                throw e.fail(new io.jcomm.api.CollectiveMismatchException(e.ctx(), "this rank sends " + inCounts[rank]
                        + " elements to itself but expects " + outCounts[rank] + " (" + name + " #" + op.seq + ")"));
            }
            boolean v = code == OpCodes.ALLTOALLV;
            long[] inOff = offsets(inCounts);
            long dataBytes = inOff[size] * es;
            long header = v ? 8L * size : 0;
            long need = header + dataBytes;
            long countField = v ? 0 : input.numel();
            long fcode = sharedCode(op, t, null);
            long piece = f.nextPiece();
            e.shm.gateStaging(f, op, piece);
            boolean fits = need <= f.pieceBytes();
            boolean offer = !crossMemoryOff && cfg.shmCrossMemory && header <= f.pieceBytes() && dataBytes > 0
                    && NativeCopy.availability().available();
            if (fits || offer) {
                ByteBuffer slot = f.input(rank, piece);
                for (int q = 0; v && q < size; q++) {
                    slot.putLong(8 * q, inCounts[q]);
                }
                if (fits) {
                    copy(slice(slot, header, dataBytes), slice(input.buffer(), 0, dataBytes));
                }
            }
            f.publishInput(piece, op.seq, countField, fcode, 0, need,
                    offer ? io.jcomm.runtime.mem.DirectBuffers.address(input.buffer()) : 0, offer ? PID : 0);
            e.shm.awaitStaging(f, op, ShmStaging.INPUT_SEQ, piece, fcode, countField, 0);
            boolean allFit = true;
            boolean allOffered = true;
            for (int q = 0; q < size; q++) {
                allFit &= (q == rank ? need : f.length(q, piece)) <= f.pieceBytes();
                allOffered &= f.address(q, piece) != 0 && f.pid(q, piece) > 0;
            }
            if (!allFit) {
                return allOffered && exchangeCross(name, f, op, piece, output, input, outCounts, inCounts, v, header, es);
            }
            ByteBuffer out = output.buffer();
            long[] outOff = offsets(outCounts);
            copy(slice(out, outOff[rank] * es, outCounts[rank] * es), slice(input.buffer(), inOff[rank] * es,
                    inCounts[rank] * es));
            for (int i = 1; i < size; i++) {
                int q = mod(rank + i);
                ByteBuffer slot = f.input(q, piece);
                long from = partOffset(slot, v, inOff[rank]);
                long n = partCount(name, op, slot, v, inCounts[rank], outCounts[q], q);
                long at = header + from * es;
                if (from < 0 || n < 0 || at + n * es > Math.min(f.length(q, piece), f.pieceBytes())) {
                    throw e.fail(new io.jcomm.api.ProtocolException(e.ctx(), "rank " + q + "'s counts in shared memory "
                            + "do not fit its region (" + name + " #" + op.seq + ")"));
                }
                copy(slice(out, outOff[q] * es, n * es), slice(slot, at, n * es));
            }
            return true;
        } finally {
            e.exit();
        }
    }

    /** Where this rank's part starts in peer {@code q}'s input, in elements (all-to-all-v: after the counts in its slot). */
    private long partOffset(ByteBuffer slot, boolean v, long equalOffset) {
        if (!v) {
            return equalOffset;
        }
        long from = 0;
        for (int j = 0; j < rank; j++) {
            from += slot.getLong(8 * j);
        }
        return from;
    }

    /** The count peer {@code q} sends this rank, checked against the count this rank expects from it. */
    private long partCount(String name, Op op, ByteBuffer slot, boolean v, long equalCount, long expected, int q) {
        long n = v ? slot.getLong(8 * rank) : equalCount;
        if (n != expected) {
            throw e.fail(new io.jcomm.api.CollectiveMismatchException(e.ctx(), "rank " + q + " sends " + n
                    + " elements to this rank, which expects " + expected + " (" + name + " #" + op.seq + ")"));
        }
        return n;
    }

    /**
     * The exchange of inputs too large for the regions, every rank having offered its input's address: each
     * copies its own part, reads its part of every peer's input from the peer's process straight into its
     * output (one kernel copy, where the rings take a copy in and a copy out), and publishes its result with
     * whether a read failed; it returns only once every rank did, so that no input changes while a peer may
     * still read it. A failed read anywhere (ptrace restricted, a seccomp filter, a peer that died) turns the
     * cross-memory path off for the group on every rank, and the exchange goes over the links (false).
     */
    private boolean exchangeCross(String name, ShmStaging f, Op op, long piece, Tensor output, Tensor input,
                                  long[] outCounts, long[] inCounts, boolean v, long header, int es) {
        ByteBuffer out = output.buffer();
        long[] outOff = offsets(outCounts);
        long[] inOff = offsets(inCounts);
        // the own part, megabytes (it did not fit a region) that the caller reads only after the exchange:
        // stored past the caches, so that memory is not first read for every line written
        NativeCopy.stream(slice(out, outOff[rank] * es, outCounts[rank] * es), slice(input.buffer(), inOff[rank] * es,
                inCounts[rank] * es), cfg.shmNativeCopy);
        int failure = 0;
        for (int i = 1; i < size && failure == 0; i++) {
            int q = mod(rank + i);
            ByteBuffer slot = f.input(q, piece);
            long from = partOffset(slot, v, inOff[rank]);
            long n = partCount(name, op, slot, v, inCounts[rank], outCounts[q], q);
            if (from < 0 || n < 0 || header + (from + n) * es > f.length(q, piece)) {
                throw e.fail(new io.jcomm.api.ProtocolException(e.ctx(), "rank " + q + "'s counts do not fit its input ("
                        + name + " #" + op.seq + ")"));
            }
            if (n > 0) {
                failure = NativeCopy.readPeer((int) f.pid(q, piece), f.address(q, piece) + from * es,
                        slice(out, outOff[q] * es, n * es), n * es);
                crossReads += failure == 0 ? 1 : 0;
                if (failure != 0 && !crossMemoryWarned) {
                    crossMemoryWarned = true;
                    LOG.info("group {} rank {}: reading rank {}'s all-to-all input from its process failed (errno {}{}); "
                                    + "this group's all-to-all takes the rings from now on", e.group, rank, q, failure,
                            failure == 1 ? ", EPERM: ptrace is restricted here" : "");
                }
            }
        }
        f.publishResult(piece, failure != 0);
        e.shm.awaitStaging(f, op, ShmStaging.RESULT_SEQ, piece, 0, 0, 0);
        for (int q = 0; q < size; q++) {
            if (f.crossFailed(q, piece)) {
                crossMemoryOff = true;
                return false;
            }
        }
        return true;
    }

    private static final org.slf4j.Logger LOG = org.slf4j.LoggerFactory.getLogger(TcpBackend.class);
    /** This process's id, offered with an input for peers' cross-memory reads. */
    private static final long PID = ProcessHandle.current().pid();
    /** Whether a cross-memory read failed in this group (on some rank: every rank sets it alike). */
    private boolean crossMemoryOff;
    private boolean crossMemoryWarned;
    /** Parts this rank read from peers' processes (tests). */
    private long crossReads;

    /** Parts this rank read from peers' processes by cross-memory reads (tests). */
    long crossReads() {
        return crossReads;
    }

    /**
     * All-to-all parts from this size take a same-host peer's ring (below {@code tcp.shm.thresholdBytes}'s
     * 64 KiB default): every part of an exchange is in flight at once, and at 32 KiB parts the ring saves
     * the two kernel copies that dominate (N=2, 64 KiB: 43-49 µs against 51-52 µs through the sockets).
     */
    private static final int A2A_SHM_BYTES = 4096;

    /** {@code [0, c0, c0 + c1, ...]}: where each rank's part starts, in elements. */
    private static long[] offsets(long[] counts) {
        long[] off = new long[counts.length + 1];
        for (int r = 0; r < counts.length; r++) {
            off[r + 1] = off[r] + counts[r];
        }
        return off;
    }

    // ------------------------------------------------------------------ gather / scatter

    @Override
    public void gather(Tensor output, Tensor input, int dst, Deadline deadline) {
        e.enter("gather");
        try {
            if (e.large) {
                gatherTree(output, input, dst, deadline);
                return;
            }
            Op op = e.begin(Frame.DATA, OpCodes.GATHER, deadline);
            op.template.dtype(input.dtype()).count(input.numel()).root(dst).algo(ALGO_DIRECT);
            long b = input.byteSize();
            if (rank == dst) {
                ByteBuffer out = output.buffer();
                slice(out, rank * b, b).put(input.buffer());
                for (int p = 0; p < size; p++) {
                    if (p != rank) {
                        e.post(Recv.into(op, p, op.frame(0), slice(out, p * b, b), null));
                    }
                }
            } else {
                e.send(op, dst, op.frame(0), input.buffer());
            }
            e.await(op);
        } finally {
            e.exit();
        }
    }

    @Override
    public void scatter(Tensor output, Tensor input, int src, Deadline deadline) {
        e.enter("scatter");
        try {
            if (e.large) {
                scatterTree(output, input, src, deadline);
                return;
            }
            Op op = e.begin(Frame.DATA, OpCodes.SCATTER, deadline);
            op.template.dtype(output.dtype()).count(output.numel()).root(src).algo(ALGO_DIRECT);
            long b = output.byteSize();
            if (rank == src) {
                ByteBuffer in = input.buffer();
                for (int p = 0; p < size; p++) {
                    if (p != rank) {
                        e.send(op, p, op.frame(0), slice(in, p * b, b));
                    }
                }
                output.buffer().put(slice(in, rank * b, b));
            } else {
                e.post(Recv.into(op, src, op.frame(0), output.buffer(), null));
            }
            e.await(op);
        } finally {
            e.exit();
        }
    }

    /**
     * The peers of this rank in the binomial tree rooted at {@code root} (broadcast, gather and scatter of
     * lazily connected groups): at
     * position {@code pos = rank - root (mod N)} the parent (first, unless this is the root) at
     * {@code pos - lowestOneBit(pos)}, then the children at {@code pos + 2^j} for the powers of two below
     * that bit, largest first. The child at {@code pos + d} heads the positions {@code [pos + d, pos + 2d)}
     * (clipped at N). Returns the number of peers written to {@code peers} (33 entries).
     */
    private int treePeers(int root, int[] peers) {
        int pos = mod(rank - root);
        int low = pos == 0 ? Integer.highestOneBit(Math.max(1, size - 1)) << 1 : Integer.lowestOneBit(pos);
        int n = 0;
        if (pos != 0) {
            peers[n++] = mod(rank - low);
        }
        for (int d = low >> 1; d > 0; d >>= 1) {
            if (pos + d < size) {
                peers[n++] = mod(rank + d);
            }
        }
        return n;
    }

    /** How many positions the subtree at position {@code pos} of a binomial tree holds (itself included). */
    private int subtree(int pos) {
        return pos == 0 ? size : Math.min(Integer.lowestOneBit(pos), size - pos);
    }

    /**
     * Gather in a lazily connected group, over the binomial tree rooted at {@code dst} (ceil(log2 N) rounds,
     * the barrier's peers only): each rank collects its subtree's inputs in position order, its children's
     * blocks first, and sends them to its parent in one message; the root puts the positions back in rank
     * order. Inside {@code enter}.
     */
    private void gatherTree(Tensor output, Tensor input, int dst, Deadline deadline) {
        int[] peers = new int[33];
        int n = treePeers(dst, peers);
        int pos = mod(rank - dst);
        int span = subtree(pos);
        long b = input.byteSize();
        Op op = e.begin(Frame.DATA, OpCodes.GATHER, deadline, peers, n);
        op.template.dtype(input.dtype()).count(input.numel()).root(dst).algo(ALGO_TREE);
        ByteBuffer block = work(span * b);
        slice(block, 0, b).put(input.buffer());
        for (int i = pos == 0 ? 0 : 1; i < n; i++) {
            int d = mod(peers[i] - rank);
            e.post(Recv.into(op, peers[i], op.frame(0), slice(block, d * b, subtree(pos + d) * b), null));
        }
        e.await(op);
        if (pos != 0) {
            e.send(op, peers[0], op.frame(0), block);
            e.await(op);
            return;
        }
        // position p holds rank dst + p (mod N)
        ByteBuffer out = output.buffer();
        slice(out, dst * b, (size - dst) * b).put(slice(block, 0, (size - dst) * b));
        slice(out, 0, dst * b).put(slice(block, (size - dst) * b, dst * b));
    }

    /**
     * Scatter in a lazily connected group, over the binomial tree rooted at {@code src}: the root puts the
     * parts in position order, each rank receives its subtree's parts from its parent in one message, keeps
     * its own and sends each child that child's subtree. Inside {@code enter}.
     */
    private void scatterTree(Tensor output, Tensor input, int src, Deadline deadline) {
        int[] peers = new int[33];
        int n = treePeers(src, peers);
        int pos = mod(rank - src);
        int span = subtree(pos);
        long b = output.byteSize();
        Op op = e.begin(Frame.DATA, OpCodes.SCATTER, deadline, peers, n);
        op.template.dtype(output.dtype()).count(output.numel()).root(src).algo(ALGO_TREE);
        ByteBuffer block = work(span * b);
        if (pos == 0) {
            ByteBuffer in = input.buffer();
            slice(block, 0, (size - src) * b).put(slice(in, src * b, (size - src) * b));
            slice(block, (size - src) * b, src * b).put(slice(in, 0, src * b));
        } else {
            e.post(Recv.into(op, peers[0], op.frame(0), block, null));
            e.await(op);
        }
        for (int i = pos == 0 ? 0 : 1; i < n; i++) {
            int d = mod(peers[i] - rank);
            e.send(op, peers[i], op.frame(0), slice(block, d * b, subtree(pos + d) * b));
        }
        output.buffer().put(slice(block, 0, b));
        e.await(op);
    }

    // ------------------------------------------------------------------ reduce-scatter

    @Override
    public void reduceScatter(Tensor output, Tensor input, ReduceOp rop, Deadline deadline) {
        long b = output.byteSize();
        // the shared path needs every rank's part of a piece to hold at least one element
        ShmStaging st = fastFor(b * size);
        if (st == null || st.pieceBytes() / output.dtype().byteSize() < size) {
            st = ShmStaging.pieceBytes(cfg) / output.dtype().byteSize() >= size ? stagingFor(b * size, deadline) : null;
        }
        e.enter("reduceScatter");
        try {
            if (e.large && st == null && b * size <= cfg.smallBytes) {
                // a lazily connected group: small, an all-reduce by recursive doubling of the whole input
                // (ceil(log2 N) rounds instead of the ring's N - 1 steps), of which each rank keeps its part
                long total = b * size;
                ByteBuffer w = work(2 * total);
                ByteBuffer acc = slice(w, 0, total);
                acc.duplicate().put(slice(input.buffer(), 0, total));
                allReduceDoubling(acc, slice(w, total, total), input.dtype(), (int) input.numel(), rop, deadline,
                        OpCodes.REDUCESCATTER);
                output.buffer().duplicate().put(slice(acc, rank * b, b));
                return;
            }
            // a lazily connected group takes the ring above that: it needs two peers
            boolean ring = e.large && st == null;
            boolean direct = b * size <= cfg.smallBytes && !ring;
            Op op = ring ? beginRing(OpCodes.REDUCESCATTER, deadline) : e.begin(Frame.DATA, OpCodes.REDUCESCATTER, deadline);
            op.template.dtype(output.dtype()).count(output.numel()).redop(rop).algo(direct ? ALGO_DIRECT : ALGO_PIPELINE);
            if (st != null) {
                reduceScatterShared(op, st, output, input, rop);
            } else if (direct) {
                reduceScatterDirect(op, output, input, rop);
            } else {
                reduceScatterRing(op, output, input, rop);
            }
        } finally {
            e.exit();
        }
    }

    private void reduceScatterDirect(Op op, Tensor output, Tensor input, ReduceOp rop) {
        int b = (int) output.byteSize();
        ByteBuffer in = input.buffer();
        ByteBuffer tmp = work((long) b * size);
        for (int p = 0; p < size; p++) {
            if (p != rank) {
                e.post(Recv.into(op, p, op.frame(0), slice(tmp, (long) p * b, b), null));
            }
        }
        for (int p = 0; p < size; p++) {
            if (p != rank) {
                e.send(op, p, op.frame(0), slice(in, (long) p * b, b));
            }
        }
        e.await(op);
        DType t = output.dtype();
        int n = (int) output.numel();
        ByteBuffer out = output.buffer();
        out.duplicate().put(rank == 0 ? slice(in, 0, b) : slice(tmp, 0, b));
        for (int p = 1; p < size; p++) {
            Reductions.reduceInto(t, rop, out, p == rank ? slice(in, (long) p * b, b) : slice(tmp, (long) p * b, b), n);
        }
        if (rop == ReduceOp.AVG) {
            Reductions.divide(t, out, n, size);
        }
    }

    private void reduceScatterRing(Op op, Tensor output, Tensor input, ReduceOp rop) {
        DType t = output.dtype();
        int es = t.byteSize();
        long count = output.numel();
        long b = output.byteSize();
        ByteBuffer in = input.buffer();
        ByteBuffer out = output.buffer();
        ByteBuffer w = work(b * size);
        long segE = segmentElements(t);
        int nseg = segments(count, segE);
        int next = mod(rank + 1);
        int prev = mod(rank - 1);
        int steps = size - 1;
        // step s: send chunk rank-s-1 (raw input at step 0, else the partial sum), receive chunk rank-s-2;
        // after the last step this rank holds the full reduction of chunk rank
        for (int s = 0; s < steps; s++) {
            int c = mod(rank - s - 2);
            for (int k = 0; k < nseg; k++) {
                long from = k * segE;
                long len = Math.min(segE, count - from);
                ByteBuffer init = slice(in, c * b + from * es, len * es);
                ByteBuffer acc = s < steps - 1 ? slice(w, c * b + from * es, len * es) : slice(out, from * es, len * es);
                int ss = s;
                int kk = k;
                Runnable then = s < steps - 1
                        ? () -> e.send(op, next, op.frame((ss + 1) * nseg + kk), acc)
                        : (rop == ReduceOp.AVG ? () -> Reductions.divide(t, acc, acc.remaining() / es, size) : null);
                e.post(Recv.reduce(op, prev, op.frame(s * nseg + k), acc, init, t, rop, then));
            }
        }
        int c0 = mod(rank - 1);
        for (int k = 0; k < nseg; k++) {
            long from = k * segE;
            long len = Math.min(segE, count - from);
            e.send(op, next, op.frame(k), slice(in, c0 * b + from * es, len * es));
        }
        e.await(op);
    }

    // ------------------------------------------------------------------ point to point

    /** Sends a point-to-point message: through the peer's mailbox on the fast path (small ones whole), else by the link. */
    private void p2pSend(Op op, int dst, Frame f, ByteBuffer payload) {
        Link l = e.linkForSend(dst);
        if (l.mailbox != null) {
            l.mailbox.send(op, f, payload);
        } else {
            e.send(op, dst, f, payload);
        }
    }

    /** Posts a point-to-point receive: through the peer's mailbox on the fast path, else on the link. */
    private Recv p2pPost(Recv r) {
        Link l = e.links[r.peer];
        if (l.mailbox != null) {
            l.mailbox.post(r);
            return r;
        }
        return e.post(r);
    }

    @Override
    public void send(Tensor tensor, int dst, int tag, Deadline deadline) {
        e.enter("send");
        try {
            Op op = e.begin(Frame.P2P, OpCodes.SEND, deadline, dst);
            op.template.dtype(tensor.dtype()).count(tensor.numel()).root(tag);
            p2pSend(op, dst, op.frame(0), tensor.buffer());
            e.await(op);
        } finally {
            e.exit();
        }
    }

    /**
     * One operation for the whole batch: every receive is posted first, then every send goes (each
     * bounded by its peer's credit, released as the peer's receives consume), and the operation is
     * complete when all are, whatever their order.
     */
    @Override
    public void batchP2P(java.util.List<io.jcomm.api.device.P2POp> ops, int tag, Deadline deadline) {
        e.enter("batchIsendIrecv");
        try {
            int[] peers = new int[ops.size()];
            for (int i = 0; i < peers.length; i++) {
                peers[i] = ops.get(i).peer();
            }
            Op op = e.begin(Frame.P2P, OpCodes.SEND, deadline, peers, peers.length);
            for (io.jcomm.api.device.P2POp p : ops) {
                if (p.kind() == io.jcomm.api.device.P2POp.Kind.RECV) {
                    Tensor t = p.tensor();
                    Frame f = op.frame(0).dtype(t.dtype()).count(t.numel()).root(tag);
                    p2pPost(Recv.into(op, p.peer(), f, t.buffer(), null));
                }
            }
            for (io.jcomm.api.device.P2POp p : ops) {
                if (p.kind() == io.jcomm.api.device.P2POp.Kind.SEND) {
                    Tensor t = p.tensor();
                    p2pSend(op, p.peer(), op.frame(0).dtype(t.dtype()).count(t.numel()).root(tag), t.buffer());
                }
            }
            e.await(op);
        } finally {
            e.exit();
        }
    }

    @Override
    public void recv(Tensor tensor, int src, int tag, Deadline deadline) {
        e.enter("recv");
        try {
            Op op = e.begin(Frame.P2P, OpCodes.SEND, deadline, src);
            op.template.dtype(tensor.dtype()).count(tensor.numel()).root(tag);
            p2pPost(Recv.into(op, src, op.frame(0), tensor.buffer(), null));
            e.await(op);
        } finally {
            e.exit();
        }
    }

    // ------------------------------------------------------------------ byte payloads (objects)

    @Override
    public byte[] broadcastBytes(byte[] payload, int src, int maxBytes, Deadline deadline) {
        ShmStaging f = e.shm.fast();
        if (f != null) {
            byte[] got = broadcastBytesFast(f, payload, src, maxBytes, deadline);
            if (got != null) {
                return got;
            }
            // the object does not fit the fast path: every rank knows it and goes on with the links
        }
        e.enter("broadcastObject");
        try {
            if (e.large) {
                return broadcastBytesTree(payload, src, maxBytes, deadline);
            }
            Op op = e.begin(Frame.DATA, OpCodes.BCAST_BYTES, deadline);
            op.template.root(src);
            if (rank == src) {
                ByteBuffer p = bytePayload(ByteBuffer.wrap(payload)); // sends do not move its position: one copy for all
                for (int q = 0; q < size; q++) {
                    if (q != rank) {
                        e.send(op, q, op.frame(0), p);
                    }
                }
                e.await(op);
                return payload;
            }
            Recv r = e.post(Recv.bytes(op, src, op.frame(0), maxBytes));
            e.await(op);
            return r.bytes;
        } finally {
            e.exit();
        }
    }

    /**
     * The object broadcast through the fast path: the root copies the object into its region (if it fits)
     * and publishes its length; the others wait for the root's piece only. Null when the object does not fit:
     * every rank then runs the socket broadcast.
     */
    private byte[] broadcastBytesFast(ShmStaging f, byte[] payload, int src, int maxBytes, Deadline deadline) {
        e.enter("broadcastObject");
        try {
            Op op = e.begin(Frame.DATA, OpCodes.BCAST_BYTES, deadline);
            long code = fastCode(op, src);
            long piece = f.nextPiece();
            e.shm.gateStaging(f, op, piece);
            if (rank == src) {
                boolean fits = payload.length <= f.pieceBytes();
                if (fits) {
                    f.input(rank, piece).put(payload);
                }
                f.publishInput(piece, op.seq, 0, code, 0, payload.length);
                return fits ? payload : null;
            }
            f.publishInput(piece, op.seq, 0, code, 0); // "done with the previous piece"
            e.shm.awaitStagingFrom(f, op, src, piece, code, 0, 0);
            long len = f.length(src, piece);
            if (len > f.pieceBytes() && len <= Integer.MAX_VALUE) {
                return null;
            }
            byte[] out = new byte[checkedLength(src, len, maxBytes)];
            f.input(src, piece).get(out);
            return out;
        } finally {
            e.exit();
        }
    }

    /** A peer's object length from the fast path, checked against the receiver's limit as the links check it. */
    private int checkedLength(int peer, long len, int maxBytes) {
        if (len < 0 || len > maxBytes) {
            throw (ProtocolException) e.fail(new ProtocolException(e.ctx(), "rank " + peer + " sent an object of " + len
                    + " bytes; the limit is " + maxBytes + " (option object.maxBytes)"));
        }
        return (int) len;
    }

    /**
     * The object all-gather through the fast path: every rank copies its object in (if it fits) and
     * publishes its length; once all did, each copies the others out. Null when some object does not fit
     * (every rank sees every length, so all then run the socket all-gather).
     */
    private byte[][] allGatherBytesFast(ShmStaging f, byte[] payload, int maxBytes, Deadline deadline) {
        e.enter("allGatherObject");
        try {
            Op op = e.begin(Frame.DATA, OpCodes.ALLGATHER_BYTES, deadline);
            long code = fastCode(op, 0);
            long piece = f.nextPiece();
            e.shm.gateStaging(f, op, piece);
            if (payload.length <= f.pieceBytes()) {
                f.input(rank, piece).put(payload);
            }
            f.publishInput(piece, op.seq, 0, code, 0, payload.length);
            e.shm.awaitStaging(f, op, ShmStaging.INPUT_SEQ, piece, code, 0, 0);
            for (int q = 0; q < size; q++) {
                long len = q == rank ? payload.length : f.length(q, piece);
                if (len > f.pieceBytes() && len <= Integer.MAX_VALUE) {
                    return null;
                }
            }
            byte[][] out = new byte[size][];
            for (int q = 0; q < size; q++) {
                if (q == rank) {
                    out[q] = payload;
                } else {
                    out[q] = new byte[checkedLength(q, f.length(q, piece), maxBytes)];
                    f.input(q, piece).get(out[q]);
                }
            }
            return out;
        } finally {
            e.exit();
        }
    }

    /** Large heap payloads are copied to a direct buffer once (sockets and rings want direct memory). */
    private static ByteBuffer bytePayload(ByteBuffer heap) {
        if (heap.remaining() <= Link.INLINE_PAYLOAD_MAX) {
            return heap;
        }
        ByteBuffer d = ByteBuffer.allocateDirect(heap.remaining());
        d.put(heap.duplicate()).flip();
        return d;
    }

    @Override
    public byte[][] allGatherBytes(byte[] payload, int myRank, int groupSize, int maxBytes, Deadline deadline) {
        ShmStaging f = e.shm.fast();
        if (f != null) {
            byte[][] got = allGatherBytesFast(f, payload, maxBytes, deadline);
            if (got != null) {
                return got;
            }
        }
        e.enter("allGatherObject");
        try {
            if (e.large) {
                return allGatherBytesBruck(payload, maxBytes, deadline);
            }
            Op op = e.begin(Frame.DATA, OpCodes.ALLGATHER_BYTES, deadline);
            Recv[] rs = new Recv[size];
            for (int q = 0; q < size; q++) {
                if (q != rank) {
                    rs[q] = e.post(Recv.bytes(op, q, op.frame(0), maxBytes));
                }
            }
            ByteBuffer p = bytePayload(ByteBuffer.wrap(payload));
            for (int q = 0; q < size; q++) {
                if (q != rank) {
                    e.send(op, q, op.frame(0), p);
                }
            }
            e.await(op);
            byte[][] out = new byte[size][];
            for (int q = 0; q < size; q++) {
                out[q] = q == rank ? payload : rs[q].bytes;
            }
            return out;
        } finally {
            e.exit();
        }
    }

    /**
     * All-gather of byte payloads in ceil(log2 N) rounds (Bruck): after round k this rank holds the
     * payloads of ranks rank .. rank + 2^(k+1) - 1; in round k it sends what it holds to rank - 2^k and
     * receives from rank + 2^k, so that it talks to the barrier's peers only. Each message is a
     * sequence of (length, bytes). Lazily connected groups; inside {@code enter}.
     */
    private byte[][] allGatherBytesBruck(byte[] payload, int maxBytes, Deadline deadline) {
        byte[][] held = new byte[size][]; // held[i]: the payload of rank (rank + i) mod size
        held[0] = payload;
        int have = 1;
        int[] peers = new int[2];
        for (int dist = 1; dist < size; dist <<= 1) {
            int count = Math.min(dist, size - dist);
            peers[0] = mod(rank - dist);
            peers[1] = mod(rank + dist);
            Op op = e.begin(Frame.DATA, OpCodes.ALLGATHER_BYTES, deadline, peers, 2);
            Recv r = e.post(Recv.bytes(op, peers[1], op.frame(0), (int) Math.min(Integer.MAX_VALUE - 64,
                    (long) count * (4 + maxBytes))));
            int bytes = 0;
            for (int i = 0; i < count; i++) {
                bytes += 4 + held[i].length;
            }
            ByteBuffer out = ByteBuffer.allocate(bytes).order(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < count; i++) {
                out.putInt(held[i].length).put(held[i]);
            }
            out.flip();
            e.send(op, peers[0], op.frame(0), bytePayload(out));
            e.await(op);
            ByteBuffer in = ByteBuffer.wrap(r.bytes).order(ByteOrder.LITTLE_ENDIAN);
            for (int i = 0; i < count; i++) {
                int n = in.remaining() >= 4 ? in.getInt() : -1;
                if (n < 0 || n > maxBytes || n > in.remaining()) {
                    throw e.fail(new ProtocolException(e.ctx(), "malformed all-gather message from rank "
                            + peers[1]));
                }
                byte[] b = new byte[n];
                in.get(b);
                held[dist + i] = b;
            }
            have += count;
        }
        if (have != size) {
            throw new IllegalStateException("all-gather collected " + have + " of " + size + " payloads");
        }
        byte[][] all = new byte[size][];
        for (int i = 0; i < size; i++) {
            all[mod(rank + i)] = held[i];
        }
        return all;
    }

    @Override
    public byte[][] gatherBytes(byte[] payload, int dst, int myRank, int groupSize, int maxBytes, Deadline deadline) {
        e.enter("gatherObject");
        try {
            if (e.large) {
                return gatherBytesTree(payload, dst, maxBytes, deadline);
            }
            Op op = e.begin(Frame.DATA, OpCodes.GATHER_BYTES, deadline);
            op.template.root(dst);
            if (rank != dst) {
                e.send(op, dst, op.frame(0), bytePayload(ByteBuffer.wrap(payload)));
                e.await(op);
                return null;
            }
            Recv[] rs = new Recv[size];
            for (int q = 0; q < size; q++) {
                if (q != rank) {
                    rs[q] = e.post(Recv.bytes(op, q, op.frame(0), maxBytes));
                }
            }
            e.await(op);
            byte[][] out = new byte[size][];
            for (int q = 0; q < size; q++) {
                out[q] = q == rank ? payload : rs[q].bytes;
            }
            return out;
        } finally {
            e.exit();
        }
    }

    /**
     * The object broadcast of a lazily connected group, over the binomial tree rooted at {@code src} (the
     * barrier's peers only): each rank receives the object from its parent and passes it to its children.
     * Inside {@code enter}.
     */
    private byte[] broadcastBytesTree(byte[] payload, int src, int maxBytes, Deadline deadline) {
        int[] peers = new int[33];
        int n = treePeers(src, peers);
        boolean root = rank == src;
        Op op = e.begin(Frame.DATA, OpCodes.BCAST_BYTES, deadline, peers, n);
        op.template.root(src).algo(ALGO_TREE);
        byte[] got = payload;
        if (!root) {
            Recv r = e.post(Recv.bytes(op, peers[0], op.frame(0), maxBytes));
            e.await(op);
            got = r.bytes;
        }
        ByteBuffer p = bytePayload(ByteBuffer.wrap(got)); // sends do not move its position: one copy for every child
        for (int i = root ? 0 : 1; i < n; i++) {
            e.send(op, peers[i], op.frame(0), p);
        }
        e.await(op);
        return got;
    }

    /**
     * The object gather of a lazily connected group, over the binomial tree rooted at {@code dst}: each rank
     * sends its parent one message with its subtree's objects in position order, each as a little-endian
     * {@code i32} length and its bytes; the root checks every length and puts the objects in rank order.
     * Inside {@code enter}.
     */
    private byte[][] gatherBytesTree(byte[] payload, int dst, int maxBytes, Deadline deadline) {
        int[] peers = new int[33];
        int n = treePeers(dst, peers);
        int pos = mod(rank - dst);
        Op op = e.begin(Frame.DATA, OpCodes.GATHER_BYTES, deadline, peers, n);
        op.template.root(dst).algo(ALGO_TREE);
        int first = pos == 0 ? 0 : 1;
        Recv[] rs = new Recv[n];
        for (int i = first; i < n; i++) {
            long most = (long) subtree(pos + mod(peers[i] - rank)) * (4L + maxBytes);
            rs[i] = e.post(Recv.bytes(op, peers[i], op.frame(0), (int) Math.min(most, Integer.MAX_VALUE - 64)));
        }
        e.await(op);
        // own entry, then the children's blocks by position: the children are listed farthest first
        long total = 4L + payload.length;
        for (int i = first; i < n; i++) {
            total += rs[i].bytes.length;
        }
        if (total > Integer.MAX_VALUE - 64) {
            throw (ProtocolException) e.fail(new ProtocolException(e.ctx(), "the objects gathered below this rank take "
                    + total + " bytes, more than one message carries"));
        }
        ByteBuffer block = ByteBuffer.allocate((int) total).order(ByteOrder.LITTLE_ENDIAN);
        block.putInt(payload.length).put(payload);
        for (int i = n - 1; i >= first; i--) {
            block.put(rs[i].bytes);
        }
        block.flip();
        if (pos != 0) {
            e.send(op, peers[0], op.frame(0), bytePayload(block));
            e.await(op);
            return null;
        }
        byte[][] out = new byte[size][];
        for (int p = 0; p < size; p++) {
            int from = mod(dst + p);
            if (block.remaining() < 4) {
                throw (ProtocolException) e.fail(new ProtocolException(e.ctx(), "the gathered objects end before rank "
                        + from + "'s"));
            }
            int len = block.getInt();
            if (len < 0 || len > block.remaining()) {
                throw (ProtocolException) e.fail(new ProtocolException(e.ctx(), "rank " + from
                        + "'s gathered object has a bad length: " + len));
            }
            out[from] = new byte[checkedLength(from, len, maxBytes)];
            block.get(out[from]);
        }
        if (block.hasRemaining()) {
            throw (ProtocolException) e.fail(new ProtocolException(e.ctx(), block.remaining()
                    + " bytes follow the gathered objects"));
        }
        out[rank] = payload;
        return out;
    }

    @Override
    public void sendBytes(byte[] payload, int dst, Deadline deadline) {
        e.enter("sendObject");
        try {
            Op op = e.begin(Frame.P2P, OpCodes.SEND_BYTES, deadline, dst);
            op.template.root(OBJECT_TAG);
            ByteBuffer p = ByteBuffer.wrap(payload);
            boolean whole = e.links[dst].mailbox != null && payload.length <= e.links[dst].mailbox.inlineMax();
            p2pSend(op, dst, op.frame(0), whole ? p : bytePayload(p)); // a record copies from the heap itself
            e.await(op);
        } finally {
            e.exit();
        }
    }

    @Override
    public byte[] recvBytes(int src, int maxBytes, Deadline deadline) {
        e.enter("recvObject");
        try {
            Op op = e.begin(Frame.P2P, OpCodes.SEND_BYTES, deadline, src);
            op.template.root(OBJECT_TAG);
            Recv r = p2pPost(Recv.bytes(op, src, op.frame(0), maxBytes));
            e.await(op);
            return r.bytes;
        } finally {
            e.exit();
        }
    }

    @Override
    public boolean hasFailed() {
        return e.hasFailed();
    }

    @Override
    public void close() {
        e.close();
    }

    @Override
    public void cutConnections() {
        e.cut();
    }
}
