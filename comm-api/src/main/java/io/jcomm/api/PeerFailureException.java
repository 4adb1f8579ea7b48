package io.jcomm.api;

/**
 * A peer process died or its connection broke (reset, closed without a clean shutdown, liveness
 * timeout). Names the peer's rank in the group when it is known.
 */
public class PeerFailureException extends CommException {

    private static final long serialVersionUID = 1L;

    private final int peerRank;

    public PeerFailureException(OpContext context, int peerRank, String detail, Throwable cause) {
        super(context, "peer rank " + (peerRank < 0 ? "?" : Integer.toString(peerRank)) + ": " + detail, cause);
        this.peerRank = peerRank;
    }

    public PeerFailureException(OpContext context, int peerRank, String detail) {
        this(context, peerRank, detail, null);
    }

    /** The failed peer's rank in the group, or {@code -1} when unknown. */
    public int peerRank() {
        return peerRank;
    }
}
