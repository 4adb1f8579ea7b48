package io.jcomm.cpu.internal.tcp;

import io.jcomm.api.Deadline;
import io.netty.channel.ChannelFuture;
import java.util.ArrayList;
import java.util.List;

/**
 * One collective or point-to-point operation in progress: what it waits for (posted receives, socket
 * writes of caller memory, shared-memory transfers) and its deadline. Driving-thread only.
 */
final class Op {

    final String name;
    final int code;
    final long seq;
    final Deadline deadline;
    /** Fields every message of this operation carries (kind, op, seq, dtype, count, root, ...). */
    final Frame template;
    int pendingRecvs;
    int pendingShmSends;
    /** Messages of this operation waiting for a peer's credit (see {@link Link}). */
    int pendingHeld;
    private final List<ChannelFuture> writes = new ArrayList<>(4);

    Op(String name, int kind, int code, long seq, Deadline deadline) {
        this.name = name;
        this.code = code;
        this.seq = seq;
        this.deadline = deadline;
        this.template = Frame.of(kind, code, seq);
    }

    /** A header for message {@code index} of this operation. */
    Frame frame(int index) {
        Frame f = template.copy();
        f.index = index;
        return f;
    }

    /** Tracks a write that references caller memory: the operation is not done before it is. */
    void track(ChannelFuture f) {
        if (!f.isDone()) {
            writes.add(f);
        }
    }

    boolean isComplete() {
        if (pendingRecvs != 0 || pendingShmSends != 0 || pendingHeld != 0) {
            return false;
        }
        for (int i = writes.size() - 1; i >= 0; i--) {
            if (!writes.get(i).isDone()) {
                return false;
            }
            writes.remove(i);
        }
        return true;
    }

    @Override
    public String toString() {
        return name + (seq > 0 ? " #" + seq : "") + " (recvs " + pendingRecvs + ", writes " + writes.size()
                + ", shm sends " + pendingShmSends + ", held " + pendingHeld + ")";
    }
}
