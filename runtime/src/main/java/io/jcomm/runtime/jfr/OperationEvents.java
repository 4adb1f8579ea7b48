package io.jcomm.runtime.jfr;

/**
 * Starts and ends {@link OperationEvent}s for the groups' operations without loading the event class
 * while JFR is not running in this JVM.
 *
 * <p>Loading a {@code jdk.jfr.Event} subclass makes JDK 17 set up its event framework even when no
 * recording exists: about 0.17 s and 0.3 s of CPU per process, a sixth of a rank's cold start. So
 * {@link #begin} returns {@code null} until {@link jdk.jfr.FlightRecorder#isInitialized()} (a flag read)
 * says JFR started, by {@code -XX:StartFlightRecording} or a later {@code jcmd JFR.start}; from then on
 * every operation gets its event, which costs what it cost before (free while no recording enables
 * it). An operation that began before JFR started has no event. Thread safe (stateless).
 */
public final class OperationEvents {

    private OperationEvents() {
    }

    /** A started event to pass to {@link #end}, or {@code null} while JFR is not running. */
    public static Object begin() {
        return jdk.jfr.FlightRecorder.isInitialized() ? Started.begin() : null;
    }

    /**
     * Fills and commits the event {@link #begin} returned if a recording wants it; does nothing for
     * {@code null}.
     */
    public static void end(Object event, String group, int rank, String route, String operation, boolean async,
                           Throwable failure) {
        if (event != null) {
            Started.end(event, group, rank, route, operation, async, failure);
        }
    }

    /** The only code that names the event class: loaded on the first event after JFR started. */
    private static final class Started {
        static Object begin() {
            OperationEvent e = new OperationEvent();
            e.begin();
            return e;
        }

        static void end(Object event, String group, int rank, String route, String operation, boolean async,
                        Throwable failure) {
            OperationEvent.end((OperationEvent) event, group, rank, route, operation, async, failure);
        }
    }
}
