package io.jcomm.cpu.internal;

import io.jcomm.api.CommException;
import io.jcomm.runtime.recorder.FlightRecorder;
import io.jcomm.cpu.FaultPlan;
import io.jcomm.cpu.FaultPlan.Fault;
import io.jcomm.cpu.FaultPlan.Phase;
import java.io.IOException;
import java.io.PrintStream;
import java.util.List;
import java.util.concurrent.locks.LockSupport;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The faults of a {@link FaultPlan} that target one group on this rank, fired from the group's
 * operations. A group that no fault targets has none ({@link #forGroup} returns null), so the check
 * its operations make is one null test of a final field.
 *
 * <p>Thread safe: the group's caller thread and its asynchronous worker may both call it. The
 * decision is taken under a lock; a stall runs outside it.
 */
public final class FaultInjector {

    private static final Logger LOG = LoggerFactory.getLogger(FaultInjector.class);

    /** What the group does on {@code cut}: closes its connections without goodbye, poisons itself, returns the failure. */
    @FunctionalInterface
    public interface Cut {
        CommException cut(Fault fault, String op, long seq);
    }

    private final String group;
    private final int rank;
    private final int globalRank;
    private final Fault[] faults;
    private final boolean[] fired;
    private final Cut cut;
    /** The group's sequence numbers when the flight recorder does not count them (it is off). */
    private long counted;

    private FaultInjector(String group, int rank, int globalRank, List<Fault> faults, Cut cut) {
        this.group = group;
        this.rank = rank;
        this.globalRank = globalRank;
        this.faults = faults.toArray(new Fault[0]);
        this.fired = new boolean[this.faults.length];
        this.cut = cut;
    }

    /**
     * The injector of the group {@code group} (this process is its rank {@code rank}, global rank
     * {@code globalRank}), or null when no fault of {@code plan} targets it.
     */
    public static FaultInjector forGroup(FaultPlan plan, String group, int rank, int globalRank, Cut cut) {
        if (plan.isEmpty()) {
            return null;
        }
        List<Fault> mine = plan.targeting(group, globalRank);
        if (mine.isEmpty()) {
            return null;
        }
        LOG.warn("fault injection armed in group {} (rank {}, global rank {}): {}", group, rank, globalRank,
                FaultPlan.of(mine));
        return new FaultInjector(group, rank, globalRank, mine, cut);
    }

    /**
     * An operation of the group starts: fires a fault of phase {@code before} that it matches, and
     * returns its sequence number ({@code recorded}, the flight recorder's, or this injector's count
     * when that is 0: the recorder is off).
     *
     * @throws CommException when a {@code cut} fired (the group is poisoned)
     */
    public long before(String op, long recorded) {
        long seq;
        Fault f;
        synchronized (this) {
            seq = recorded != 0 ? recorded : ++counted;
            f = take(op, seq, Phase.BEFORE);
        }
        if (f != null) {
            CommException e = fire(f, op, seq);
            if (e != null) {
                throw e;
            }
        }
        return seq;
    }

    /** The operation with sequence number {@code seq} completed on this rank: fires a fault of phase {@code after}. */
    public void after(String op, long seq) {
        Fault f;
        synchronized (this) {
            f = take(op, seq, Phase.AFTER);
        }
        if (f != null) {
            fire(f, op, seq); // a cut poisons the group: the next operation fails
        }
    }

    private Fault take(String op, long seq, Phase phase) {
        for (int i = 0; i < faults.length; i++) {
            if (!fired[i] && faults[i].firesAt(op, seq, phase)) {
                fired[i] = true;
                return faults[i];
            }
        }
        return null;
    }

    private CommException fire(Fault f, String op, long seq) {
        String where = "group " + group + " rank " + rank + " (global rank " + globalRank + ") "
                + f.phase().name().toLowerCase(java.util.Locale.ROOT) + " " + op + " seq " + seq;
        PrintStream err = System.err;
        switch (f.action()) {
            case KILL -> {
                err.println("jcomm fault injection (" + f + "): killing the process (kill -9, exit code "
                        + FaultPlan.KILL_EXIT_CODE + ") in " + where + now());
                err.flush();
                // no shutdown hooks; only this process's recorder file goes (as a reaper would)
                FlightRecorder.releaseFile();
                killThisProcess();
                return null;
            }
            case STALL -> {
                err.println("jcomm fault injection (" + f + "): stalling for " + f.stall().toMillis() + " ms in " + where
                        + now());
                err.flush();
                stall(f.stall().toNanos());
                err.println("jcomm fault injection (" + f + "): resumed in " + where + now());
                err.flush();
                return null;
            }
            case CUT -> {
                err.println("jcomm fault injection (" + f + "): cutting the connections in " + where + now());
                err.flush();
                return cut.cut(f, op, seq);
            }
            default -> throw new IllegalStateException("unknown action " + f.action());
        }
    }

    /**
     * Ends this process as {@code kill -9} does: a SIGKILL from the {@code kill} command (the JVM cannot
     * raise it itself), and {@link Runtime#halt} meanwhile, which alone would wait up to 0.3 s for threads
     * in native calls (the event loops' epoll) before the sockets close. Either way the exit code is
     * {@value FaultPlan#KILL_EXIT_CODE}.
     */
    private static void killThisProcess() {
        try {
            new ProcessBuilder("kill", "-KILL", Long.toString(ProcessHandle.current().pid()))
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectError(ProcessBuilder.Redirect.DISCARD).start();
        } catch (IOException | RuntimeException e) {
            // no kill command here: the halt alone
        }
        Runtime.getRuntime().halt(FaultPlan.KILL_EXIT_CODE);
    }

    /** When, for a test that measures how fast the peers noticed (nanoTime is comparable across processes of a host). */
    private static String now() {
        return " (System.nanoTime " + System.nanoTime() + ")";
    }

    /** Sleeps {@code nanos}; interrupts do not shorten it (they are kept for the caller). */
    private static void stall(long nanos) {
        long end = System.nanoTime() + nanos;
        boolean interrupted = false;
        for (long left = nanos; left > 0; left = end - System.nanoTime()) {
            LockSupport.parkNanos(left);
            interrupted |= Thread.interrupted();
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
