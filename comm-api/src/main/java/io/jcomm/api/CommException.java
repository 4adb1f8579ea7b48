package io.jcomm.api;

/**
 * Root of every communication failure this SDK raises: the job's communication failed (a peer died
 * or timed out, the network or a backend library failed, a peer sent malformed bytes, ranks
 * disagreed on a collective, the group was closed or aborted). Unchecked. The message starts with
 * {@code [group=G rank=R op=O]} so that it names the group, the caller's rank and the operation.
 *
 * <p>Subclasses say what kind of failure it was: {@link CommTimeoutException},
 * {@link PeerFailureException}, {@link StoreException}, {@link BackendException},
 * {@link ProtocolException}, {@link CollectiveMismatchException}, {@link CommClosedException}.
 *
 * <p><b>Misuse is never a {@code CommException}.</b> A call whose own arguments are invalid (a null
 * argument or timeout, a rank out of range, tensors of the wrong size, dtype, shape or device, the
 * same tensor as input and output where they must differ, an object that cannot be encoded) throws
 * {@link IllegalArgumentException}; a call that does not fit the state or configuration of the
 * object it is made on throws {@link IllegalStateException}. Both are thrown on the calling rank
 * alone, before anything is sent, name the group, rank and operation in their message the same way
 * ({@link OpContext#invalidArgument}), and leave the group usable. So a handler that catches
 * {@code CommException} to start a job-wide recovery never does so for a programming error.
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
