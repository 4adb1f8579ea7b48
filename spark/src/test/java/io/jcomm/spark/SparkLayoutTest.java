package io.jcomm.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.launch.LaunchInfo;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class SparkLayoutTest {

    /** Four tasks on two executors' hosts, as getTaskInfos() gives their addresses. */
    private static final List<String> TASKS = List.of("10.0.0.5:41231", "10.0.0.6:40001", "10.0.0.5:41231",
            "10.0.0.6:40001");

    @Test
    void ranksAreAllocatedByPartitionAndLocalRanksByHost() {
        for (int p = 0; p < 4; p++) {
            DistributedConfig c = SparkLayout.config(p, TASKS, 23456, "spark-stage-3.0", Map.of());
            assertEquals(p, c.rank());
            assertEquals(4, c.worldSize());
            assertEquals(p / 2, c.localRank());
            assertEquals(2, c.localWorldSize());
            assertEquals("10.0.0.5", c.masterAddr(), "task 0's host");
            assertEquals(23456, c.masterPort());
            assertTrue(c.launcherStore(), "task 0 hosts the store, not a rank");
            assertEquals("spark-stage-3.0", c.jobId());
            LaunchInfo l = c.launch().orElseThrow();
            assertEquals("spark", l.launcher());
            assertEquals("BarrierTaskContext.partitionId()", l.source(LaunchInfo.Field.RANK));
        }
    }

    @Test
    void theSdkSettingsComeFromTheExecutorsEnvironmentButNoLauncherDoes() {
        // an executor on a Slurm node still is a Spark task: Slurm's variables must not decide its rank
        Map<String, String> env = Map.of("JCOMM_TIMEOUT_MS", "1234", "SLURM_PROCID", "7", "SLURM_STEP_ID", "0",
                "RANK", "9", "JCOMM_LAUNCHER", "slurm", "JCOMM_LAUNCHER_STORE", "0");
        DistributedConfig c = SparkLayout.config(1, TASKS, 23456, "j", env);
        assertEquals(1, c.rank());
        assertEquals(Duration.ofMillis(1234), c.timeout());
        assertTrue(c.launcherStore());
    }

    @Test
    void hostsOfAddresses() {
        assertEquals("10.0.0.5", SparkLayout.host("10.0.0.5:41231"));
        assertEquals("exec-1", SparkLayout.host("exec-1"));
        assertEquals("fe80::1", SparkLayout.host("[fe80::1]:7077"));
        assertEquals("fe80::1", SparkLayout.host("fe80::1"));
    }

    @Test
    void misuseIsRefused() {
        assertThrows(IllegalArgumentException.class, () -> SparkLayout.config(4, TASKS, 1, "j", Map.of()));
        assertThrows(IllegalArgumentException.class, () -> SparkLayout.config(0, TASKS, 0, "j", Map.of()));
    }
}
