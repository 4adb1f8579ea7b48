package io.jcomm.api;

/**
 * Ranks of one group called a collective with inconsistent arguments (different operation, count,
 * dtype or root). Detected by backends that exchange a header before the payload.
 */
public class CollectiveMismatchException extends CommException {

    private static final long serialVersionUID = 1L;

    public CollectiveMismatchException(OpContext context, String detail, Throwable cause) {
        super(context, detail, cause);
    }

    public CollectiveMismatchException(OpContext context, String detail) {
        super(context, detail, null);
    }

    public CollectiveMismatchException(String detail) {
        super(OpContext.NONE, detail, null);
    }
}
