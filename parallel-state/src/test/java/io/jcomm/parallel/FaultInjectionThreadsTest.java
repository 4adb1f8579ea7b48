package io.jcomm.parallel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.BackendException;
import io.jcomm.api.CommException;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.parallel.testkit.ThreadJob;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The groups of a {@link ParallelState} pass the CPU groups' fault injection hook: a {@code cut} named
 * by a glob of the TP groups' names fires in {@code tp:0}'s all-reduce (a {@link GroupCoordinator}
 * operation on host tensors) and nowhere else. Ranks as threads.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class FaultInjectionThreadsTest {

    private static final Duration T = Duration.ofSeconds(30);

    @Test
    void aCutNamedByGroupGlobFiresInTheTensorParallelGroup() {
        ParallelStateOptions options = ParallelStateOptions.builder().tpMessageQueue(false)
                .cpuOption(CpuGroupOptions.FAULT_OPTION, "cut@rank=1,group=tp:*,op=allReduce").build();
        try (ThreadJob job = ThreadJob.start(2, options, T)) {
            List<Object> out = job.outcomes(ps -> {
                ps.initializeModelParallel(2, 1);
                ps.world().allReduce(Tensor.ofLongs(1)); // not a TP group: no fault
                try {
                    ps.tp().allReduce(Tensor.ofLongs(1));
                    return "no failure";
                } catch (CommException e) {
                    return e;
                }
            }, T);
            CommException cut = assertInstanceOf(BackendException.class, out.get(1), String.valueOf(out));
            assertTrue(cut.getMessage().contains("fault injection (JCOMM_FAULT cut@rank=1,group=tp:*,op=allReduce"),
                    cut.getMessage());
            assertEquals("tp:0", cut.group());
            CommException peer = assertInstanceOf(CommException.class, out.get(0), String.valueOf(out));
            assertEquals("tp:0", peer.group(), peer.toString());
        }
    }
}
