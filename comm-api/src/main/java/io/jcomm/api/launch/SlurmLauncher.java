package io.jcomm.api.launch;

import java.util.Map;
import java.util.Optional;

/**
 * Slurm's {@code srun}: every task of a step gets its rank ({@code SLURM_PROCID}), the step's task count,
 * its rank and the task count on its node, its node's index and the step's compressed node list. No
 * variable names rank 0's address: it is the first host of the step's node list (where Slurm places task
 * 0). The port is {@code MASTER_PORT} when set, else {@link Launchers#derivedPort} of the job and step ids,
 * so that two steps of one job, or two jobs, do not pick the same one.
 *
 * <p>Only a task of a step counts: a batch script's own shell also sees {@code SLURM_PROCID} and
 * {@code SLURM_NTASKS} (of the allocation), but no step id, and a JVM started there is not one of the
 * step's tasks.
 */
final class SlurmLauncher implements Launcher {

    static final String PROCID = "SLURM_PROCID";
    static final String STEP_ID = "SLURM_STEP_ID";
    static final String STEPID_OLD = "SLURM_STEPID";
    static final String STEP_NUM_TASKS = "SLURM_STEP_NUM_TASKS";
    static final String NTASKS = "SLURM_NTASKS";
    static final String LOCALID = "SLURM_LOCALID";
    static final String NODEID = "SLURM_NODEID";
    static final String STEP_NUM_NODES = "SLURM_STEP_NUM_NODES";
    static final String NNODES = "SLURM_NNODES";
    static final String STEP_NODELIST = "SLURM_STEP_NODELIST";
    static final String JOB_NODELIST = "SLURM_JOB_NODELIST";
    static final String NODELIST = "SLURM_NODELIST";
    static final String STEP_TASKS_PER_NODE = "SLURM_STEP_TASKS_PER_NODE";
    static final String TASKS_PER_NODE = "SLURM_TASKS_PER_NODE";
    static final String JOB_ID = "SLURM_JOB_ID";
    static final String JOBID_OLD = "SLURM_JOBID";

    @Override
    public String name() {
        return "slurm";
    }

    @Override
    public Optional<LaunchInfo> detect(Map<String, String> environment) {
        Env env = new Env(environment);
        String stepVar = env.firstSet(STEP_ID, STEPID_OLD);
        if (!env.has(PROCID) || stepVar == null) {
            return Optional.empty();
        }
        LaunchInfo.Builder b = LaunchInfo.builder(name());
        String worldVar = env.firstSet(STEP_NUM_TASKS, NTASKS);
        int world = worldVar == null ? LaunchInfo.UNKNOWN : env.intOf(worldVar, 1);
        int rank = env.intOf(PROCID, 0);
        if (world != LaunchInfo.UNKNOWN && rank >= world) {
            throw new IllegalArgumentException(PROCID + "=" + rank + " is not below " + worldVar + "=" + world);
        }
        b.rank(rank, PROCID);
        if (worldVar != null) {
            b.worldSize(world, worldVar);
        }
        int node = env.intOf(NODEID, 0);
        if (node != LaunchInfo.UNKNOWN) {
            b.nodeRank(node, NODEID);
        }
        String nodesVar = env.firstSet(STEP_NUM_NODES, NNODES);
        if (nodesVar != null) {
            b.nodeCount(env.intOf(nodesVar, 1), nodesVar);
        }
        if (env.has(LOCALID)) {
            b.localRank(env.intOf(LOCALID, 0), LOCALID);
        }
        String tpnVar = env.firstSet(STEP_TASKS_PER_NODE, TASKS_PER_NODE);
        if (tpnVar != null && node != LaunchInfo.UNKNOWN) {
            int[] perNode = SlurmLists.expandTasksPerNode(env.get(tpnVar));
            if (node >= perNode.length) {
                throw new IllegalArgumentException(NODEID + "=" + node + " but " + tpnVar + "='" + env.get(tpnVar)
                        + "' lists " + perNode.length + " node(s)");
            }
            b.localWorldSize(perNode[node], tpnVar + "[" + NODEID + "]");
        }
        String listVar = env.firstSet(STEP_NODELIST, JOB_NODELIST, NODELIST);
        if (listVar != null) {
            b.masterAddr(SlurmLists.firstHost(env.get(listVar)), "first host of " + listVar);
        } else {
            b.masterNote("no SLURM_STEP_NODELIST: set MASTER_ADDR to the host of task 0");
        }
        String jobVar = env.firstSet(JOB_ID, JOBID_OLD);
        long step = env.longOf(stepVar);
        if (jobVar != null) {
            long job = env.longOf(jobVar);
            b.masterPort(Launchers.derivedPort(job, step), "derived from " + jobVar + "=" + job + ", " + stepVar + "="
                    + step);
            b.jobId("slurm-" + job + "." + step, jobVar + "." + stepVar);
        }
        return Optional.of(b.build());
    }
}
