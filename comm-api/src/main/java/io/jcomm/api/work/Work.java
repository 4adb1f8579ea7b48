package io.jcomm.api.work;

import java.time.Duration;
import java.util.Optional;

/**
 * A handle on an asynchronous operation, like c10d's {@code Work}.
 *
 * <p>Every operation started asynchronously has its own deadline, fixed when it was started.
 * Waiting is idempotent and thread safe: every call to {@link #await()} after completion returns
 * the same result or throws the same exception. Buffers passed to the operation stay in use (and
 * reachable from this handle) until it is done.
 *
 * @param <T> the result type ({@code Void} for collectives that work in place)
 */
public interface Work<T> {

    /**
     * Waits until the operation completes or its own deadline passes.
     *
     * @return the result
     * @throws io.jcomm.api.CommException the operation's failure (typed), or a
     *         {@link io.jcomm.api.CommTimeoutException} when the deadline passed
     */
    T await();

    /**
     * Waits at most {@code timeout} (and never beyond the operation's own deadline). If the timeout
     * passes first a {@link io.jcomm.api.CommTimeoutException} is thrown and the operation keeps
     * running: it can be awaited again.
     */
    T await(Duration timeout);

    /** True once the operation has succeeded or failed. Never blocks. */
    boolean isDone();

    /** True once the operation has succeeded. Never blocks. */
    boolean isSuccess();

    /** The failure, once the operation has failed; empty while running or after success. */
    Optional<Throwable> failure();
}
