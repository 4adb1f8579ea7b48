package io.jcomm.api;

/**
 * The group, communicator or queue was closed (locally or by a clean shutdown of the peer) before
 * or while the call ran. Distinct from a {@link PeerFailureException}, which means a peer died.
 */
public class CommClosedException extends CommException {

    private static final long serialVersionUID = 1L;

    public CommClosedException(OpContext context, String detail, Throwable cause) {
        super(context, detail, cause);
    }

    public CommClosedException(OpContext context, String detail) {
        super(context, detail, null);
    }

    public CommClosedException(String detail) {
        super(OpContext.NONE, detail, null);
    }
}
