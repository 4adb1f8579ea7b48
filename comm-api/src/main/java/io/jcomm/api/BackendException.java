package io.jcomm.api;

/**
 * A backend (Gloo, NCCL, a vendor library, a transport) reported an error, or is unavailable. The
 * message carries the backend's own error text.
 */
public class BackendException extends CommException {

    private static final long serialVersionUID = 1L;

    public BackendException(OpContext context, String detail, Throwable cause) {
        super(context, detail, cause);
    }

    public BackendException(OpContext context, String detail) {
        super(context, detail, null);
    }

    public BackendException(String detail) {
        super(OpContext.NONE, detail, null);
    }
}
