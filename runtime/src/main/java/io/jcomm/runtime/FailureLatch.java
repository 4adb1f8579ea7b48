package io.jcomm.runtime;

import io.jcomm.api.BackendException;
import io.jcomm.api.CollectiveMismatchException;
import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.StoreException;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The first failure of something that becomes unusable after one (a group, a backend, a transport
 * engine, a device communicator, a message-queue end, a node-local channel): the one mechanism all of
 * them use. Any thread may {@linkplain #trip trip} it; the first failure wins and is kept; every later
 * call reports it, either as it was ({@link #rethrow()}) or with the new call's context and the
 * original as cause ({@link #rethrowAs}). Lock-free; {@link #first()} is one volatile read.
 *
 * <p>Internal to jcomm's modules (not an API for users).
 */
public final class FailureLatch {

    private final AtomicReference<CommException> first = new AtomicReference<>();

    /** Records {@code e} unless a failure is already recorded; returns {@code e} (for {@code throw latch.trip(e)}). */
    public CommException trip(CommException e) {
        first.compareAndSet(null, Objects.requireNonNull(e, "e"));
        return e;
    }

    /** Records {@code e} unless a failure is already recorded; returns whether this call recorded it. */
    public boolean tripFirst(CommException e) {
        return first.compareAndSet(null, Objects.requireNonNull(e, "e"));
    }

    /** The first failure, or {@code null} while there is none. */
    public CommException first() {
        return first.get();
    }

    /** Whether a failure is recorded. */
    public boolean isTripped() {
        return first.get() != null;
    }

    /** Throws the first failure itself, if there is one. */
    public void rethrow() {
        CommException f = first.get();
        if (f != null) {
            throw f;
        }
    }

    /**
     * Throws, if there is a first failure, an exception of its type for {@code ctx} with the detail
     * {@code prefix + "(" + its operation + "): " + its detail} and the original as cause.
     */
    public void rethrowAs(OpContext ctx, String prefix) {
        CommException f = first.get();
        if (f != null) {
            throw sameType(f, ctx, prefix + " (" + f.operation() + "): " + f.detail(), f);
        }
    }

    /** An exception of {@code like}'s type (the closest of jcomm's) with the given context, detail and cause. */
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
