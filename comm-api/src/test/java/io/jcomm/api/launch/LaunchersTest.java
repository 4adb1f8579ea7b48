package io.jcomm.api.launch;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.launch.LaunchInfo.Field;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

/**
 * Each launcher read from the variables it really sets (copied from {@code srun}, {@code mpirun} and the
 * Kubernetes controllers' sources), the node-list and tasks-per-node forms Slurm writes, and the
 * contradictions that must be errors naming both variables.
 */
class LaunchersTest {

    /** What {@code srun -N 2 -n 4} (Slurm 22.05) gave task 3 on node n2, trimmed to what matters. */
    static Map<String, String> slurmTask(int procId, int localId, int nodeId) {
        Map<String, String> e = new HashMap<>();
        e.put("SLURM_JOB_ID", "812");
        e.put("SLURM_JOBID", "812");
        e.put("SLURM_STEP_ID", "0");
        e.put("SLURM_STEPID", "0");
        e.put("SLURM_PROCID", Integer.toString(procId));
        e.put("SLURM_LOCALID", Integer.toString(localId));
        e.put("SLURM_NODEID", Integer.toString(nodeId));
        e.put("SLURM_NTASKS", "4");
        e.put("SLURM_NPROCS", "4");
        e.put("SLURM_STEP_NUM_TASKS", "4");
        e.put("SLURM_STEP_NUM_NODES", "2");
        e.put("SLURM_NNODES", "2");
        e.put("SLURM_STEP_NODELIST", "n[1-2]");
        e.put("SLURM_JOB_NODELIST", "n[1-2]");
        e.put("SLURM_NODELIST", "n[1-2]");
        e.put("SLURM_STEP_TASKS_PER_NODE", "2(x2)");
        e.put("SLURM_TASKS_PER_NODE", "2(x2)");
        e.put("SLURMD_NODENAME", "n" + (nodeId + 1));
        e.put("SLURM_GTIDS", nodeId == 0 ? "0,1" : "2,3");
        return e;
    }

    /** What {@code mpirun -np 4} (Open MPI 4.1) gave rank 2 of 4 on a host with 2 of them. */
    static Map<String, String> ompiRank(int rank, int local, int localSize) {
        Map<String, String> e = new HashMap<>();
        e.put("OMPI_COMM_WORLD_RANK", Integer.toString(rank));
        e.put("OMPI_COMM_WORLD_SIZE", "4");
        e.put("OMPI_COMM_WORLD_LOCAL_RANK", Integer.toString(local));
        e.put("OMPI_COMM_WORLD_LOCAL_SIZE", Integer.toString(localSize));
        e.put("OMPI_COMM_WORLD_NODE_RANK", Integer.toString(local));
        e.put("OMPI_MCA_ess_base_jobid", "2062221313");
        e.put("OMPI_MCA_orte_hnp_uri", "2062221312.0;tcp://192.0.2.2:60591");
        e.put("PMIX_RANK", Integer.toString(rank));
        e.put("PMIX_NAMESPACE", "2062221313");
        e.put("PMIX_ID", "2062221313." + rank);
        e.put("OMPI_UNIVERSE_SIZE", "4");
        return e;
    }

    // ------------------------------------------------------------------ Slurm lists

    @Test
    void hostListsInEveryFormSlurmWrites() {
        assertEquals(List.of("n1"), SlurmLists.expandHosts("n1"));
        assertEquals(List.of("n1", "n2", "n3"), SlurmLists.expandHosts("n[1-3]"));
        assertEquals(List.of("gpu01", "gpu02", "gpu07"), SlurmLists.expandHosts("gpu[01-02,07]"));
        assertEquals(List.of("a1-ib", "a2-ib", "b3"), SlurmLists.expandHosts("a[1-2]-ib,b3"));
        assertEquals(List.of("r1-n01", "r1-n02", "r2-n01", "r2-n02"), SlurmLists.expandHosts("r[1-2]-n[01-02]"));
        assertEquals(List.of("node08", "node09", "node10", "node11"), SlurmLists.expandHosts("node[08-11]"));
        assertEquals(List.of("x8", "x9", "x10"), SlurmLists.expandHosts("x[8-10]"));
        assertEquals(List.of("c-1.dom", "c-3.dom", "d"), SlurmLists.expandHosts("c-[1,3].dom,d"));
        assertEquals(List.of("h001", "h002", "h100"), SlurmLists.expandHosts("h[001-002,100]"));
        for (String list : new String[] {"n1", "n[1-3]", "gpu[01-02,07]", "a[1-2]-ib,b3", "r[1-2]-n[01-02]",
                "node[08-11]", "c-[1,3].dom,d"}) {
            assertEquals(SlurmLists.expandHosts(list).get(0), SlurmLists.firstHost(list), list);
        }
    }

    @Test
    void malformedOrHugeHostListsAreRefusedByName() {
        for (String bad : new String[] {"n[1-3", "n1-3]", "n[3-1]", "n[a-b]", "n[[1]]", "", ",n1", "n[]", "n[1-]"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> SlurmLists.expandHosts(bad),
                    bad);
            assertTrue(e.getMessage().contains("Slurm host list"), e.getMessage());
        }
        IllegalArgumentException huge = assertThrows(IllegalArgumentException.class,
                () -> SlurmLists.expandHosts("n[0-999999999999]"));
        assertTrue(huge.getMessage().contains("more than"), huge.getMessage());
        // the first host of a huge list needs no expansion
        assertEquals("n0", SlurmLists.firstHost("n[0-999999999999]"));
    }

    @Test
    void tasksPerNodeInEveryFormSlurmWrites() {
        assertArrayEquals(new int[] {4}, SlurmLists.expandTasksPerNode("4"));
        assertArrayEquals(new int[] {2, 2}, SlurmLists.expandTasksPerNode("2(x2)"));
        assertArrayEquals(new int[] {2, 2, 2, 1}, SlurmLists.expandTasksPerNode("2(x3),1"));
        assertArrayEquals(new int[] {3, 1}, SlurmLists.expandTasksPerNode("3,1"));
        assertArrayEquals(new int[] {1, 4, 4, 2}, SlurmLists.expandTasksPerNode("1,4(x2),2"));
        for (String bad : new String[] {"", "0", "2(x)", "2(3)", "2(x3", "a", "2(x0)", "-1"}) {
            assertThrows(IllegalArgumentException.class, () -> SlurmLists.expandTasksPerNode(bad), bad);
        }
        assertThrows(IllegalArgumentException.class, () -> SlurmLists.expandTasksPerNode("1(x2000000000)"));
    }

    // ------------------------------------------------------------------ each launcher

    @Test
    void slurmTaskPerRank() {
        LaunchInfo i = Launchers.resolve(slurmTask(3, 1, 1));
        assertEquals("slurm", i.launcher());
        assertEquals(3, i.rank());
        assertEquals(4, i.worldSize());
        assertEquals(1, i.localRank());
        assertEquals(2, i.localWorldSize());
        assertEquals(1, i.nodeRank());
        assertEquals(2, i.nodeCount());
        assertEquals("n1", i.masterAddr());
        assertEquals(Launchers.derivedPort(812, 0), i.masterPort());
        assertEquals(15000 + 812 * 16, i.masterPort());
        assertEquals("slurm-812.0", i.jobId());
        assertEquals("SLURM_PROCID", i.source(Field.RANK));
        assertEquals("SLURM_STEP_NUM_TASKS", i.source(Field.WORLD_SIZE));
        assertEquals("first host of SLURM_STEP_NODELIST", i.source(Field.MASTER_ADDR));
        String line = i.describe();
        assertTrue(line.startsWith("slurm: rank 3 of 4 (SLURM_PROCID, SLURM_STEP_NUM_TASKS), local 1 of 2 (SLURM_LOCALID, "
                + "SLURM_STEP_TASKS_PER_NODE[SLURM_NODEID]), node 1 of 2 (SLURM_NODEID, SLURM_STEP_NUM_NODES), master n1:"
                + (15000 + 812 * 16) + " (first host of SLURM_STEP_NODELIST; derived from SLURM_JOB_ID=812, SLURM_STEP_ID=0)"),
                line);

        DistributedConfig c = DistributedConfig.fromEnvironment(slurmTask(3, 1, 1));
        assertEquals(3, c.rank());
        assertEquals(4, c.worldSize());
        assertEquals(1, c.localRank());
        assertEquals(2, c.localWorldSize());
        assertEquals("n1", c.masterAddr());
        assertEquals("slurm-812.0", c.jobId());
        assertEquals("slurm", c.launch().orElseThrow().launcher());
    }

    @Test
    void slurmUnevenTasksPerNodeAndAnotherStep() {
        Map<String, String> e = slurmTask(3, 0, 1);
        e.put("SLURM_STEP_TASKS_PER_NODE", "3,1");
        e.put("SLURM_STEP_ID", "1");
        e.put("SLURM_STEP_NODELIST", "gpu[01-02,07]");
        LaunchInfo i = Launchers.resolve(e);
        assertEquals(1, i.localWorldSize());
        assertEquals("gpu01", i.masterAddr());
        assertEquals(Launchers.derivedPort(812, 0) + 1, i.masterPort(), "the next step takes the next port");
        assertEquals("slurm-812.1", i.jobId());
    }

    @Test
    void derivedPortsOfNearbyJobsAndStepsDiffer() {
        java.util.Set<Integer> seen = new java.util.HashSet<>();
        for (long job = 5000; job < 6000; job++) {
            for (long step = 0; step < 16; step++) {
                int p = Launchers.derivedPort(job, step);
                assertTrue(p >= 15000 && p < 31000, "port " + p);
                assertTrue(seen.add(p), "job " + job + " step " + step + " repeats port " + p);
            }
        }
        assertEquals(Launchers.derivedPort(4294967294L, 4294967294L), Launchers.derivedPort(4294967294L, 4294967294L));
    }

    @Test
    void aBatchScriptOutsideAStepIsNotATaskAndSaysSo() {
        Map<String, String> e = slurmTask(0, 0, 0);
        e.remove("SLURM_STEP_ID");
        e.remove("SLURM_STEPID");
        e.remove("SLURM_STEP_NUM_TASKS");
        LaunchInfo i = Launchers.resolve(e);
        assertEquals("none", i.launcher());
        assertEquals(1, i.worldSize());
        assertTrue(i.context().contains("not in an srun step"), i.context());
        assertTrue(i.describe().contains("start the ranks with srun"), i.describe());
    }

    @Test
    void openMpi() {
        Map<String, String> e = ompiRank(2, 0, 2);
        e.put("MASTER_ADDR", "10.0.0.1");
        LaunchInfo i = Launchers.resolve(e);
        assertEquals("mpi", i.launcher());
        assertEquals("Open MPI", i.flavour());
        assertEquals(2, i.rank());
        assertEquals(4, i.worldSize());
        assertEquals(0, i.localRank());
        assertEquals(2, i.localWorldSize());
        assertEquals("10.0.0.1", i.masterAddr());
        assertEquals("MASTER_ADDR", i.source(Field.MASTER_ADDR));
        assertEquals(Launchers.derivedPort(2062221313L, 0), i.masterPort());
        assertEquals("mpi-2062221313", i.jobId());

        // every rank on this host: loopback
        LaunchInfo local = Launchers.resolve(ompiRank(2, 2, 4));
        assertEquals("127.0.0.1", local.masterAddr());

        // across hosts without MASTER_ADDR: an error saying what to pass
        IllegalArgumentException x = assertThrows(IllegalArgumentException.class,
                () -> Launchers.resolve(ompiRank(2, 0, 2)));
        assertTrue(x.getMessage().contains("mpirun -x MASTER_ADDR="), x.getMessage());

        // MASTER_PORT wins over the derived one
        e.put("MASTER_PORT", "29700");
        assertEquals(29700, Launchers.resolve(e).masterPort());
    }

    @Test
    void mpichHydraAndPmix() {
        LaunchInfo h = Launchers.resolve(Map.of("PMI_RANK", "1", "PMI_SIZE", "3", "MPI_LOCALRANKID", "1",
                "MPI_LOCALNRANKS", "3"));
        assertEquals("MPICH/Hydra", h.flavour());
        assertEquals(1, h.rank());
        assertEquals(3, h.worldSize());
        assertEquals("127.0.0.1", h.masterAddr());
        assertEquals(29500, h.masterPort());

        // PMIx alone gives no size: WORLD_SIZE fills it in
        LaunchInfo p = Launchers.resolve(Map.of("PMIX_RANK", "2", "WORLD_SIZE", "4", "MASTER_ADDR", "h0"));
        assertEquals("PMIx", p.flavour());
        assertEquals(2, p.rank());
        assertEquals(4, p.worldSize());
        IllegalArgumentException x = assertThrows(IllegalArgumentException.class,
                () -> Launchers.resolve(Map.of("PMIX_RANK", "2", "MASTER_ADDR", "h0")));
        assertTrue(x.getMessage().contains("world size"), x.getMessage());
    }

    @Test
    void kubeflowPyTorchJobOneProcessPerPod() {
        // PyTorchJob: torchrun's variables and PET_*; they agree
        Map<String, String> e = new HashMap<>(Map.of("MASTER_ADDR", "train-master-0", "MASTER_PORT", "23456", "RANK", "2",
                "WORLD_SIZE", "3", "PET_NNODES", "3", "PET_NODE_RANK", "2", "PET_NPROC_PER_NODE", "1"));
        LaunchInfo i = Launchers.resolve(e);
        assertEquals(2, i.rank());
        assertEquals(3, i.worldSize());
        assertEquals("train-master-0", i.masterAddr());
        assertEquals(23456, i.masterPort());
        e.put("PET_NODE_RANK", "1");
        IllegalArgumentException x = assertThrows(IllegalArgumentException.class, () -> Launchers.resolve(e));
        assertTrue(x.getMessage().contains("RANK=2 (torchrun) and PET_NODE_RANK=1 (k8s) disagree"), x.getMessage());
    }

    @Test
    void kubeflowSeveralProcessesPerPodNeedAPerNodeLauncher() {
        // PyTorchJob sets RANK to the pod's index even when each pod should run 4 processes
        Map<String, String> pod = new HashMap<>(Map.of("MASTER_ADDR", "train-master-0", "MASTER_PORT", "23456", "RANK",
                "1", "WORLD_SIZE", "8", "PET_NNODES", "2", "PET_NODE_RANK", "1", "PET_NPROC_PER_NODE", "4"));
        IllegalArgumentException x = assertThrows(IllegalArgumentException.class, () -> Launchers.resolve(pod));
        assertTrue(x.getMessage().contains("bin/commrun"), x.getMessage());

        // what commrun reads in that pod
        LaunchInfo node = Launchers.scheduler(pod).orElseThrow();
        assertEquals(1, node.nodeRank());
        assertEquals(2, node.nodeCount());

        // and what its workers see: commrun's variables over the pod's
        Map<String, String> worker = new HashMap<>(pod);
        worker.putAll(Map.of("RANK", "6", "LOCAL_RANK", "2", "LOCAL_WORLD_SIZE", "4", "GROUP_RANK", "1",
                "GROUP_WORLD_SIZE", "2"));
        LaunchInfo w = Launchers.resolve(worker);
        assertEquals("torchrun", w.launcher());
        assertEquals(6, w.rank());
        assertEquals(8, w.worldSize());
    }

    @Test
    void kubeflowTrainerV2() {
        Map<String, String> e = Map.of("PET_NNODES", "2", "PET_NODE_RANK", "1", "PET_NPROC_PER_NODE", "1",
                "PET_MASTER_ADDR", "job-node-0-0.job", "PET_MASTER_PORT", "29400", "JOB_COMPLETION_INDEX", "0");
        LaunchInfo i = Launchers.resolve(e);
        assertEquals("Kubeflow Trainer", i.flavour());
        assertEquals(1, i.rank());
        assertEquals(2, i.worldSize());
        assertEquals("job-node-0-0.job", i.masterAddr());
        assertEquals(29400, i.masterPort());
    }

    @Test
    void indexedJobAndJobSet() {
        Map<String, String> pod = new HashMap<>(Map.of("JOB_COMPLETION_INDEX", "2", "HOSTNAME", "jcomm-demo-2",
                "WORLD_SIZE", "4", "MASTER_ADDR", "jcomm-demo-0.jcomm-demo", "MASTER_PORT", "29500"));
        LaunchInfo i = Launchers.resolve(pod);
        assertEquals("k8s", i.launcher());
        assertEquals("Indexed Job", i.flavour());
        assertEquals(2, i.rank());
        assertEquals(4, i.worldSize());
        assertEquals(0, i.localRank());
        assertEquals(1, i.localWorldSize());
        assertEquals("jcomm-demo-0.jcomm-demo", i.masterAddr());

        Map<String, String> noMaster = new HashMap<>(pod);
        noMaster.remove("MASTER_ADDR");
        IllegalArgumentException x = assertThrows(IllegalArgumentException.class, () -> Launchers.resolve(noMaster));
        assertTrue(x.getMessage().contains("jcomm-demo-0.<headless service>"), x.getMessage());
        Map<String, String> noWorld = new HashMap<>(pod);
        noWorld.remove("WORLD_SIZE");
        x = assertThrows(IllegalArgumentException.class, () -> Launchers.resolve(noWorld));
        assertTrue(x.getMessage().contains("set WORLD_SIZE"), x.getMessage());

        Map<String, String> jobset = Map.of("JOB_COMPLETION_INDEX", "1", "JCOMM_K8S_JOB_INDEX", "1",
                "JCOMM_K8S_PODS_PER_JOB", "2", "WORLD_SIZE", "4", "MASTER_ADDR", "js-workers-0-0.js");
        LaunchInfo j = Launchers.resolve(jobset);
        assertEquals("JobSet", j.flavour());
        assertEquals(3, j.rank());
        assertThrows(IllegalArgumentException.class, () -> Launchers.resolve(Map.of("JOB_COMPLETION_INDEX", "1",
                "JCOMM_K8S_JOB_INDEX", "1", "WORLD_SIZE", "4", "MASTER_ADDR", "a")));
    }

    @Test
    void leaderWorkerSet() {
        LaunchInfo i = Launchers.resolve(Map.of("LWS_LEADER_ADDRESS", "vllm-0.vllm.default", "LWS_GROUP_SIZE", "4",
                "LWS_WORKER_INDEX", "3"));
        assertEquals("lws", i.launcher());
        assertEquals(3, i.rank());
        assertEquals(4, i.worldSize());
        assertEquals("vllm-0.vllm.default", i.masterAddr());
        assertEquals(29500, i.masterPort());
        assertEquals(3, i.nodeRank());
        assertThrows(IllegalArgumentException.class, () -> Launchers.resolve(Map.of("LWS_LEADER_ADDRESS", "a",
                "LWS_GROUP_SIZE", "2", "LWS_WORKER_INDEX", "2")));
    }

    @Test
    void torchrunAloneAndNothingAtAll() {
        LaunchInfo t = Launchers.resolve(Map.of("RANK", "1", "WORLD_SIZE", "2", "MASTER_ADDR", "h", "MASTER_PORT", "1234"));
        assertEquals("torchrun", t.launcher());
        assertEquals(1, t.rank());
        assertEquals("h", t.masterAddr());
        LaunchInfo none = Launchers.resolve(Map.of());
        assertEquals("none", none.launcher());
        assertEquals(0, none.rank());
        assertEquals(1, none.worldSize());
        assertEquals("127.0.0.1", none.masterAddr());
        assertEquals(29500, none.masterPort());
        assertNull(none.context());
    }

    // ------------------------------------------------------------------ several launchers at once

    @Test
    void rankByHandBesideSlurmMustAgree() {
        Map<String, String> e = slurmTask(1, 1, 0);
        e.put("RANK", "1");
        e.put("WORLD_SIZE", "4");
        assertEquals(1, Launchers.resolve(e).rank(), "agreeing values are fine");
        e.put("RANK", "3");
        IllegalArgumentException x = assertThrows(IllegalArgumentException.class, () -> Launchers.resolve(e));
        assertTrue(x.getMessage().contains("RANK=3 (torchrun) and SLURM_PROCID=1 (slurm) disagree"), x.getMessage());
        assertTrue(x.getMessage().contains("JCOMM_LAUNCHER"), x.getMessage());
        // forcing one settles it
        e.put("JCOMM_LAUNCHER", "slurm");
        assertEquals(1, Launchers.resolve(e).rank());
        e.put("JCOMM_LAUNCHER", "torchrun");
        assertEquals(3, Launchers.resolve(e).rank());
    }

    @Test
    void localWorldBesideSlurmMustAgree() {
        Map<String, String> e = slurmTask(1, 1, 0);
        e.put("LOCAL_WORLD_SIZE", "4");
        IllegalArgumentException x = assertThrows(IllegalArgumentException.class, () -> Launchers.resolve(e));
        assertTrue(x.getMessage().contains("LOCAL_WORLD_SIZE=4") && x.getMessage().contains("SLURM_STEP_TASKS_PER_NODE"),
                x.getMessage());
    }

    @Test
    void commrunInsideASlurmStepFollowsCommrun() {
        // srun -N 2 --ntasks-per-node 1 bin/commrun --nproc-per-node 4: worker 2 of node 1
        Map<String, String> e = slurmTask(1, 0, 1);
        e.put("SLURM_NTASKS", "2");
        e.put("SLURM_STEP_NUM_TASKS", "2");
        e.put("SLURM_STEP_TASKS_PER_NODE", "1(x2)");
        e.putAll(Map.of("RANK", "6", "WORLD_SIZE", "8", "LOCAL_RANK", "2", "LOCAL_WORLD_SIZE", "4", "GROUP_RANK", "1",
                "GROUP_WORLD_SIZE", "2", "MASTER_ADDR", "n1", "MASTER_PORT", "15000", "JCOMM_LAUNCHER_STORE", "1"));
        LaunchInfo i = Launchers.resolve(e);
        assertEquals("torchrun", i.launcher());
        assertEquals(6, i.rank());
        assertEquals(8, i.worldSize());
        assertEquals("slurm-812.0", i.jobId(), "the job id of the step it runs in");
        assertTrue(i.context().contains("inside slurm task 1 of 2"), i.describe());
        // a commrun whose node disagrees with the step's
        e.put("GROUP_RANK", "0");
        IllegalArgumentException x = assertThrows(IllegalArgumentException.class, () -> Launchers.resolve(e));
        assertTrue(x.getMessage().contains("GROUP_RANK=0 (torchrun) and SLURM_NODEID=1 (slurm) disagree"), x.getMessage());
    }

    @Test
    void mpirunInsideASlurmAllocationFollowsMpi() {
        // mpirun's daemons are Slurm tasks (one per node); the ranks are MPI's
        Map<String, String> e = slurmTask(1, 0, 1);
        e.put("SLURM_NTASKS", "2");
        e.put("SLURM_STEP_NUM_TASKS", "2");
        e.put("SLURM_STEP_TASKS_PER_NODE", "1(x2)");
        e.putAll(ompiRank(3, 1, 2));
        e.put("MASTER_ADDR", "n1");
        LaunchInfo i = Launchers.resolve(e);
        assertEquals("mpi", i.launcher());
        assertEquals(3, i.rank());
        assertEquals(4, i.worldSize());
        assertEquals(1, i.nodeRank(), "the node comes from the Slurm task around it");
        // without MASTER_ADDR, the step's first host is not taken for rank 0's (mpirun may run elsewhere)
        e.remove("MASTER_ADDR");
        assertThrows(IllegalArgumentException.class, () -> Launchers.resolve(e));
    }

    @Test
    void twoSchedulersOfTheSameTasksMustAgree() {
        // srun --mpi=pmix: Slurm and PMIx describe the same tasks
        Map<String, String> e = slurmTask(2, 0, 1);
        e.put("PMIX_RANK", "2");
        assertEquals(2, Launchers.resolve(e).rank());
        e.put("PMIX_RANK", "1");
        assertThrows(IllegalArgumentException.class, () -> Launchers.resolve(e));
    }

    @Test
    void forcedLaunchersAndBadValues() {
        IllegalArgumentException x = assertThrows(IllegalArgumentException.class,
                () -> Launchers.resolve(Map.of("JCOMM_LAUNCHER", "slurm")));
        assertTrue(x.getMessage().contains("JCOMM_LAUNCHER=slurm"), x.getMessage());
        x = assertThrows(IllegalArgumentException.class, () -> Launchers.resolve(Map.of("JCOMM_LAUNCHER", "pbs")));
        assertTrue(x.getMessage().contains("auto, torchrun, slurm, mpi, k8s, lws"), x.getMessage());
        Map<String, String> e = slurmTask(1, 1, 0);
        e.put("SLURM_PROCID", "one");
        x = assertThrows(IllegalArgumentException.class, () -> Launchers.resolve(e));
        assertTrue(x.getMessage().contains("SLURM_PROCID"), x.getMessage());
        e.put("SLURM_PROCID", "9");
        x = assertThrows(IllegalArgumentException.class, () -> Launchers.resolve(e));
        assertTrue(x.getMessage().contains("SLURM_PROCID=9 is not below SLURM_STEP_NUM_TASKS=4"), x.getMessage());
        assertFalse(Launchers.scheduler(Map.of("JCOMM_LAUNCHER", "torchrun", "SLURM_PROCID", "0", "SLURM_STEP_ID", "0"))
                .isPresent());
    }
}
