package io.jcomm.api;

/**
 * Bytes that came from a peer, the network or a shared store were malformed, oversized or of an
 * unexpected type: a frame or message that does not decode, a length beyond its limit, a peer's
 * descriptor or record that does not fit, a handshake that fails. Raised before any memory is
 * allocated for the bad input. It is a communication failure like every {@link CommException}.
 *
 * <p>It never means that the caller's own arguments were invalid: those are
 * {@link IllegalArgumentException}s (and calls that do not fit an object's state
 * {@link IllegalStateException}s), thrown before anything is sent; see {@link CommException}.
 */
public class ProtocolException extends CommException {

    private static final long serialVersionUID = 1L;

    public ProtocolException(OpContext context, String detail, Throwable cause) {
        super(context, detail, cause);
    }

    public ProtocolException(OpContext context, String detail) {
        super(context, detail, null);
    }

    public ProtocolException(String detail) {
        super(OpContext.NONE, detail, null);
    }
}
