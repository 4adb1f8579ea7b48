package io.jcomm.runtime.jfr;

import jdk.jfr.Category;
import jdk.jfr.Description;
import jdk.jfr.Event;
import jdk.jfr.Label;
import jdk.jfr.Name;
import jdk.jfr.StackTrace;

/**
 * A JFR event per communication operation, so that JDK Mission Control (or {@code jfr print --events
 * io.jcomm.Operation}) shows what each rank's groups did beside GC, locks and threads. Emitted by the CPU
 * group facade for every call (synchronous on the caller's thread, asynchronous on the group's worker) and by
 * {@code GroupCoordinator} for the routes that bypass the CPU group (node-local channel, message queue).
 * Its duration is the call's, including waiting for peers.
 *
 * <p>Costs nothing measurable while no recording enables it: callers create it, {@link #begin()} it, and
 * fill and commit it only when {@link #shouldCommit()} (the JIT removes the rest). Enable it with
 * {@code -XX:StartFlightRecording} and the default or profile settings, or {@code jdk.jfr.Recording.enable("io.jcomm.Operation")}.
 */
@Name(OperationEvent.NAME)
@Label("Communication Operation")
@Category({"jcomm", "Operations"})
@Description("One operation of a jcomm group: collective, point-to-point, object or broadcast")
@StackTrace(false)
public final class OperationEvent extends Event {

    /** The event's name in recordings. */
    public static final String NAME = "io.jcomm.Operation";

    @Label("Group")
    public String group;

    @Label("Rank")
    @Description("The rank in the group")
    public int rank;

    @Label("Route")
    @Description("Backend or route: tcp, gloo, node-local, message-queue, ...")
    public String route;

    @Label("Operation")
    public String operation;

    @Label("Asynchronous")
    public boolean async;

    @Label("Failure")
    @Description("The exception's type when the operation failed; empty on success")
    public String failure;

    /** Fills and commits {@code e} if a recording wants it; a no-op otherwise. */
    public static void end(OperationEvent e, String group, int rank, String route, String operation, boolean async,
                           Throwable failure) {
        if (e.shouldCommit()) {
            e.group = group;
            e.rank = rank;
            e.route = route;
            e.operation = operation;
            e.async = async;
            e.failure = failure == null ? "" : failure.getClass().getSimpleName();
            e.commit();
        }
    }
}
