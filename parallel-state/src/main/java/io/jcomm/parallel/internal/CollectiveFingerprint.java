package io.jcomm.parallel.internal;

import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.DType;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import java.nio.LongBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * The cross-rank check of device collectives, device point-to-point calls and tensor-dict broadcasts
 * ({@code JCOMM_DEBUG=detail}), over the group's CPU {@link ProcessGroup}, before the device
 * communicator is touched, so that a mismatched NCCL call becomes a {@link CollectiveMismatchException}
 * naming both calls and ranks instead of a hang. A fingerprint is {@value #LONGS} longs: operation,
 * dtype, reduce op, dimension, root or peer, sequence number, rank count of the shape, element count, the
 * first {@value #DIMS} dimensions, a hash of the whole shape, and a tag.
 *
 * <ul>
 *   <li>Collectives ({@link #check}): every member all-gathers its fingerprint; when any two differ, every
 *       member throws, naming its own call and the first member whose call differs from it.</li>
 *   <li>{@code broadcastTensorDict} ({@link #checkTensorDict}, {@link #checkTensorDictMetadata}): the call
 *       (source) is compared like a collective before the metadata moves, and what each member received
 *       (entries, tensors, bytes and hash of the metadata) after it, before any tensor moves.</li>
 *   <li>Point-to-point ({@link #sent}, {@link #received}): the sender sends its fingerprint (operation,
 *       dtype, shape, tag, and its count of device sends to that peer) to the receiver ahead of the
 *       payload, as a buffered CPU message, so that a send still does not wait for its receive; the receiver
 *       compares it with its own call and its count of device receives from that peer, and throws on a
 *       difference. Only the receiver learns of the mismatch (the sender's call has returned); the sender
 *       hears of it when the receiver fails the group.</li>
 * </ul>
 *
 * <p>One instance per group and rank; not thread safe (a group is driven by one thread at a time).
 * Its buffers are allocated once.
 */
public final class CollectiveFingerprint {

    /** Longs in one fingerprint. */
    public static final int LONGS = 17;
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
    private static final int TAG = HASH + 1;
    /** The CPU group tag of point-to-point fingerprints (apart from user tags and tensor-dict tensors). */
    public static final int P2P_TAG = 0x46500001;

    /** The checked operations; the ordinal is the code on the wire (append only). */
    public enum Op {
        ALL_REDUCE("allReduce"), ALL_GATHER("allGather"), REDUCE_SCATTER("reduceScatter"), GATHER("gather"),
        BROADCAST("broadcast"), SEND("send"), RECV("recv"), BROADCAST_TENSOR_DICT("broadcastTensorDict"),
        TENSOR_DICT_METADATA("broadcastTensorDict metadata");

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
    private final Tensor p2p = Tensor.allocate(DType.I64, LONGS);
    private final long[] expected = new long[LONGS];
    private final long[] sends;
    private final long[] recvs;
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
        this.sends = new long[this.ranks.size()];
        this.recvs = new long[this.ranks.size()];
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
        long[] f = fill(scratch, op, tensor, reduce, dim, root, sequence++, 0);
        agree(f, tensor.shape(), op);
    }

    /**
     * Before {@code broadcastTensorDict} moves anything: compares the call (its source) with every
     * member's, like a collective.
     *
     * @throws CollectiveMismatchException on every member when any two members' calls differ
     */
    public void checkTensorDict(int src) {
        long[] f = fill(scratch, Op.BROADCAST_TENSOR_DICT, null, null, -1, src, sequence++, 0);
        agree(f, null, Op.BROADCAST_TENSOR_DICT);
    }

    /**
     * After {@code broadcastTensorDict}'s metadata, before its tensors: compares what each member has
     * (the metadata's size and hash, its entry and tensor counts) with every member's.
     *
     * @throws CollectiveMismatchException on every member when any two members' metadata differ
     */
    public void checkTensorDictMetadata(int src, byte[] metadata, int entries, int tensors) {
        long[] f = fill(scratch, Op.TENSOR_DICT_METADATA, null, null, -1, src, sequence++, 0);
        f[NUMEL] = metadata.length;
        f[SHAPE] = entries;
        f[SHAPE + 1] = tensors;
        f[HASH] = Arrays.hashCode(metadata);
        agree(f, null, Op.TENSOR_DICT_METADATA);
    }

    /**
     * Before a device send of {@code tensor} to group rank {@code dst}: sends this call's fingerprint to
     * it (a small buffered CPU message: the send does not wait for the receive).
     *
     * @param tag what the payload is to the receiver (0 for a plain send; the route's tag otherwise)
     */
    public void sent(Tensor tensor, int dst, long tag) {
        long[] f = fill(scratch, Op.SEND, tensor, null, -1, dst, sends[dst]++, tag);
        p2p.buffer().asLongBuffer().put(0, f);
        cpu.send(p2p, dst, P2P_TAG, timeout);
    }

    /**
     * Before a device receive into {@code tensor} from group rank {@code src}: receives the sender's
     * fingerprint and compares it with this call.
     *
     * @param tag what the payload is to this rank (as the sender passes it to {@link #sent})
     * @throws CollectiveMismatchException when the sender's call does not match this one
     */
    public void received(Tensor tensor, int src, long tag) {
        long[] f = fill(scratch, Op.RECV, tensor, null, -1, src, recvs[src]++, tag);
        cpu.recv(p2p, src, P2P_TAG, timeout);
        p2p.buffer().asLongBuffer().get(0, other);
        System.arraycopy(f, 0, expected, 0, LONGS);
        expected[OP] = Op.SEND.ordinal();
        expected[ROOT] = rankInGroup;
        if (Arrays.equals(other, expected)) {
            return;
        }
        throw new CollectiveMismatchException(OpContext.of(groupName, rankInGroup, Op.RECV.label()),
                "point-to-point mismatch in group " + groupName + ": this rank (group rank " + rankInGroup + ", global "
                        + ranks.get(rankInGroup) + ") called " + describe(f, tensor.shape()) + " but group rank " + src
                        + " (global " + ranks.get(src) + ") called " + describe(other, null));
    }

    private static long[] fill(long[] f, Op op, Tensor tensor, ReduceOp reduce, int dim, int root, long seq, long tag) {
        Arrays.fill(f, 0L);
        f[OP] = op.ordinal();
        f[DTYPE] = tensor == null ? -1 : tensor.dtype().ordinal();
        f[REDUCE] = reduce == null ? -1 : reduce.ordinal();
        f[DIM] = dim;
        f[ROOT] = root;
        f[SEQ] = seq;
        f[TAG] = tag;
        if (tensor != null) {
            long[] shape = tensor.shape();
            f[RANK] = shape.length;
            f[NUMEL] = tensor.numel();
            System.arraycopy(shape, 0, f, SHAPE, Math.min(shape.length, DIMS));
            f[HASH] = Arrays.hashCode(shape);
        }
        return f;
    }

    /** All-gathers {@code f} and throws on every member when any two differ. */
    private void agree(long[] f, long[] shape, Op op) {
        mine.buffer().asLongBuffer().put(0, f);
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
     * A call as a message shows it, e.g. {@code allReduce(f32 [4, 1024], SUM) #17} or
     * {@code send(f32 [4, 8], dst 1) #3}; {@code shape} may be {@code null} (then the shape comes from the
     * fingerprint).
     */
    static String describe(long[] f, long[] shape) {
        Op[] ops = Op.values();
        Op op = f[OP] >= 0 && f[OP] < ops.length ? ops[(int) f[OP]] : null;
        List<String> parts = new ArrayList<>();
        if (op == Op.TENSOR_DICT_METADATA) {
            parts.add(f[SHAPE] + " entries");
            parts.add(f[SHAPE + 1] + " tensors");
            parts.add(f[NUMEL] + " bytes");
            parts.add("hash " + Integer.toHexString((int) f[HASH]));
        } else if (f[DTYPE] >= 0) {
            DType[] dtypes = DType.values();
            StringBuilder sb = new StringBuilder(f[DTYPE] < dtypes.length ? dtypes[(int) f[DTYPE]].shortName()
                    : "dtype" + f[DTYPE]).append(' ');
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
            parts.add(sb.toString());
        }
        ReduceOp[] reduces = ReduceOp.values();
        if (f[REDUCE] >= 0) {
            parts.add(f[REDUCE] < reduces.length ? reduces[(int) f[REDUCE]].name() : "reduce" + f[REDUCE]);
        }
        if (f[DIM] >= 0) {
            parts.add("dim " + f[DIM]);
        }
        if (f[ROOT] >= 0) {
            parts.add((op == Op.GATHER || op == Op.SEND ? "dst " : "src ") + f[ROOT]);
        }
        if (f[TAG] != 0) {
            parts.add("tag 0x" + Long.toHexString(f[TAG]));
        }
        return (op != null ? op.label() : "op" + f[OP]) + "(" + String.join(", ", parts) + ") #" + f[SEQ];
    }
}
