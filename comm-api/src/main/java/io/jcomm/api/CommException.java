package io.jcomm.api;

/**
 * Root of every error this SDK raises. Unchecked. The message starts with
 * {@code [group=G rank=R op=O]} so that it names the group, the caller's rank and the operation.
 *
 * <p>Subclasses say what kind of failure it was: {@link CommTimeoutException},
 * {@link PeerFailureException}, {@link StoreException}, {@link BackendException},
 * {@link ProtocolException}, {@link CollectiveMismatchException}, {@link CommClosedException}.
 */
public class CommException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    private final OpContext context;
    private final String detail;

    public CommException(OpContext context, String detail, Throwable cause) {
        super("[" + (context == null ? OpContext.NONE : context) + "] " + detail, cause);
        this.context = context == null ? OpContext.NONE : context;
        this.detail = detail;
    }

    public CommException(OpContext context, String detail) {
        this(context, detail, null);
    }

    public CommException(String detail) {
        this(OpContext.NONE, detail, null);
    }

    public OpContext context() {
        return context;
    }

    public String group() {
        return context.group();
    }

    public int rank() {
        return context.rank();
    }

    public String operation() {
        return context.operation();
    }

    /** The message without the context prefix. */
    public String detail() {
        return detail;
    }
}
