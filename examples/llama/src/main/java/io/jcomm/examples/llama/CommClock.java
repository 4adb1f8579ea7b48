package io.jcomm.examples.llama;

/**
 * Time spent inside jcomm calls: the caller brackets each call with {@link #start()} and
 * {@link #stop(long)}. What it measures includes waiting for peers (a TP rank that all-reduces first
 * waits for the slowest; a pipeline stage waits in its receive while the stages before it compute),
 * which is what a step loses to communication from this rank's point of view. Not thread safe: one
 * per rank's step loop.
 */
final class CommClock {

    private long nanos;
    private long calls;

    /** A start stamp for {@link #stop(long)}. */
    long start() {
        return System.nanoTime();
    }

    /** Adds the time since {@code start}. */
    void stop(long start) {
        nanos += System.nanoTime() - start;
        calls++;
    }

    /** Nanoseconds inside jcomm calls so far. */
    long nanos() {
        return nanos;
    }

    /** Calls so far. */
    long calls() {
        return calls;
    }
}
