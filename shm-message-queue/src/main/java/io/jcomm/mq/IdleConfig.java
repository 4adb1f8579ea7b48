package io.jcomm.mq;

import io.jcomm.mq.internal.SpinYieldParkIdleStrategy;
import java.time.Duration;
import org.agrona.concurrent.IdleStrategy;

/**
 * How a thread waits when it has nothing to do: spin for {@link #spinNanos()}, then yield for
 * {@link #yieldNanos()}, then park with a period doubling from {@link #minParkNanos()} to
 * {@link #maxParkNanos()}. The phases restart whenever work is found. Immutable.
 *
 * <p>The default ({@link #backoff()}) spins 2 µs and yields 100 µs, so a reader that receives
 * messages back to back never parks, while an idle reader parks for up to 1 ms at a time and costs
 * about 1-2 % of a core. {@link #spinning()} keeps one core busy and is only for benchmarks with
 * a core to spare; {@link #yielding()} is the low-latency choice when processes outnumber cores.
 */
public final class IdleConfig {

    /** Effectively unbounded phase length. */
    private static final long FOREVER = Long.MAX_VALUE / 4;

    private final long spinNanos;
    private final long yieldNanos;
    private final long minParkNanos;
    private final long maxParkNanos;

    private IdleConfig(long spinNanos, long yieldNanos, long minParkNanos, long maxParkNanos) {
        if (spinNanos < 0 || yieldNanos < 0 || minParkNanos < 1 || maxParkNanos < minParkNanos) {
            throw new IllegalArgumentException("invalid idle config: spin=" + spinNanos + "ns yield=" + yieldNanos
                    + "ns park=" + minParkNanos + ".." + maxParkNanos + "ns");
        }
        this.spinNanos = spinNanos;
        this.yieldNanos = yieldNanos;
        this.minParkNanos = minParkNanos;
        this.maxParkNanos = maxParkNanos;
    }

    /** Spin, then yield, then park; each phase by duration. */
    public static IdleConfig of(Duration spin, Duration yield, Duration minPark, Duration maxPark) {
        return new IdleConfig(spin.toNanos(), yield.toNanos(), minPark.toNanos(), maxPark.toNanos());
    }

    /**
     * The default: spin 2 µs, yield 100 µs, then park 1 µs doubling up to 1 ms. The spin phase
     * covers back-to-back traffic (a hop takes ~0.2-0.5 µs); it is short because a spinning thread
     * that shares its core with the peer it waits for delays that peer by the whole phase.
     */
    public static IdleConfig backoff() {
        return new IdleConfig(2_000, 100_000, 1_000, 1_000_000);
    }

    /**
     * No spinning: yield 2 ms, then park 1 µs doubling up to 1 ms (for hosts with more waiters than
     * cores). The yield phase is long because on such a host a reader often waits for a peer that
     * is not scheduled at all; with 100 µs, readers of a 3-reader burst kept falling asleep and
     * needing a wake-up (round trip 10-12 µs instead of 7-8 µs on 2 cores, docs/PERFORMANCE.md).
     * Idle CPU after a burst is unaffected once the 2 ms have passed.
     */
    public static IdleConfig yieldThenPark() {
        return new IdleConfig(0, 2_000_000, 1_000, 1_000_000);
    }

    /**
     * The default choice for {@code participants} processes waiting on one queue on a host with
     * {@code cores} cores: {@link #backoff()} when every waiter can have a core, else
     * {@link #yieldThenPark()} (spinning threads that outnumber the cores only delay each other).
     */
    public static IdleConfig forHost(int participants, int cores) {
        return participants <= cores ? backoff() : yieldThenPark();
    }

    /** Busy-spin forever (one full core per waiting thread). */
    public static IdleConfig spinning() {
        return new IdleConfig(FOREVER, 0, 1_000, 1_000);
    }

    /** {@code Thread.yield()} forever (a full core when alone, shares fairly when not). */
    public static IdleConfig yielding() {
        return new IdleConfig(0, FOREVER, 1_000, 1_000);
    }

    /**
     * Parses {@code spin}, {@code yield}, {@code backoff}, {@code yieldpark} or
     * {@code spinMicros,yieldMicros,minParkMicros,maxParkMicros}.
     */
    public static IdleConfig parse(String s) {
        switch (s.trim()) {
            case "spin":
                return spinning();
            case "yield":
                return yielding();
            case "backoff":
                return backoff();
            case "yieldpark":
                return yieldThenPark();
            default:
                String[] p = s.split(",");
                if (p.length != 4) {
                    throw new IllegalArgumentException("idle strategy must be spin, yield, backoff or "
                            + "spinUs,yieldUs,minParkUs,maxParkUs; got '" + s + "'");
                }
                return new IdleConfig(Long.parseLong(p[0].trim()) * 1000, Long.parseLong(p[1].trim()) * 1000,
                        Long.parseLong(p[2].trim()) * 1000, Long.parseLong(p[3].trim()) * 1000);
        }
    }

    public long spinNanos() {
        return spinNanos;
    }

    public long yieldNanos() {
        return yieldNanos;
    }

    public long minParkNanos() {
        return minParkNanos;
    }

    public long maxParkNanos() {
        return maxParkNanos;
    }

    /** A new strategy instance (strategies hold per-thread state; one per waiting thread). */
    public IdleStrategy newStrategy() {
        return new SpinYieldParkIdleStrategy(spinNanos, yieldNanos, minParkNanos, maxParkNanos);
    }

    @Override
    public String toString() {
        return "IdleConfig{spin=" + fmt(spinNanos) + ", yield=" + fmt(yieldNanos) + ", park=" + fmt(minParkNanos)
                + ".." + fmt(maxParkNanos) + "}";
    }

    private static String fmt(long ns) {
        return ns >= FOREVER ? "forever" : (ns / 1000) + "us";
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof IdleConfig c && c.spinNanos == spinNanos && c.yieldNanos == yieldNanos
                && c.minParkNanos == minParkNanos && c.maxParkNanos == maxParkNanos;
    }

    @Override
    public int hashCode() {
        return Long.hashCode(spinNanos) * 31 + Long.hashCode(yieldNanos) * 17 + Long.hashCode(maxParkNanos);
    }
}
