package io.jcomm.parallel.internal;

import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.work.Work;
import java.time.Duration;
import java.util.List;
import java.util.Optional;

/**
 * A {@link Work} that is done when all of its parts are: the result of an operation made of several
 * asynchronous steps (the tensors of a tensor dict). It holds the parts and the buffers they use
 * until it is garbage, so buffers stay reachable at least as long as the caller holds the handle.
 * Waiting is idempotent (each part's is) and fails with the first part's failure, in order.
 */
public final class AllWork implements Work<Void> {

    private final OpContext context;
    private final List<Work<?>> parts;
    private final Object keepAlive;

    public AllWork(OpContext context, List<? extends Work<?>> parts, Object keepAlive) {
        this.context = context;
        this.parts = List.copyOf(parts);
        this.keepAlive = keepAlive;
    }

    @Override
    public Void await() {
        for (Work<?> w : parts) {
            w.await();
        }
        return null;
    }

    @Override
    public Void await(Duration timeout) {
        Deadline d = Deadline.after(timeout);
        for (Work<?> w : parts) {
            if (!w.isDone() && d.isExpired()) {
                throw new CommTimeoutException(context, "operation still running after the wait timeout (it can be awaited again)");
            }
            w.await(d.remaining());
        }
        return null;
    }

    @Override
    public boolean isDone() {
        for (Work<?> w : parts) {
            if (!w.isDone()) {
                return false;
            }
        }
        return true;
    }

    @Override
    public boolean isSuccess() {
        for (Work<?> w : parts) {
            if (!w.isSuccess()) {
                return false;
            }
        }
        return true;
    }

    @Override
    public Optional<Throwable> failure() {
        for (Work<?> w : parts) {
            Optional<Throwable> f = w.failure();
            if (f.isPresent()) {
                return f;
            }
        }
        return Optional.empty();
    }

    /** The buffers this work keeps reachable (for tests). */
    public Object keepAlive() {
        return keepAlive;
    }

    @Override
    public String toString() {
        return "AllWork{" + context + ", " + parts.size() + " parts, done=" + isDone() + "}";
    }
}
