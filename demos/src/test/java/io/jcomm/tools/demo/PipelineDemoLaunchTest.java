package io.jcomm.tools.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import org.junit.jupiter.api.Test;

/** Where the demo measures its cold start from. */
class PipelineDemoLaunchTest {

    @Test
    void theLaunchersTimeWhenThereIsOneElseThisProcesssStart() {
        PipelineDemo.Launch byLauncher = PipelineDemo.Launch.of("1764115200123");
        assertEquals(1764115200123L, byLauncher.epochMillis());
        assertTrue(byLauncher.byLauncher());
        assertEquals("after the JVMs were launched", byLauncher.describe());

        for (String none : new String[] {null, "", "soon"}) {
            PipelineDemo.Launch own = PipelineDemo.Launch.of(none);
            assertFalse(own.byLauncher());
            assertEquals("after JVM start", own.describe());
            // the process started before its JVM recorded its start, and not seconds before (this
            // JVM's creation took well under 3 s); /proc counts in 10 ms ticks
            long jvm = ManagementFactory.getRuntimeMXBean().getStartTime();
            assertTrue(own.epochMillis() <= jvm + 20 && own.epochMillis() >= jvm - 3000,
                    "process start " + own.epochMillis() + ", JVM start " + jvm);
        }
    }
}
