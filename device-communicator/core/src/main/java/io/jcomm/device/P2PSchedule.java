package io.jcomm.device;

import io.jcomm.api.device.P2POp;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeMap;

/**
 * A deadlock-free order for running a batch of point-to-point operations one at a time with
 * blocking sends and receives, for communicators whose transport has no group call (the CPU group,
 * a staging vendor backend).
 *
 * <p>Every rank walks its peers in the same global order of rank pairs (by the smaller rank of the
 * pair, then the larger); with each peer, the lower rank of the pair sends first and then receives,
 * the higher rank receives first and then sends, each direction in the batch's order. The smallest
 * pair still pending then always has both of its ranks at it, so the batch completes even if a send
 * blocks until its receive is posted (rendezvous) and even if the transport runs operations strictly
 * in call order. Sends to and receives from self are left out (the caller matches them locally).
 */
public final class P2PSchedule {

    private P2PSchedule() {
    }

    /** The non-self operations of {@code ops} in the order this {@code rank} must run them. */
    public static List<P2POp> order(List<P2POp> ops, int rank) {
        TreeMap<Long, List<P2POp>> byPair = new TreeMap<>();
        for (P2POp op : ops) {
            if (op.peer() == rank) {
                continue;
            }
            long lo = Math.min(rank, op.peer());
            long hi = Math.max(rank, op.peer());
            byPair.computeIfAbsent((lo << 32) | hi, k -> new ArrayList<>()).add(op);
        }
        List<P2POp> out = new ArrayList<>(ops.size());
        for (List<P2POp> withPeer : byPair.values()) {
            boolean lower = rank < withPeer.get(0).peer();
            P2POp.Kind first = lower ? P2POp.Kind.SEND : P2POp.Kind.RECV;
            for (P2POp op : withPeer) {
                if (op.kind() == first) {
                    out.add(op);
                }
            }
            for (P2POp op : withPeer) {
                if (op.kind() != first) {
                    out.add(op);
                }
            }
        }
        return out;
    }
}
