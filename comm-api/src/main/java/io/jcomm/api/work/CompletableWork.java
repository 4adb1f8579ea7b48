package io.jcomm.api.work;

import io.jcomm.api.BackendException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CancellationException;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CompletionException;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A {@link Work} completed by whoever runs the operation. Holds strong references to the buffers
 * passed as {@code keepAlive} until completion, so asynchronous sends never read freed memory.
 *
 * @param <T> result type
 */
public final class CompletableWork<T> implements Work<T> {

    private final CompletableFuture<T> future = new CompletableFuture<>();
    private final OpContext context;
    private final Deadline deadline;
    private volatile Object keepAlive;

    /**
     * @param context   what the operation is (for error messages)
     * @param deadline  the operation's own deadline
     * @param keepAlive buffers to keep reachable until completion (may be {@code null})
     */
    public CompletableWork(OpContext context, Deadline deadline, Object keepAlive) {
        this.context = Objects.requireNonNull(context, "context");
        this.deadline = Objects.requireNonNull(deadline, "deadline");
        this.keepAlive = keepAlive;
    }

    /** An already successful work. */
    public static <T> CompletableWork<T> completed(OpContext context, T value) {
        CompletableWork<T> w = new CompletableWork<>(context, Deadline.after(Duration.ZERO), null);
        w.complete(value);
        return w;
    }

    /** An already failed work. */
    public static <T> CompletableWork<T> failed(OpContext context, Throwable cause) {
        CompletableWork<T> w = new CompletableWork<>(context, Deadline.after(Duration.ZERO), null);
        w.fail(cause);
        return w;
    }

    /** Completes successfully; returns false if already completed. */
    public boolean complete(T value) {
        boolean done = future.complete(value);
        keepAlive = null;
        return done;
    }

    /** Completes with a failure; returns false if already completed. */
    public boolean fail(Throwable cause) {
        boolean done = future.completeExceptionally(Objects.requireNonNull(cause, "cause"));
        keepAlive = null;
        return done;
    }

    public OpContext context() {
        return context;
    }

    public Deadline deadline() {
        return deadline;
    }

    /** Whether the buffers are still pinned by this work (for tests). */
    boolean pinsBuffers() {
        return keepAlive != null;
    }

    @Override
    public T await() {
        return awaitUntil(deadline, true);
    }

    @Override
    public T await(Duration timeout) {
        Deadline d = Deadline.after(timeout);
        return awaitUntil(d.min(deadline), d.nanoTime() - deadline.nanoTime() >= 0);
    }

    private T awaitUntil(Deadline d, boolean ownDeadline) {
        try {
            return future.get(d.remainingNanos(), TimeUnit.NANOSECONDS);
        } catch (TimeoutException e) {
            throw new CommTimeoutException(context, ownDeadline
                    ? "operation did not complete before its deadline"
                    : "operation still running after the wait timeout (it can be awaited again)");
        } catch (ExecutionException e) {
            throw rethrow(e.getCause());
        } catch (CancellationException e) {
            throw new BackendException(context, "operation was cancelled", e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new CommException(context, "interrupted while waiting", e);
        }
    }

    private RuntimeException rethrow(Throwable cause) {
        if (cause instanceof CommException) {
            return (CommException) cause;
        }
        if (cause instanceof Error) {
            throw (Error) cause;
        }
        return new BackendException(context, String.valueOf(cause), cause);
    }

    @Override
    public boolean isDone() {
        return future.isDone();
    }

    @Override
    public boolean isSuccess() {
        return future.isDone() && !future.isCompletedExceptionally();
    }

    @Override
    public Optional<Throwable> failure() {
        if (!future.isCompletedExceptionally()) {
            return Optional.empty();
        }
        try {
            future.join();
            return Optional.empty();
        } catch (CompletionException e) {
            return Optional.of(e.getCause() != null ? e.getCause() : e);
        } catch (CancellationException e) {
            return Optional.of(e);
        }
    }
}
