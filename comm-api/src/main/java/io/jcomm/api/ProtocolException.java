package io.jcomm.api;

/**
 * Bytes that crossed a process boundary were malformed, oversized, of an unexpected type, or the
 * arguments of a call were invalid (out-of-range rank, buffer too small). Raised before any memory
 * is allocated for the bad input.
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
