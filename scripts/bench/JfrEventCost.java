import io.jcomm.runtime.jfr.OperationEvent;
import io.jcomm.runtime.jfr.OperationEvents;

/**
 * What an {@code io.jcomm.Operation} JFR event costs: a trivial operation unwrapped, then wrapped exactly
 * as the CPU-group facade wraps a call, with no recording; with the argument {@code rec}, also with a
 * recording that enables the event. Run from the repository root after a build:
 * {@code java -cp runtime/target/classes:comm-api/target/classes scripts/bench/JfrEventCost.java rec}
 */
public class JfrEventCost {
    static long sink;

    static void op(int i) {
        sink += i;
    }

    static void traced(int i) {
        Object e = OperationEvents.begin();
        try {
            op(i);
        } finally {
            OperationEvents.end(e, "g", 0, "tcp", "barrier", false, null);
        }
    }

    public static void main(String[] args) throws Exception {
        for (int round = 0; round < 5; round++) {
            long t0 = System.nanoTime();
            for (int i = 0; i < 100_000_000; i++) {
                op(i);
            }
            long t1 = System.nanoTime();
            for (int i = 0; i < 100_000_000; i++) {
                traced(i);
            }
            long t2 = System.nanoTime();
            System.out.printf("no recording: plain %.2f ns/call, with the event %.2f ns/call%n", (t1 - t0) / 1e8,
                    (t2 - t1) / 1e8);
        }
        if (args.length > 0 && args[0].equals("rec")) {
            try (jdk.jfr.Recording r = new jdk.jfr.Recording()) {
                r.enable(OperationEvent.NAME).withoutThreshold();
                r.start();
                long t1 = System.nanoTime();
                for (int i = 0; i < 10_000_000; i++) {
                    traced(i);
                }
                long t2 = System.nanoTime();
                System.out.printf("recording: %.2f ns/call%n", (t2 - t1) / 1e7);
            }
        }
    }
}
