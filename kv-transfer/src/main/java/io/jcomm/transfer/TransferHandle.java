package io.jcomm.transfer;

import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * One asynchronous transfer: completes when the data (and the notification, if one was given) is
 * in the destination's memory, or fails with a typed {@link CommException}:
 * {@link TransferRefusedException} (the owner refused; nothing was written),
 * {@link io.jcomm.api.PeerFailureException} (the peer died or its connection broke),
 * {@link CommTimeoutException} (the deadline passed). The transports enforce the deadline: a
 * transfer still in flight at its deadline is failed and its connection closed.
 *
 * <p>Thread safe.
 */
public final class TransferHandle {

    /** How long {@link #await()} waits past the deadline for the transport to report the timeout itself. */
    static final long GRACE_NANOS = TimeUnit.MILLISECONDS.toNanos(500);

    private final CompletableFuture<Void> future;
    private final Deadline deadline;
    private final long bytes;
    private final OpContext context;

    TransferHandle(CompletableFuture<Void> future, Deadline deadline, long bytes, OpContext context) {
        this.future = future;
        this.deadline = deadline;
        this.bytes = bytes;
        this.context = context;
    }

    /** Bytes this transfer moves. */
    public long bytes() {
        return bytes;
    }

    /** The deadline the transfer was given. */
    public Deadline deadline() {
        return deadline;
    }

    /** True once the transfer completed or failed. Never blocks. */
    public boolean isDone() {
        return future.isDone();
    }

    /** The failure, if the transfer is done and failed. */
    public Optional<CommException> error() {
        if (!future.isCompletedExceptionally()) {
            return Optional.empty();
        }
        try {
            future.join();
            return Optional.empty();
        } catch (CompletionException | CancellationException e) {
            return Optional.of(typed(e));
        }
    }

    /** Waits until the transfer is done, at most until its deadline (plus a short grace). */
    public void await() {
        awaitNanos(deadline.remainingNanos() + GRACE_NANOS);
    }

    /** Waits up to {@code timeout} for the transfer. */
    public void await(Duration timeout) {
        awaitNanos(timeout.toNanos());
    }

    private void awaitNanos(long nanos) {
        try {
            future.get(nanos, TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            throw new CommTimeoutException(context, "transfer of " + bytes + " bytes not done within "
                    + TimeUnit.NANOSECONDS.toMillis(nanos) + " ms", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CommException(context, "interrupted while waiting for a transfer", e);
        } catch (ExecutionException | CancellationException e) {
            throw typed(e);
        }
    }

    /** A future that completes with this transfer (completing it does not affect the transfer). */
    public CompletableFuture<Void> toCompletableFuture() {
        return future.thenApply(v -> v);
    }

    private CommException typed(Throwable e) {
        Throwable c = e;
        while ((c instanceof CompletionException || c instanceof ExecutionException) && c.getCause() != null) {
            c = c.getCause();
        }
        return c instanceof CommException ce ? ce : new CommException(context, "transfer failed: " + c, c);
    }

    @Override
    public String toString() {
        return "TransferHandle[" + context.operation() + ", " + bytes + " bytes, "
                + (future.isDone() ? (future.isCompletedExceptionally() ? "failed" : "done") : "in flight") + "]";
    }
}
