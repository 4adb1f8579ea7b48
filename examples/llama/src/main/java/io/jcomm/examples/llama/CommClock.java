package io.jcomm.examples.llama;

/**
 * Time spent inside jcomm calls, by kind: the caller brackets each call with {@link #start()} and
 * {@link #stop(Kind, long)}. What it measures includes waiting for peers: a TP rank that all-reduces
 * first waits for the slowest; a pipeline stage waits in its receive (and in the token's broadcast)
 * while the other stages compute, which with one sequence in flight is the pipeline's idle time
 * rather than data moving. Hence the kinds. Not thread safe: one per rank's step loop.
 */
public final class CommClock {

    /** What a call was. */
    public enum Kind {
        /** TP all-reduces and all-gathers. */
        TP,
        /** Pipeline hand-offs and the token's broadcast over PP. */
        PP,
        /** The data-parallel agreement. */
        DP
    }

    private final long[] nanos = new long[Kind.values().length];
    private long calls;

    /** A start stamp for {@link #stop}. */
    public long start() {
        return System.nanoTime();
    }

    /** Adds the time since {@code start} to {@code kind}. */
    public void stop(Kind kind, long start) {
        nanos[kind.ordinal()] += System.nanoTime() - start;
        calls++;
    }

    /** Nanoseconds inside jcomm calls of {@code kind} so far. */
    public long nanos(Kind kind) {
        return nanos[kind.ordinal()];
    }

    /** Nanoseconds inside jcomm calls so far, every kind. */
    public long nanos() {
        long n = 0;
        for (long v : nanos) {
            n += v;
        }
        return n;
    }

    /** A copy of the per-kind totals, indexed by {@link Kind#ordinal()}. */
    public long[] snapshot() {
        return nanos.clone();
    }

    /** Calls so far. */
    public long calls() {
        return calls;
    }
}
