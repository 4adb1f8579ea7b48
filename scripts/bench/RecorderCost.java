import io.jcomm.runtime.recorder.FlightRecorder;

/**
 * What the flight recorder costs per operation (begin + end of one group's record, as the CPU-group
 * facade does around every call; its start stamp is the one the call's deadline was made from, so the
 * recorder reads the clock once, at the end), with the payload's bytes counted as the facade counts them. One {@code System.nanoTime()} is about 30 ns on this VM
 * (kvm-clock). Run from the repository root after a build:
 * {@code java -cp runtime/target/classes:comm-api/target/classes:$(ls dist/target/lib/slf4j-api-*.jar) scripts/bench/RecorderCost.java}
 */
public class RecorderCost {
    public static void main(String[] args) {
        FlightRecorder rec = FlightRecorder.process();
        if (rec == null) {
            System.out.println("no recorder (JCOMM_RECORDER=off, or /dev/shm unusable)");
            return;
        }
        FlightRecorder.Group g = rec.group("bench", 0, 2);
        for (int round = 0; round < 5; round++) {
            int n = 20_000_000;
            long t0 = System.nanoTime();
            long stamp = t0;
            for (int i = 0; i < n; i++) {
                // as the facade: the start stamp comes from the call's deadline, so one clock read per operation
                long seq = g.begin("allReduce", false, stamp, 4096);
                g.end("allReduce", seq, true);
                stamp += 7;
            }
            long t1 = System.nanoTime();
            System.out.printf("recorder: %.1f ns per operation (begin + end)%n", (t1 - t0) / (double) n);
        }
    }
}
