package io.jcomm.tools.bench.pipeline;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.List;
import org.HdrHistogram.Histogram;
import org.junit.jupiter.api.Test;

/** {@code commbench pipeline --bands}: where the steps' time went. */
class StepBandsTest {

    @Test
    void stepsAndTheirTimeLandInTheirBands() {
        Histogram h = new Histogram(3);
        h.recordValueWithCount(40_000, 990); // 990 steps of 40 us
        h.recordValueWithCount(4_000_000, 10); // 10 stalls of 4 ms
        List<long[]> bands = PipelineBenchWorker.bands(h);
        assertEquals(PipelineBenchWorker.BAND_EDGES_MICROS.length, bands.size());
        assertArrayEquals(new long[] {0, 60}, new long[] {bands.get(0)[0], bands.get(0)[1]});
        assertEquals(990, bands.get(0)[2]);
        assertEquals(990 * 40_000L, bands.get(0)[3], 990 * 40L); // within the histogram's precision
        long[] stalls = bands.get(6); // 2-5 ms
        assertArrayEquals(new long[] {2_000, 5_000, 10}, new long[] {stalls[0], stalls[1], stalls[2]});
        assertEquals(40_000_000L, stalls[3], 40_000L);
        assertArrayEquals(new long[] {5_000, 0, 0, 0}, bands.get(7)); // open-ended, empty
        assertEquals(1000, bands.stream().mapToLong(b -> b[2]).sum());
    }
}
