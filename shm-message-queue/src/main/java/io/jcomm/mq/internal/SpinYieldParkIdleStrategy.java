package io.jcomm.mq.internal;

import java.util.concurrent.locks.LockSupport;
import org.agrona.concurrent.IdleStrategy;

/**
 * Agrona {@link IdleStrategy} whose phases are measured in time rather than in iterations: spin,
 * then yield, then park with a period doubling up to a maximum. Time-based phases behave the same on
 * fast and slow machines. Any work resets to the first phase. Not thread safe: one instance per
 * waiting thread. Allocation free.
 */
public final class SpinYieldParkIdleStrategy implements IdleStrategy {

    private static final int SPIN = 0;
    private static final int YIELD = 1;
    private static final int PARK = 2;
    /** The clock is read every 16 spins so that spinning reacts within a few nanoseconds. */
    private static final int CLOCK_CHECK_MASK = 15;

    private final long spinNanos;
    private final long spinYieldNanos;
    private final long minParkNanos;
    private final long maxParkNanos;
    private final int firstPhase;

    private boolean idling;
    private int phase;
    private int spins;
    private long idleStartNanos;
    private long parkNanos;

    public SpinYieldParkIdleStrategy(long spinNanos, long yieldNanos, long minParkNanos, long maxParkNanos) {
        this.spinNanos = spinNanos;
        long sy = spinNanos + yieldNanos;
        this.spinYieldNanos = sy < 0 ? Long.MAX_VALUE : sy;
        this.minParkNanos = minParkNanos;
        this.maxParkNanos = maxParkNanos;
        this.firstPhase = spinNanos > 0 ? SPIN : yieldNanos > 0 ? YIELD : PARK;
    }

    @Override
    public void idle(int workCount) {
        if (workCount > 0) {
            idling = false;
        } else {
            idle();
        }
    }

    @Override
    public void idle() {
        if (!idling) {
            idling = true;
            phase = firstPhase;
            spins = 0;
            parkNanos = minParkNanos;
            idleStartNanos = System.nanoTime();
        }
        switch (phase) {
            case SPIN:
                Thread.onSpinWait();
                if ((++spins & CLOCK_CHECK_MASK) == 0 && System.nanoTime() - idleStartNanos >= spinNanos) {
                    phase = YIELD;
                }
                return;
            case YIELD:
                Thread.yield();
                if (System.nanoTime() - idleStartNanos >= spinYieldNanos) {
                    phase = PARK;
                }
                return;
            default:
                LockSupport.parkNanos(parkNanos);
                parkNanos = Math.min(parkNanos << 1, maxParkNanos);
        }
    }

    @Override
    public void reset() {
        idling = false;
    }

    @Override
    public String alias() {
        return "spin-yield-park";
    }
}
