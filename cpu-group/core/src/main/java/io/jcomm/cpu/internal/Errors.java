package io.jcomm.cpu.internal;

import io.jcomm.api.BackendException;
import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.StoreException;

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
        if (like instanceof PeerFailureException) {
            PeerFailureException p = (PeerFailureException) like;
            String prefix = "peer rank " + (p.peerRank() < 0 ? "?" : Integer.toString(p.peerRank())) + ": ";
            String d = detail.startsWith(prefix) ? detail.substring(prefix.length()) : detail;
            return new PeerFailureException(ctx, p.peerRank(), d, cause);
        }
        if (like instanceof CommTimeoutException) {
            return new CommTimeoutException(ctx, detail, cause);
        }
        if (like instanceof CollectiveMismatchException) {
            return new CollectiveMismatchException(ctx, detail, cause);
        }
        if (like instanceof CommClosedException) {
            return new CommClosedException(ctx, detail, cause);
        }
        if (like instanceof ProtocolException) {
            return new ProtocolException(ctx, detail, cause);
        }
        if (like instanceof StoreException) {
            return new StoreException(ctx, detail, cause);
        }
        if (like instanceof BackendException) {
            return new BackendException(ctx, detail, cause);
        }
        return new CommException(ctx, detail, cause);
    }
}
