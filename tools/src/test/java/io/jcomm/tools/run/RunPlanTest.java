package io.jcomm.tools.run;

import io.jcomm.api.config.Settings;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.JvmFlags;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.jar.Attributes;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RunPlanTest {

    private static RunPlan.Builder twoNodes() {
        return RunPlan.builder().nprocPerNode(4).nnodes(2).nodeRank(1).masterAddr("10.0.0.1").masterPort(29500)
                .mainClass("com.example.Train").programArgs(List.of("--epochs", "3")).classPath("/app/x.jar");
    }

    @Test
    void everyRankGetsTorchrunVariablesThatDistributedConfigReads() {
        RunPlan plan = twoNodes().tokenFile(Path.of("/etc/job.token")).build();
        assertEquals(8, plan.worldSize());
        assertFalse(plan.hostsStore());
        Map<String, String> parent = Map.of("JCOMM_CPU_BACKEND", "tcp", "PATH", "/usr/bin", "RANK", "99");
        for (int local = 0; local < 4; local++) {
            Map<String, String> env = plan.workerEnv(parent, local);
            DistributedConfig c = DistributedConfig.fromEnvironment(env);
            assertEquals(4 + local, c.rank(), "RANK = node rank x nproc + local rank");
            assertEquals(8, c.worldSize());
            assertEquals(local, c.localRank());
            assertEquals(4, c.localWorldSize());
            assertEquals("10.0.0.1", c.masterAddr());
            assertEquals(29500, c.masterPort());
            assertTrue(c.launcherStore(), "no rank may host the store: the launcher does");
            assertEquals(Path.of("/etc/job.token"), c.tokenFile().orElseThrow());
            assertEquals("tcp", c.cpuBackend(), "JCOMM_* of the launcher's environment reach the workers");
            assertEquals("/usr/bin", env.get("PATH"));
            assertEquals("1", env.get("GROUP_RANK"));
            assertEquals("2", env.get("GROUP_WORLD_SIZE"));
        }
        assertThrows(IllegalArgumentException.class, () -> plan.workerEnv(parent, 4));
    }

    @Test
    void commandCarriesTheRequiredJvmFlagsTheWrapperAndTheProgram() {
        RunPlan plan = twoNodes().jvmArgs(List.of("-Xmx2g")).build();
        List<String> cmd = plan.workerCommand(0);
        assertTrue(cmd.get(0).endsWith("/bin/java"), cmd.toString());
        assertEquals(JvmFlags.REQUIRED, cmd.subList(1, 1 + JvmFlags.REQUIRED.size()));
        int i = 1 + JvmFlags.REQUIRED.size();
        assertEquals(List.of("-Xmx2g", "-cp", "/app/x.jar", RunWorker.class.getName(), "com.example.Train", "--epochs", "3"),
                cmd.subList(i, cmd.size()));
    }

    @Test
    void fromAWorkerJarTheManifestCarriesTheModuleFlagsAndTheClassPath() {
        RunPlan plan = twoNodes().jvmArgs(List.of("-Xmx2g")).build();
        List<String> cmd = plan.workerCommand(0, List.of("-XX:SharedArchiveFile=/c/a.jsa"), java.nio.file.Path.of("/c/w.jar"));
        List<String> props = WorkerJar.commandLineFlags(JvmFlags.REQUIRED);
        assertEquals(props, cmd.subList(1, 1 + props.size()));
        assertTrue(cmd.stream().noneMatch(a -> a.startsWith("--add-")), cmd.toString());
        int i = 1 + props.size();
        // the launch's own arguments, the class path for RunWorker, then the user's flags (last, so they win)
        assertEquals(List.of("-XX:SharedArchiveFile=/c/a.jsa", "-D" + Settings.WORKER_CLASS_PATH.name() + "=/app/x.jar", "-Xmx2g",
                "-jar", "/c/w.jar", "com.example.Train", "--epochs", "3"), cmd.subList(i, cmd.size()));
    }

    @Test
    void validatesTheShapeOfTheJob() {
        assertThrows(IllegalArgumentException.class, () -> twoNodes().nodeRank(2).build());
        assertThrows(IllegalArgumentException.class, () -> twoNodes().nprocPerNode(0).build());
        assertThrows(IllegalArgumentException.class, () -> twoNodes().masterPort(0).build(),
                "several nodes cannot agree on an ephemeral port");
        RunPlan single = RunPlan.builder().nprocPerNode(2).mainClass("M").build();
        assertTrue(single.hostsStore());
        assertEquals(0, single.masterPort());
        assertEquals(4321, single.withMasterPort(4321).workerEnv(Map.of(), 1).entrySet().stream()
                .filter(e -> e.getKey().equals("MASTER_PORT")).mapToInt(e -> Integer.parseInt(e.getValue())).sum());
    }

    @Test
    void targetsAreDemoJarsOrClasses(@TempDir Path dir) throws Exception {
        assertArrayEquals(new String[] {RunPlan.DEMO_MAIN, ""}, RunPlan.resolveTarget("demo"));
        assertArrayEquals(new String[] {RunPlan.MODEL_MAIN, ""}, RunPlan.resolveTarget("model"));
        assertArrayEquals(new String[] {"com.example.Main", ""}, RunPlan.resolveTarget("com.example.Main"));
        Path jar = dir.resolve("app.jar");
        Manifest m = new Manifest();
        m.getMainAttributes().put(Attributes.Name.MANIFEST_VERSION, "1.0");
        m.getMainAttributes().put(Attributes.Name.MAIN_CLASS, "com.example.App");
        m.getMainAttributes().put(Attributes.Name.CLASS_PATH, "lib/a.jar lib/b.jar");
        try (OutputStream os = Files.newOutputStream(jar); JarOutputStream jos = new JarOutputStream(os, m)) {
            jos.flush();
        }
        String[] r = RunPlan.resolveTarget(jar.toString());
        assertEquals("com.example.App", r[0]);
        assertEquals(jar + ":" + dir.resolve("lib/a.jar") + ":" + dir.resolve("lib/b.jar"), r[1]);
        Path bare = dir.resolve("bare.jar");
        try (OutputStream os = Files.newOutputStream(bare); JarOutputStream jos = new JarOutputStream(os)) {
            jos.flush();
        }
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> RunPlan.resolveTarget(bare.toString()));
        assertTrue(e.getMessage().contains("Main-Class"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> RunPlan.resolveTarget(dir.resolve("missing.jar").toString()));
    }

    @Test
    void pidTokensInSharedMemoryNames() {
        assertTrue(JobJanitor.namesPid("jcomm-aeron-job-1234-0a0b0c0d", List.of("1234")));
        assertTrue(JobJanitor.namesPid("jcomm-tp_0-g1-r0-1234-7f", List.of("1234")));
        assertFalse(JobJanitor.namesPid("jcomm-aeron-job-12345-0a0b0c0d", List.of("1234")));
        assertFalse(JobJanitor.namesPid("jcomm-ps-tp0", List.of("1234")));
    }

    @Test
    void sparesAndRestartsGetTheirRoleAndEveryWorkerTheReplacePolicy() {
        RunPlan plan = twoNodes().spares(2).cpuBinding(List.of(0, 1, 2, 3), "/usr/bin/taskset").build();
        assertTrue(plan.replaces());
        Map<String, String> worker = plan.workerEnv(Map.of(), 1);
        assertEquals("replace", worker.get(Settings.RECOVERY.name()));
        assertFalse(worker.containsKey(Settings.ROLE.name()));
        DistributedConfig spare = DistributedConfig.fromEnvironment(plan.spareEnv(Map.of(), 1));
        assertEquals(DistributedConfig.Role.SPARE, spare.role());
        assertEquals(DistributedConfig.RecoveryPolicy.REPLACE, spare.recovery());
        assertEquals(4, spare.rank(), "a placeholder: the node's first rank");
        assertEquals("1", plan.spareEnv(Map.of(), 1).get("JCOMM_SPARE_INDEX"));
        assertThrows(IllegalArgumentException.class, () -> plan.spareEnv(Map.of(), 2));
        // workers are bound to their slices, spares are not
        assertEquals("/usr/bin/taskset", plan.workerCommand(0).get(0));
        assertFalse(plan.workerCommand(4).get(0).contains("taskset"), plan.workerCommand(4).toString());
        assertThrows(IllegalArgumentException.class, () -> plan.workerCommand(6));
        // a user's own policy wins
        assertEquals("shrink", plan.workerEnv(Map.of(Settings.RECOVERY.name(), "shrink"), 0).get(Settings.RECOVERY.name()));

        RunPlan restarts = twoNodes().maxRestarts(3).build();
        DistributedConfig again = DistributedConfig.fromEnvironment(restarts.restartEnv(Map.of(), 2, 1));
        assertEquals(DistributedConfig.Role.RESTARTED, again.role());
        assertEquals(6, again.rank(), "the same rank as before");
        assertEquals("1", restarts.restartEnv(Map.of(), 2, 1).get("TORCHELASTIC_RESTART_COUNT"));
        assertFalse(twoNodes().build().workerEnv(Map.of(), 0).containsKey(Settings.RECOVERY.name()),
                "without replacements the workers keep the default policy");
        assertThrows(IllegalArgumentException.class, () -> twoNodes().maxRestarts(1).spares(1).build(),
                "restarts and spares are two ways to replace one loss");
        assertThrows(IllegalArgumentException.class, () -> twoNodes().spares(-1).build());
    }

    @Test
    void anElasticJobKeepsItsMinimumOfNodes() {
        assertEquals(2, twoNodes().build().minNodes(), "not elastic: every node");
        RunPlan elastic = twoNodes().minNodes(1).build();
        assertEquals(1, elastic.minNodes());
        assertEquals(8, elastic.worldSize(), "the job starts with MAX nodes");
        assertThrows(IllegalArgumentException.class, () -> twoNodes().minNodes(3).build());
        assertThrows(IllegalArgumentException.class, () -> twoNodes().minNodes(0).build());
        assertFalse(NodeWatch.tooFew(2, 1, 1));
        assertTrue(NodeWatch.tooFew(2, 2, 1));
        assertTrue(NodeWatch.tooFew(4, 2, 3));
        assertFalse(NodeWatch.tooFew(4, 2, 2));
    }
}
