package io.jcomm.api;

/**
 * A blocking call passed its deadline. The operation may still be running on other ranks; for a
 * collective the group is usually unusable afterwards (see the backend's documentation).
 */
public class CommTimeoutException extends CommException {

    private static final long serialVersionUID = 1L;

    public CommTimeoutException(OpContext context, String detail, Throwable cause) {
        super(context, detail, cause);
    }

    public CommTimeoutException(OpContext context, String detail) {
        super(context, detail, null);
    }

    public CommTimeoutException(String detail) {
        super(OpContext.NONE, detail, null);
    }
}
