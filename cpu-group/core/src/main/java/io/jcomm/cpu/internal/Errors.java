package io.jcomm.cpu.internal;

import io.jcomm.api.BackendException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.OpContext;
import io.jcomm.runtime.FailureLatch;

/** Builds typed exceptions with an {@link OpContext}, keeping the type of the original. */
public final class Errors {

    private Errors() {
    }

    /**
     * {@code e} itself when it already names a group, else an exception of the same type naming
     * {@code ctx} with {@code e} as its cause.
     */
    public static CommException withContext(CommException e, OpContext ctx) {
        if (!"?".equals(e.context().group())) {
            return e;
        }
        return sameType(e, ctx, e.detail(), e);
    }

    /** Any throwable as a {@link CommException} naming {@code ctx}. */
    public static CommException wrap(Throwable t, OpContext ctx) {
        if (t instanceof CommException) {
            return withContext((CommException) t, ctx);
        }
        return new BackendException(ctx, String.valueOf(t), t);
    }

    /**
     * The exception thrown by calls made after the group was poisoned by {@code cause}: same type,
     * the new call's context, and the original as cause.
     */
    public static CommException poisoned(CommException cause, OpContext ctx) {
        if (cause instanceof CommClosedException && cause.detail().startsWith("group closed")) {
            return new CommClosedException(ctx, cause.detail(), cause);
        }
        String detail = "group unusable after an earlier failure in " + cause.operation() + ": " + cause.detail();
        return sameType(cause, ctx, detail, cause);
    }

    /** An exception of {@code like}'s type with the given context, detail and cause. */
    public static CommException sameType(CommException like, OpContext ctx, String detail, Throwable cause) {
        return FailureLatch.sameType(like, ctx, detail, cause);
    }
}
