package io.jcomm.it.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.tools.bench.pipeline.PipelineBenchCommand;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import picocli.CommandLine;

/**
 * A guard, not a benchmark: two worker JVMs stream 1 MiB activations from stage 0 to stage 1 for 30,000 steps
 * with the code of the README ({@code commbench pipeline --tp 1 --pp 2 --hidden 256K --recv plain}: the stage
 * receives with the plain {@code pp.recvTensorDict()} and keeps nothing). Fails when a rank's resident memory
 * grows by more than 256 MB during the steps (before the receive pool, a fresh direct buffer per step grew it
 * by gigabytes), or when the rate falls below a floor far under what this path does (about 2,000 to 5,000 steps/s on
 * the 2-core development machine once warm; torch gloo does about 800).
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class PipelineThroughputIT {

    private static final double FLOOR_STEPS_PER_SECOND = 1000;
    private static final long MAX_DIRECT_GROWTH = 256L << 20;
    private static final long MAX_RSS_GROWTH = 256L << 20;

    @Test
    void thePlainReceiveOfOneMebibyteActivationsStreamsWithFlatMemory() throws Exception {
        PipelineBenchCommand cmd = new PipelineBenchCommand();
        new CommandLine(cmd).parseArgs("--tp", "1", "--pp", "2", "--hidden", "256K", "--warmup", "500", "--steps",
                "30000", "--recv", "plain");
        List<PipelineBenchCommand.Row> rows = cmd.measureJcomm();
        assertEquals(1, rows.size(), rows.toString());
        PipelineBenchCommand.Row r = rows.get(0);
        System.out.printf("pipeline guard: %d steps of 1 MiB in %.2f s: %.0f steps/s (%.0f MB/s), RSS +%d MB, direct "
                + "+%d MB%n", r.steps(), r.seconds(), r.stepsPerSecond(), r.handOffMBps(), r.rssGrowth() >> 20,
                r.directGrowth() >> 20);
        assertEquals(30000, r.steps());
        assertTrue(r.stepsPerSecond() >= FLOOR_STEPS_PER_SECOND, r.stepsPerSecond() + " steps/s is below the floor of "
                + FLOOR_STEPS_PER_SECOND);
        assertTrue(r.directGrowth() < MAX_DIRECT_GROWTH, "a rank's direct memory grew by " + (r.directGrowth() >> 20)
                + " MB in " + r.steps() + " steps");
        assertTrue(r.rssGrowth() < MAX_RSS_GROWTH, "a rank's resident memory grew by " + (r.rssGrowth() >> 20)
                + " MB in " + r.steps() + " steps");
    }
}
