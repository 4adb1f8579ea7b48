package io.jcomm.cpu.internal.tcp;

import io.jcomm.api.DType;
import io.jcomm.api.ReduceOp;
import io.jcomm.cpu.internal.OpCodes;
import io.netty.buffer.ByteBuf;

/**
 * The header every message of the tcp backend starts with: 40 bytes, little-endian. It says which
 * collective (operation, sequence number, dtype, reduce op, element count, root or tag, algorithm)
 * the message belongs to and how long its payload is, so that a receiver can check that the sender
 * is running the same collective with the same arguments before it touches any payload byte.
 *
 * <pre>
 *  0 u8  magic (0xC7)      1 u8 kind            2 u8 op          3 u8 dtype code
 *  4 u8  reduce op code    5 u8 algorithm       6 u8 flags       7 u8 credit: messages
 *  8 i64 seq (collectives: the group's collective counter; hello: session nonce)
 * 16 i64 count (elements of the operation as the sender sees it, or a digest of per-rank counts)
 * 24 i32 root, or tag for point-to-point
 * 28 i32 index of this message within the operation (for this sender/receiver pair)
 * 32 i32 payload bytes that follow (through the socket, or through shared memory when flagged)
 * 36 i32 credit: bytes (hello: the sender's group generation, {@link io.jcomm.api.ProcessGroup#generation()})
 * </pre>
 *
 * <p>A {@link #HELLO} binds a new connection to one incarnation of the group: {@code seq} is the
 * receiver's nonce (published in this incarnation's namespace only), {@code count} the incarnation
 * counted in that namespace, {@code root} the sender's rank, {@code index} the receiver's, and the
 * last field the group's generation; a hello that differs in any of them is refused.</p>
 *
 * <p>The credit fields of a data message return flow-control credit to its receiver for the messages
 * the sender consumed from it (see {@link Link}): traffic in both directions needs no {@link #CREDIT}
 * frames. Zero when there is none; they take no part in matching.
 */
final class Frame {

    static final int SIZE = 40;
    static final byte MAGIC = (byte) 0xC7;

    // kinds
    static final int DATA = 1;
    static final int P2P = 2;
    static final int ABORT = 3;
    static final int BYE = 4;
    static final int HELLO = 5;
    static final int READY = 6;
    /**
     * The op of a {@link #HELLO} by which a lower rank of a lazily connected group asks the receiver
     * (a higher rank) to connect to it; the connection that carries it carries nothing else.
     */
    static final int HELLO_CALL_BACK = 1;
    /** The sender's outbound shared-memory ring to the receiver: the payload is the file's path (UTF-8). */
    static final int RING = 7;
    /** Answer to {@link #RING}: {@code count} 1 when the receiver mapped the ring, 0 when it cannot use it. */
    static final int RING_ACK = 8;
    /**
     * Flow control: the sender of this frame consumed {@code count} more of the receiver's data messages,
     * costing {@code seq} bytes (see {@link #cost()}); the receiver may send that much more.
     */
    static final int CREDIT = 9;
    /** Flow control: the sender of this frame waits for credit; answer with {@link #CREDIT} as soon as there is any. */
    static final int CREDIT_WANTED = 10;

    // flags
    static final int FLAG_SHM = 1;

    // abort reasons (in the op byte of an ABORT frame)
    static final int ABORT_FAILURE = 1;
    static final int ABORT_MISMATCH = 2;
    static final int ABORT_TIMEOUT = 3;

    int kind;
    int op;
    int dtype;
    int redop;
    int algo;
    int flags;
    long seq;
    long count;
    int root;
    int index;
    int payload;
    /** Credit returned with this frame: messages (0-255) and their cost in bytes. */
    int creditMessages;
    int creditBytes;

    Frame() {
    }

    static Frame of(int kind, int op, long seq) {
        Frame f = new Frame();
        f.kind = kind;
        f.op = op;
        f.seq = seq;
        f.root = -1;
        return f;
    }

    Frame dtype(DType t) {
        this.dtype = t == null ? 0 : t.code();
        return this;
    }

    Frame redop(ReduceOp r) {
        this.redop = r == null ? 0 : r.code();
        return this;
    }

    Frame algo(int a) {
        this.algo = a;
        return this;
    }

    Frame count(long c) {
        this.count = c;
        return this;
    }

    Frame root(int r) {
        this.root = r;
        return this;
    }

    Frame index(int i) {
        this.index = i;
        return this;
    }

    Frame payload(int bytes) {
        this.payload = bytes;
        return this;
    }

    Frame copy() {
        Frame f = new Frame();
        f.kind = kind;
        f.op = op;
        f.dtype = dtype;
        f.redop = redop;
        f.algo = algo;
        f.flags = flags;
        f.seq = seq;
        f.count = count;
        f.root = root;
        f.index = index;
        f.payload = payload;
        return f;
    }

    void writeTo(ByteBuf b) {
        b.writeByte(MAGIC);
        b.writeByte(kind);
        b.writeByte(op);
        b.writeByte(dtype);
        b.writeByte(redop);
        b.writeByte(algo);
        b.writeByte(flags);
        b.writeByte(creditMessages);
        b.writeLongLE(seq);
        b.writeLongLE(count);
        b.writeIntLE(root);
        b.writeIntLE(index);
        b.writeIntLE(payload);
        b.writeIntLE(creditBytes);
    }

    /**
     * Reads a header at {@code b}'s reader index (which advances by {@link #SIZE}).
     *
     * @return null when the magic byte is wrong (the stream is not ours or is corrupt)
     */
    static Frame readFrom(ByteBuf b) {
        Frame f = new Frame();
        byte magic = b.readByte();
        f.kind = b.readUnsignedByte();
        f.op = b.readUnsignedByte();
        f.dtype = b.readUnsignedByte();
        f.redop = b.readUnsignedByte();
        f.algo = b.readUnsignedByte();
        f.flags = b.readUnsignedByte();
        f.creditMessages = b.readUnsignedByte();
        f.seq = b.readLongLE();
        f.count = b.readLongLE();
        f.root = b.readIntLE();
        f.index = b.readIntLE();
        f.payload = b.readIntLE();
        f.creditBytes = b.readIntLE();
        return magic == MAGIC ? f : null;
    }

    static String opName(int op) {
        return OpCodes.name(op);
    }

    private static String dtypeName(int code) {
        if (code == 0) {
            return "-";
        }
        try {
            return DType.fromCode(code).shortName();
        } catch (RuntimeException e) {
            return "dtype#" + code;
        }
    }

    private static String redopName(int code) {
        if (code == 0) {
            return "-";
        }
        try {
            return ReduceOp.fromCode(code).name();
        } catch (RuntimeException e) {
            return "redop#" + code;
        }
    }

    /**
     * Describes how {@code got} differs from {@code expected}, or returns null when they agree (the
     * payload length is compared unless {@code variablePayload}).
     */
    static String difference(Frame expected, Frame got, boolean variablePayload) {
        if (expected.kind == got.kind && expected.op == got.op && expected.seq == got.seq && expected.dtype == got.dtype
                && expected.redop == got.redop && expected.count == got.count && expected.root == got.root
                && expected.algo == got.algo && expected.index == got.index
                && (variablePayload || expected.payload == got.payload)) {
            return null; // the common case, without building a description
        }
        StringBuilder sb = new StringBuilder();
        if (expected.kind != got.kind) {
            sb.append(" kind ").append(got.kind).append(" vs ").append(expected.kind).append(';');
        }
        if (expected.op != got.op) {
            sb.append(" operation ").append(opName(got.op)).append(" vs ").append(opName(expected.op)).append(';');
        }
        if (expected.seq != got.seq) {
            sb.append(" collective #").append(got.seq).append(" vs #").append(expected.seq).append(';');
        }
        if (expected.dtype != got.dtype) {
            sb.append(" dtype ").append(dtypeName(got.dtype)).append(" vs ").append(dtypeName(expected.dtype)).append(';');
        }
        if (expected.redop != got.redop) {
            sb.append(" reduce op ").append(redopName(got.redop)).append(" vs ").append(redopName(expected.redop)).append(';');
        }
        if (expected.count != got.count) {
            sb.append(" count ").append(got.count).append(" vs ").append(expected.count).append(';');
        }
        if (expected.root != got.root) {
            sb.append(expected.kind == P2P ? " tag " : " root ").append(got.root).append(" vs ").append(expected.root).append(';');
        }
        if (expected.algo != got.algo) {
            sb.append(" algorithm ").append(got.algo).append(" vs ").append(expected.algo)
                    .append(" (are the tcp.* options equal on every rank?);");
        }
        if (sb.length() == 0 && expected.index != got.index) {
            sb.append(" message index ").append(got.index).append(" vs ").append(expected.index).append(';');
        }
        if (sb.length() == 0 && !variablePayload && expected.payload != got.payload) {
            sb.append(" payload ").append(got.payload).append(" bytes vs ").append(expected.payload).append(';');
        }
        return sb.length() == 0 ? null : sb.toString();
    }

    /**
     * What a data message ({@link #DATA}, {@link #P2P}) costs against the receiver's credit: its header,
     * plus its payload when the payload travels through the socket (a shared-memory ring bounds its
     * own bytes). Both ends compute it from the header alone.
     */
    long cost() {
        return SIZE + ((flags & FLAG_SHM) != 0 ? 0 : (long) payload);
    }

    /** Whether this frame is a data message (counted by flow control). */
    boolean isData() {
        return kind == DATA || kind == P2P;
    }

    /** Short description for error messages. */
    String describe() {
        if (kind == P2P) {
            return opName(op) + "(" + dtypeName(dtype) + " x " + count + ", tag " + root + ")";
        }
        return opName(op) + " #" + seq + "(" + dtypeName(dtype) + " x " + count
                + (redop != 0 ? ", " + redopName(redop) : "") + (root >= 0 ? ", root " + root : "") + ")";
    }
}
