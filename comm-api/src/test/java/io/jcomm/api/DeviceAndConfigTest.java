package io.jcomm.api;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;

class DeviceAndConfigTest {

    @Test
    void devicesParseAndPrint() {
        assertEquals(Device.CPU, Device.parse("cpu"));
        assertEquals(Device.cuda(0), Device.parse("cuda"));
        assertEquals(new Device("npu", 3), Device.parse("npu:3"));
        assertEquals("cuda:2", Device.cuda(2).toString());
        assertTrue(Device.parse("cpu:0").isCpu());
        assertThrows(IllegalArgumentException.class, () -> Device.parse("cuda:x"));
        assertThrows(IllegalArgumentException.class, () -> new Device("CUDA", 0));
        assertThrows(IllegalArgumentException.class, () -> new Device("cuda", -1));
    }

    @Test
    void configReadsTorchrunVariables() {
        DistributedConfig c = DistributedConfig.fromEnvironment(Map.of(
                "MASTER_ADDR", "10.0.0.1", "MASTER_PORT", "1234", "RANK", "5", "WORLD_SIZE", "8",
                "LOCAL_RANK", "1", "LOCAL_WORLD_SIZE", "4", "JCOMM_TIMEOUT_MS", "1500",
                "JCOMM_HOST_ID", "node-b", "JCOMM_CPU_BACKEND", "tcp", "JCOMM_TOKEN_FILE", "/tmp/t"));
        assertEquals("10.0.0.1", c.masterAddr());
        assertEquals(1234, c.masterPort());
        assertEquals(5, c.rank());
        assertEquals(8, c.worldSize());
        assertEquals(1, c.localRank());
        assertEquals(4, c.localWorldSize());
        assertEquals(Duration.ofMillis(1500), c.timeout());
        assertEquals("node-b", c.hostId());
        assertEquals("tcp", c.cpuBackend());
        assertEquals("auto", c.deviceCommunicator());
        assertEquals(Path.of("/tmp/t"), c.tokenFile().orElseThrow());
        assertFalse(c.launcherStore());
        assertEquals(c.toString(), c.toBuilder().build().toString());
        DistributedConfig launched = DistributedConfig.fromEnvironment(Map.of("JCOMM_LAUNCHER_STORE", "1"));
        assertTrue(launched.launcherStore());
        assertTrue(launched.toBuilder().build().launcherStore());
    }

    @Test
    void hostnameIsExplicitLoopbackForOneHostJobsElseTheRouteToTheMaster() {
        assertEquals("10.1.2.3", DistributedConfig.fromEnvironment(Map.of("JCOMM_HOSTNAME", " 10.1.2.3 ")).hostname());
        assertEquals("127.0.0.1", DistributedConfig.fromEnvironment(Map.of("MASTER_ADDR", "localhost")).hostname());
        assertEquals("127.0.0.1", DistributedConfig.builder().masterAddr("127.0.0.5").build().hostname());
        assertEquals("10.1.2.3", DistributedConfig.builder().hostname("10.1.2.3").build().toBuilder().build().hostname());
        // a non-loopback master: the local end of the route to it, never the wildcard address
        String routed = DistributedConfig.builder().masterAddr("192.0.2.1").build().hostname();
        assertNotEquals("0.0.0.0", routed);
        assertFalse(routed.isBlank());
    }

    @Test
    void configDefaultsAndValidation() {
        DistributedConfig c = DistributedConfig.fromEnvironment(Map.of());
        assertEquals("127.0.0.1", c.masterAddr());
        assertEquals(29500, c.masterPort());
        assertEquals(0, c.rank());
        assertEquals(1, c.worldSize());
        assertEquals(1, c.localWorldSize());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> DistributedConfig.fromEnvironment(Map.of("RANK", "4", "WORLD_SIZE", "4")));
        assertTrue(e.getMessage().contains("RANK"));
        e = assertThrows(IllegalArgumentException.class,
                () -> DistributedConfig.fromEnvironment(Map.of("MASTER_PORT", "http")));
        assertTrue(e.getMessage().contains("MASTER_PORT"));
        e = assertThrows(IllegalArgumentException.class,
                () -> DistributedConfig.fromEnvironment(Map.of("JCOMM_LAUNCHER_STORE", "maybe")));
        assertTrue(e.getMessage().contains("JCOMM_LAUNCHER_STORE"));
    }

    @Test
    void jobIdComesFromJcommJobIdElseTorchelasticRunIdElseTheDefault() {
        assertEquals(DistributedConfig.JOB_ID_DEFAULT, DistributedConfig.fromEnvironment(Map.of()).jobId());
        assertEquals("elastic-7", DistributedConfig.fromEnvironment(Map.of("TORCHELASTIC_RUN_ID", "elastic-7")).jobId());
        DistributedConfig both = DistributedConfig.fromEnvironment(Map.of("TORCHELASTIC_RUN_ID", "elastic-7",
                "JCOMM_JOB_ID", " train-42 "));
        assertEquals("train-42", both.jobId());
        assertEquals("train-42", both.toBuilder().build().jobId());
        assertTrue(both.toString().contains("job=train-42"), both.toString());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> DistributedConfig.fromEnvironment(Map.of("JCOMM_JOB_ID", "x".repeat(257))));
        assertTrue(e.getMessage().contains("JCOMM_JOB_ID"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> DistributedConfig.builder().jobId("").build());
        assertEquals(256, DistributedConfig.builder().jobId("é".repeat(128)).build().jobId().length() * 2);
    }

    @Test
    void debugIsOffUnlessJcommDebugSaysDetail() {
        assertEquals(DebugLevel.OFF, DistributedConfig.fromEnvironment(Map.of()).debug());
        assertEquals(DebugLevel.OFF, DistributedConfig.fromEnvironment(Map.of("JCOMM_DEBUG", "off")).debug());
        DistributedConfig d = DistributedConfig.fromEnvironment(Map.of("JCOMM_DEBUG", " Detail "));
        assertEquals(DebugLevel.DETAIL, d.debug());
        assertEquals(DebugLevel.DETAIL, d.toBuilder().build().debug());
        assertTrue(d.toString().contains("debug=detail"), d.toString());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> DistributedConfig.fromEnvironment(Map.of("JCOMM_DEBUG", "verbose")));
        assertTrue(e.getMessage().contains("JCOMM_DEBUG") && e.getMessage().contains("verbose"), e.getMessage());
    }

    @Test
    void exceptionsNameGroupRankAndOperation() {
        PeerFailureException e = new PeerFailureException(OpContext.of("tp:0", 1, "allReduce"), 3, "connection reset");
        assertEquals("[group=tp:0 rank=1 op=allReduce] peer rank 3: connection reset", e.getMessage());
        assertEquals(3, e.peerRank());
        assertEquals("tp:0", e.group());
        assertEquals(1, e.rank());
        assertEquals("allReduce", e.operation());
        assertTrue(new CommTimeoutException("x") instanceof CommException);
    }

    @Test
    void deadlinesAreBounded() throws InterruptedException {
        assertTrue(Deadline.after(Duration.ofSeconds(10)).remainingNanos() > 0);
        Deadline d = Deadline.after(Duration.ofMillis(20));
        Thread.sleep(30);
        assertTrue(d.isExpired());
        assertEquals(0, d.remainingNanos());
        Deadline far = Deadline.after(Duration.ofDays(365 * 1000L));
        assertTrue(far.remainingNanos() > 0);
        assertEquals(d, d.min(far));
        assertThrows(IllegalArgumentException.class, () -> Deadline.after(Duration.ofMillis(-1)));
    }

    @Test
    void roleAndRecoveryPolicyComeFromTheEnvironmentAndBadValuesAreNamed() {
        DistributedConfig d = DistributedConfig.fromEnvironment(Map.of());
        assertEquals(DistributedConfig.Role.WORKER, d.role());
        assertEquals(DistributedConfig.RecoveryPolicy.SHRINK, d.recovery());
        DistributedConfig s = DistributedConfig.fromEnvironment(Map.of("JCOMM_ROLE", " Spare ", "JCOMM_RECOVERY", "replace"));
        assertEquals(DistributedConfig.Role.SPARE, s.role());
        assertEquals(DistributedConfig.RecoveryPolicy.REPLACE, s.recovery());
        assertEquals(s.role(), s.toBuilder().build().role());
        assertEquals(s.recovery(), s.toBuilder().build().recovery());
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> DistributedConfig.fromEnvironment(Map.of("JCOMM_ROLE", "boss")));
        org.junit.jupiter.api.Assertions.assertTrue(e.getMessage().contains("JCOMM_ROLE")
                && e.getMessage().contains("worker, restarted, spare"), e.getMessage());
    }
}
