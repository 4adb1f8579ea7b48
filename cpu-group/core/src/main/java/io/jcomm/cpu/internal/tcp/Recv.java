package io.jcomm.cpu.internal.tcp;

import io.jcomm.cpu.internal.NativeCopy;
import io.jcomm.api.DType;
import io.jcomm.api.ReduceOp;
import io.jcomm.cpu.spi.Reductions;
import java.nio.ByteBuffer;

/**
 * A posted receive: the header it expects from one peer and where the payload goes.
 *
 * <ul>
 *   <li>{@link #INTO}: the payload is written to {@code dest} (exactly its remaining bytes);</li>
 *   <li>{@link #REDUCE}: {@code dest = (init != null ? init : dest) op payload}, element-wise;</li>
 *   <li>{@link #BYTES}: a payload of variable length (at most {@code maxBytes}) becomes {@link #bytes}.</li>
 * </ul>
 */
final class Recv {

    static final int INTO = 0;
    static final int REDUCE = 1;
    static final int BYTES = 2;

    final Op op;
    final int peer;
    final Frame expect;
    final int mode;
    final ByteBuffer dest;
    final DType dtype;
    final ReduceOp reduceOp;
    final ByteBuffer init;
    final int maxBytes;
    final Runnable onDone;
    byte[] bytes;
    boolean done;
    /** Collective receives of one link finish in posting order; set by the link that owns it. */
    Link orderedBy;
    boolean payloadComplete;

    private Recv(Op op, int peer, Frame expect, int mode, ByteBuffer dest, DType dtype, ReduceOp reduceOp,
                 ByteBuffer init, int maxBytes, Runnable onDone) {
        this.op = op;
        this.peer = peer;
        this.expect = expect;
        this.mode = mode;
        this.dest = dest;
        this.dtype = dtype;
        this.reduceOp = reduceOp;
        this.init = init;
        this.maxBytes = maxBytes;
        this.onDone = onDone;
    }

    /** Receives into {@code dest}'s remaining bytes. */
    static Recv into(Op op, int peer, Frame expect, ByteBuffer dest, Runnable onDone) {
        expect.payload = dest.remaining();
        return new Recv(op, peer, expect, INTO, dest.slice(), null, null, null, 0, onDone);
    }

    /** Reduces into {@code acc}'s remaining bytes ({@code init}, if given, is the left operand). */
    static Recv reduce(Op op, int peer, Frame expect, ByteBuffer acc, ByteBuffer init, DType dtype, ReduceOp rop,
                       Runnable onDone) {
        expect.payload = acc.remaining();
        return new Recv(op, peer, expect, REDUCE, acc.slice(), dtype, rop, init == null ? null : init.slice(), 0, onDone);
    }

    static Recv bytes(Op op, int peer, Frame expect, int maxBytes) {
        return new Recv(op, peer, expect, BYTES, null, null, null, null, maxBytes, null);
    }

    boolean variable() {
        return mode == BYTES;
    }

    int elements() {
        return dest.remaining() / dtype.byteSize();
    }

    /** Applies a complete payload held in {@code src} (position 0, {@code len} bytes), then finishes. */
    void deliver(ByteBuffer src, int len) {
        deliver(src, len, false);
    }

    /** {@link #deliver(ByteBuffer, int)}, copying into the destination natively when {@code nativeCopy} allows. */
    void deliver(ByteBuffer src, int len, boolean nativeCopy) {
        switch (mode) {
            case INTO:
                if (len > 0) {
                    NativeCopy.put(dest.duplicate(), src.duplicate().position(0).limit(len), nativeCopy);
                }
                break;
            case REDUCE:
                applyReduce(src.duplicate().position(0).limit(len));
                break;
            case BYTES:
                byte[] b = new byte[len];
                src.duplicate().position(0).limit(len).get(b);
                bytes = b;
                break;
            default:
                throw new AssertionError(mode);
        }
        finish();
    }

    /** {@code dest = (init or dest) op data}; {@code data} holds exactly the payload. */
    void applyReduce(ByteBuffer data) {
        int n = elements();
        if (init != null) {
            Reductions.reduce(dtype, reduceOp, dest, init, data, n);
        } else {
            Reductions.reduceInto(dtype, reduceOp, dest, data, n);
        }
    }

    /**
     * The payload is in place: the receive completes now, or, for a collective receive, once every
     * receive posted before it on the same link has completed (payloads may arrive out of order when
     * some travel by socket and others by shared memory; continuations must run in message order).
     */
    void finish() {
        if (orderedBy != null) {
            payloadComplete = true;
            orderedBy.finishInOrder();
            return;
        }
        complete();
    }

    /** Marks the receive complete and runs its continuation. */
    void complete() {
        done = true;
        op.pendingRecvs--;
        if (onDone != null) {
            onDone.run();
        }
    }
}
