package io.jcomm.cpu.internal.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DType;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.TcpOptions;
import io.jcomm.cpu.internal.DefaultProcessGroup;
import io.jcomm.cpu.testkit.ThreadRanks;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * How long a waiting call polls before it yields or blocks ({@code tcp.spinMicros}, adapted per wait):
 * it shrinks while peers answer slowly and grows again once they answer within the full spin.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class SpinAdaptationTest {

    private static final Duration T = Duration.ofSeconds(60);

    @Test
    void theRule() {
        long max = 5_000;
        assertEquals(1_000, Engine.nextSpin(0, 3_000, max, max), "a wait the full spin would catch grows it, from nothing too");
        assertEquals(3_000, Engine.nextSpin(1_000, 4_000, max, max));
        assertEquals(max, Engine.nextSpin(3_000, 100, max, max), "never beyond the full spin");
        assertEquals(2_500, Engine.nextSpin(max, 6_000, max, max), "a slower peer halves it");
        assertEquals(0, Engine.nextSpin(1, 1_000_000, max, max));
        // the shared-memory steps tolerate a peer's skew up to SHM_DESCHEDULED_NANOS
        assertEquals(max, Engine.nextSpin(max, 40_000, Engine.SHM_DESCHEDULED_NANOS, max));
        assertEquals(max / 2, Engine.nextSpin(max, 60_000, Engine.SHM_DESCHEDULED_NANOS, max));
    }

    @Test
    void aSpinThatCollapsedWhileThePeerWasSlowGrowsBackOnceItAnswersQuickly() {
        // a 2 ms full spin: a quick answer is one within 2 ms, which even a loaded machine gives
        try (ThreadRanks t = ThreadRanks.start(2, r -> CpuGroupOptions.builder().backend("tcp").groupName("spin")
                .timeout(Duration.ofSeconds(20)).option(TcpOptions.SPIN_MICROS, "2000"), T)) {
            Engine receiver = ((TcpBackend) ((DefaultProcessGroup) t.group(0)).backend()).engine();
            t.run(g -> pingPong(g, 40, 6), T); // 40 answers after 6 ms each: halved 40 times, to nothing
            assertEquals(0, receiver.spinNanos(), "the spin after slow answers");
            t.run(g -> pingPong(g, 50, 0), T);
            assertTrue(receiver.spinNanos() > 0, "the spin did not grow back: " + receiver.spinNanos());
        }
    }

    /** Rank 0 sends and waits for the answer; rank 1 answers each message after {@code delayMillis}. */
    private static void pingPong(ProcessGroup g, int rounds, long delayMillis) throws InterruptedException {
        Tensor x = Tensor.allocate(DType.F32, 16);
        for (int i = 0; i < rounds; i++) {
            if (g.rank() == 0) {
                x.fill(i);
                g.send(x, 1, 0);
                g.recv(x, 1, 0);
                assertEquals(i + 1, x.getDouble(15), 0.0);
            } else {
                g.recv(x, 0, 0);
                assertEquals(i, x.getDouble(0), 0.0);
                if (delayMillis > 0) {
                    Thread.sleep(delayMillis);
                }
                x.fill(i + 1);
                g.send(x, 0, 0);
            }
        }
    }
}
