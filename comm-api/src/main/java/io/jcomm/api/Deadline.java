package io.jcomm.api;

import java.time.Duration;

/**
 * A point in time on the monotonic clock ({@link System#nanoTime()}) by which a blocking call must
 * return. Immutable. There is deliberately no "never": every wait in this SDK is bounded.
 */
public final class Deadline {

    private final long deadlineNanos;

    private Deadline(long deadlineNanos) {
        this.deadlineNanos = deadlineNanos;
    }

    /**
     * A deadline {@code timeout} from now.
     *
     * @throws IllegalArgumentException if the timeout is negative
     */
    public static Deadline after(Duration timeout) {
        if (timeout.isNegative()) {
            throw new IllegalArgumentException("negative timeout " + timeout);
        }
        long n;
        try {
            n = timeout.toNanos();
        } catch (ArithmeticException e) {
            n = Long.MAX_VALUE / 4; // ~73 years: bounded, but effectively "as long as you like"
        }
        return new Deadline(System.nanoTime() + Math.min(n, Long.MAX_VALUE / 4));
    }

    /** A deadline {@code nanos} nanoseconds from now. */
    public static Deadline afterNanos(long nanos) {
        return new Deadline(System.nanoTime() + Math.max(0, Math.min(nanos, Long.MAX_VALUE / 4)));
    }

    /** Nanoseconds left, never negative. */
    public long remainingNanos() {
        return Math.max(0L, deadlineNanos - System.nanoTime());
    }

    /** Milliseconds left, rounded up, never negative. */
    public long remainingMillis() {
        long n = remainingNanos();
        return n == 0 ? 0 : (n + 999_999) / 1_000_000;
    }

    public Duration remaining() {
        return Duration.ofNanos(remainingNanos());
    }

    public boolean isExpired() {
        return deadlineNanos - System.nanoTime() <= 0;
    }

    /** The earlier of this and {@code other}. */
    public Deadline min(Deadline other) {
        return deadlineNanos - other.deadlineNanos <= 0 ? this : other;
    }

    /** The raw {@link System#nanoTime()} value of this deadline. */
    public long nanoTime() {
        return deadlineNanos;
    }

    @Override
    public String toString() {
        return "Deadline(in " + remaining().toMillis() + " ms)";
    }
}
