package io.jcomm.parallel.internal;

import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.DType;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import java.nio.LongBuffer;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * The cross-rank check of device collectives ({@code JCOMM_DEBUG=detail}): before a device
 * collective every member all-gathers, over the group's CPU {@link ProcessGroup}, a fixed-size
 * fingerprint of its call ({@value #LONGS} longs: operation, dtype, reduce op, dimension,
 * root, per-group sequence number, rank count of the shape, element count, the first
 * {@value #DIMS} dimensions and a hash of the whole shape). When any two members differ, every
 * member throws {@link CollectiveMismatchException} naming its own call and the first member whose
 * call differs from it, before the device communicator is touched, so that a mismatched NCCL call
 * becomes an error instead of a hang.
 *
 * <p>Point-to-point calls are not checked: a pairwise exchange would turn a send, which may be
 * posted long before its receive, into a rendezvous.
 *
 * <p>One instance per group and rank; not thread safe (a group is driven by one thread at a time).
 * Its buffers are allocated once.
 */
public final class CollectiveFingerprint {

    /** Longs in one fingerprint. */
    public static final int LONGS = 16;
    /** Dimensions of the shape carried one by one (the rest only through the hash). */
    public static final int DIMS = 7;

    private static final int OP = 0;
    private static final int DTYPE = 1;
    private static final int REDUCE = 2;
    private static final int DIM = 3;
    private static final int ROOT = 4;
    private static final int SEQ = 5;
    private static final int RANK = 6;
    private static final int NUMEL = 7;
    private static final int SHAPE = 8;
    private static final int HASH = SHAPE + DIMS;

    /** The checked operations; the ordinal is the code on the wire (append only). */
    public enum Op {
        ALL_REDUCE("allReduce"), ALL_GATHER("allGather"), REDUCE_SCATTER("reduceScatter"), GATHER("gather"),
        BROADCAST("broadcast");

        private final String label;

        Op(String label) {
            this.label = label;
        }

        /** The method name, e.g. {@code allReduce}. */
        public String label() {
            return label;
        }
    }

    private final ProcessGroup cpu;
    private final String groupName;
    private final List<Integer> ranks;
    private final int rankInGroup;
    private final Duration timeout;
    private final Tensor mine = Tensor.allocate(DType.I64, LONGS);
    private final Tensor all;
    private final long[] scratch = new long[LONGS];
    private final long[] first = new long[LONGS];
    private final long[] other = new long[LONGS];
    private long sequence;

    /**
     * @param cpu         the group's CPU group (its ranks are the group's ranks)
     * @param groupName   the group's name, for messages
     * @param ranks       global rank of each group rank, for messages
     * @param timeout     bound of the exchange
     */
    public CollectiveFingerprint(ProcessGroup cpu, String groupName, List<Integer> ranks, Duration timeout) {
        this.cpu = Objects.requireNonNull(cpu, "cpu");
        this.groupName = Objects.requireNonNull(groupName, "groupName");
        this.ranks = List.copyOf(ranks);
        this.rankInGroup = cpu.rank();
        this.timeout = Objects.requireNonNull(timeout, "timeout");
        this.all = Tensor.allocate(DType.I64, (long) LONGS * this.ranks.size());
    }

    /** Device collectives checked so far (the sequence number of the next one). */
    public long sequence() {
        return sequence;
    }

    /**
     * Compares this call with every member's (collective over the group).
     *
     * @param op     the operation
     * @param tensor its input (the in-place tensor of all-reduce and broadcast)
     * @param reduce the reduce op, or {@code null} where there is none
     * @param dim    the dimension, or {@code -1} where there is none
     * @param root   the group rank of the source or destination, or {@code -1} where there is none
     * @throws CollectiveMismatchException on every member when any two members' calls differ
     */
    public void check(Op op, Tensor tensor, ReduceOp reduce, int dim, int root) {
        long[] f = scratch;
        Arrays.fill(f, 0L);
        long[] shape = tensor.shape();
        f[OP] = op.ordinal();
        f[DTYPE] = tensor.dtype().ordinal();
        f[REDUCE] = reduce == null ? -1 : reduce.ordinal();
        f[DIM] = dim;
        f[ROOT] = root;
        f[SEQ] = sequence++;
        f[RANK] = shape.length;
        f[NUMEL] = tensor.numel();
        System.arraycopy(shape, 0, f, SHAPE, Math.min(shape.length, DIMS));
        f[HASH] = Arrays.hashCode(shape);
        mine.buffer().asLongBuffer().put(f);
        cpu.allGather(all, mine, timeout);
        LongBuffer got = all.buffer().asLongBuffer();
        int differing = -1;
        boolean agree = true;
        got.get(0, first);
        for (int r = 0; r < ranks.size(); r++) {
            got.get(r * LONGS, other);
            if (agree && !Arrays.equals(other, first)) {
                agree = false;
            }
            if (differing < 0 && r != rankInGroup && !Arrays.equals(other, f)) {
                differing = r;
            }
        }
        if (agree) {
            return;
        }
        got.get(differing * LONGS, other);
        throw new CollectiveMismatchException(OpContext.of(groupName, rankInGroup, op.label()),
                "collective mismatch in group " + groupName + ": this rank (group rank " + rankInGroup + ", global "
                        + ranks.get(rankInGroup) + ") called " + describe(f, shape) + " but group rank " + differing
                        + " (global " + ranks.get(differing) + ") called " + describe(other, null));
    }

    /**
     * A call as a message shows it, e.g. {@code allReduce(f32 [4, 1024], SUM) #17}; {@code shape}
     * may be {@code null} (then the shape comes from the fingerprint).
     */
    static String describe(long[] f, long[] shape) {
        StringBuilder sb = new StringBuilder();
        Op[] ops = Op.values();
        sb.append(f[OP] >= 0 && f[OP] < ops.length ? ops[(int) f[OP]].label() : "op" + f[OP]).append('(');
        DType[] dtypes = DType.values();
        sb.append(f[DTYPE] >= 0 && f[DTYPE] < dtypes.length ? dtypes[(int) f[DTYPE]].shortName() : "dtype" + f[DTYPE]);
        sb.append(' ');
        if (shape != null) {
            sb.append(Arrays.toString(shape));
        } else {
            int n = (int) Math.max(0, f[RANK]);
            sb.append('[');
            for (int i = 0; i < Math.min(n, DIMS); i++) {
                sb.append(i > 0 ? ", " : "").append(f[SHAPE + i]);
            }
            if (n > DIMS) {
                sb.append(", ...");
            }
            sb.append(']');
            if (n > DIMS) {
                sb.append(" (").append(f[NUMEL]).append(" elements)");
            }
        }
        ReduceOp[] reduces = ReduceOp.values();
        if (f[REDUCE] >= 0) {
            sb.append(", ").append(f[REDUCE] < reduces.length ? reduces[(int) f[REDUCE]].name() : "reduce" + f[REDUCE]);
        }
        if (f[DIM] >= 0) {
            sb.append(", dim ").append(f[DIM]);
        }
        if (f[ROOT] >= 0) {
            sb.append(f[OP] == Op.GATHER.ordinal() ? ", dst " : ", src ").append(f[ROOT]);
        }
        return sb.append(") #").append(f[SEQ]).toString();
    }
}
