package io.jcomm.runtime;

import io.jcomm.api.Deadline;
import java.time.Duration;
import java.util.concurrent.locks.LockSupport;

/**
 * The pauses of a retry loop: the first pause, then each next one {@code factor} times longer, up to a
 * longest; never past a deadline. Every loop of jcomm that waits for something outside the process (a
 * server to listen, a key to appear, a peer to answer) paces itself with one, so the pacing of each is
 * stated in one line where it is made.
 *
 * <p>One instance per loop (it counts); not thread safe.
 */
public final class Backoff {

    private final long firstNanos;
    private final long maxNanos;
    private final double factor;
    private long next;

    private Backoff(long firstNanos, long maxNanos, double factor) {
        if (firstNanos <= 0 || maxNanos < firstNanos || factor < 1.0) {
            throw new IllegalArgumentException("backoff needs 0 < first <= max and factor >= 1, got " + firstNanos
                    + " ns, " + maxNanos + " ns, " + factor);
        }
        this.firstNanos = firstNanos;
        this.maxNanos = maxNanos;
        this.factor = factor;
        this.next = firstNanos;
    }

    /** Pauses from {@code first}, each {@code factor} times the last, up to {@code max}. */
    public static Backoff of(Duration first, Duration max, double factor) {
        return new Backoff(first.toNanos(), max.toNanos(), factor);
    }

    /** Pauses from {@code first}, doubling up to {@code max}. */
    public static Backoff doubling(Duration first, Duration max) {
        return of(first, max, 2.0);
    }

    /** The next pause, in nanoseconds (and counts it). */
    public long nextNanos() {
        long n = next;
        next = Math.min(maxNanos, Math.max(n + 1, (long) (n * factor)));
        return n;
    }

    /** Starts again from the first pause (after progress). */
    public void reset() {
        next = firstNanos;
    }

    /** Parks for the next pause. */
    public void pause() {
        LockSupport.parkNanos(nextNanos());
    }

    /**
     * Parks for the next pause, cut short at {@code deadline}.
     *
     * @return false, without parking, when the deadline has passed
     */
    public boolean pause(Deadline deadline) {
        long left = deadline.remainingNanos();
        if (left <= 0) {
            return false;
        }
        LockSupport.parkNanos(Math.min(nextNanos(), left));
        return true;
    }

    /**
     * Parks for the next pause, cut short at {@code deadlineNanos} ({@link System#nanoTime()} scale).
     *
     * @return false, without parking, when the deadline has passed
     */
    public boolean pauseUntil(long deadlineNanos) {
        long left = deadlineNanos - System.nanoTime();
        if (left <= 0) {
            return false;
        }
        LockSupport.parkNanos(Math.min(nextNanos(), left));
        return true;
    }
}
