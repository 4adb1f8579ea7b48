package io.jcomm.tools.bench.pipeline;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Test;

/** How many timed steps {@code commbench pipeline} runs when none are given. */
class TimedStepsTest {

    @Test
    void runsAboutThreeSecondsAtTheSettledRate() {
        // 1 MiB activations (262,144 f32) at 50 us a step: 60,000 steps, not the 2,048 that 2 GiB makes
        assertEquals(2048, PipelineBenchWorker.autoSteps(262_144));
        assertEquals(60_000, PipelineBenchWorker.timedSteps(262_144, 50e-6));
    }

    @Test
    void neverFewerThanTwoGibibytesOfActivations() {
        // a slow step (torch's pace, 2 ms) would give 1,500 in 3 s: the 2 GiB floor of 2,048 holds
        assertEquals(2048, PipelineBenchWorker.timedSteps(262_144, 2e-3));
        assertEquals(1000, PipelineBenchWorker.timedSteps(4 << 20, 10e-3));
    }

    @Test
    void withoutASettledRateTheFloorAndWithAFastStepTheCap() {
        assertEquals(30_000, PipelineBenchWorker.timedSteps(1024, 0));
        assertEquals(PipelineBenchWorker.MAX_TIMED_STEPS, PipelineBenchWorker.timedSteps(1024, 1e-9));
    }
}
