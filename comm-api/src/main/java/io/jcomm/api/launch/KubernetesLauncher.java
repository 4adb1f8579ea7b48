package io.jcomm.api.launch;

import io.jcomm.api.config.Settings;
import java.util.Map;
import java.util.Optional;

/**
 * Kubernetes controllers, one pod per node of the job:
 *
 * <ul>
 *   <li>Kubeflow's PyTorchJob and Trainer: {@code PET_NNODES}, {@code PET_NODE_RANK},
 *       {@code PET_NPROC_PER_NODE} (and Trainer's {@code PET_MASTER_ADDR}, {@code PET_MASTER_PORT};
 *       PyTorchJob sets torchrun's {@code MASTER_ADDR} instead). With one process per pod the pod is the
 *       rank; with several, start them with {@code bin/commrun}, which reads these variables as its node
 *       rank, node count and master.</li>
 *   <li>An Indexed Job or a JobSet behind a headless Service: the pod's {@code JOB_COMPLETION_INDEX}; in a
 *       JobSet also the job's global index and its pods per job, which the manifest passes as
 *       {@code JCOMM_K8S_JOB_INDEX} (from the annotation {@code jobset.sigs.k8s.io/job-global-index} through the
 *       downward API) and {@code JCOMM_K8S_PODS_PER_JOB}. The manifest names the world ({@code WORLD_SIZE}) and the
 *       first pod's DNS name ({@code MASTER_ADDR}); nothing else in a pod knows them.</li>
 * </ul>
 */
final class KubernetesLauncher implements Launcher {

    static final String PET_NNODES = "PET_NNODES";
    static final String PET_NODE_RANK = "PET_NODE_RANK";
    static final String PET_NPROC_PER_NODE = "PET_NPROC_PER_NODE";
    static final String PET_MASTER_ADDR = "PET_MASTER_ADDR";
    static final String PET_MASTER_PORT = "PET_MASTER_PORT";
    static final String COMPLETION_INDEX = "JOB_COMPLETION_INDEX";
    /** A JobSet's global job index, passed by the manifest (downward API). */
    static final String JOB_INDEX = Settings.K8S_JOB_INDEX.name();
    /** Pods of each job of a JobSet (the jobs' parallelism), passed by the manifest. */
    static final String PODS_PER_JOB = Settings.K8S_PODS_PER_JOB.name();

    @Override
    public String name() {
        return "k8s";
    }

    @Override
    public Optional<LaunchInfo> detect(Map<String, String> environment) {
        Env env = new Env(environment);
        if (env.has(PET_NNODES)) {
            return Optional.of(kubeflow(env));
        }
        if (env.has(COMPLETION_INDEX)) {
            return Optional.of(indexed(env));
        }
        return Optional.empty();
    }

    private LaunchInfo kubeflow(Env env) {
        LaunchInfo.Builder b = LaunchInfo.builder(name()).flavour(env.has(PET_MASTER_ADDR) ? "Kubeflow Trainer"
                : "Kubeflow PyTorchJob");
        String nn = env.get(PET_NNODES);
        int colon = nn.indexOf(':');
        int nodes;
        if (colon < 0) {
            nodes = Env.parse(PET_NNODES, nn, 1);
        } else {
            int min = Env.parse(PET_NNODES, nn.substring(0, colon).trim(), 1);
            nodes = Env.parse(PET_NNODES, nn.substring(colon + 1).trim(), min);
            if (min != nodes) {
                throw new IllegalArgumentException(PET_NNODES + "=" + nn + " is an elastic range; jcomm needs the node "
                        + "count: start the pods with bin/commrun --nnodes " + nn);
            }
        }
        b.nodeCount(nodes, PET_NNODES);
        int node = env.intOf(PET_NODE_RANK, 0);
        if (node == LaunchInfo.UNKNOWN) {
            node = 0;
            b.nodeRank(0, "default (no " + PET_NODE_RANK + ")");
        } else {
            if (node >= nodes) {
                throw new IllegalArgumentException(PET_NODE_RANK + "=" + node + " is not below " + PET_NNODES + "=" + nodes);
            }
            b.nodeRank(node, PET_NODE_RANK);
        }
        String procs = env.get(PET_NPROC_PER_NODE);
        int perPod = 1;
        if (procs != null) {
            try {
                perPod = Env.parse(PET_NPROC_PER_NODE, procs, 1);
            } catch (IllegalArgumentException e) {
                perPod = LaunchInfo.UNKNOWN; // "auto", "gpu", "cpu": torchrun counts devices
            }
        }
        if (perPod == 1) {
            b.rank(node, PET_NODE_RANK).worldSize(nodes, PET_NNODES).localRank(0, "one process per pod")
                    .localWorldSize(1, procs == null ? "one process per pod" : PET_NPROC_PER_NODE);
        } else {
            if (perPod != LaunchInfo.UNKNOWN) {
                b.worldSize(nodes * perPod, PET_NNODES + " x " + PET_NPROC_PER_NODE)
                        .localWorldSize(perPod, PET_NPROC_PER_NODE);
            }
            b.rankNote(PET_NPROC_PER_NODE + "=" + procs + ": each pod runs several ranks; start them with bin/commrun "
                    + "--nproc-per-node N, which reads " + PET_NNODES + ", " + PET_NODE_RANK + " and the master from the "
                    + "pod's environment");
        }
        if (env.has(PET_MASTER_ADDR)) {
            b.masterAddr(env.get(PET_MASTER_ADDR), PET_MASTER_ADDR);
        } else {
            b.masterNote("set MASTER_ADDR (PyTorchJob sets it to <job>-master-0)");
        }
        if (env.has(PET_MASTER_PORT)) {
            b.masterPort(env.intOf(PET_MASTER_PORT, 1), PET_MASTER_PORT);
        }
        return b.build();
    }

    private LaunchInfo indexed(Env env) {
        LaunchInfo.Builder b = LaunchInfo.builder(name());
        int index = env.intOf(COMPLETION_INDEX, 0);
        if (env.has(JOB_INDEX) || env.has(PODS_PER_JOB)) {
            if (!env.has(JOB_INDEX) || !env.has(PODS_PER_JOB)) {
                throw new IllegalArgumentException("a JobSet's pod needs both " + JOB_INDEX + " and " + PODS_PER_JOB
                        + " (one is set)");
            }
            int job = env.intOf(JOB_INDEX, 0);
            int perJob = env.intOf(PODS_PER_JOB, 1);
            if (index >= perJob) {
                throw new IllegalArgumentException(COMPLETION_INDEX + "=" + index + " is not below " + PODS_PER_JOB + "="
                        + perJob);
            }
            long rank = (long) job * perJob + index;
            if (rank > Integer.MAX_VALUE) {
                throw new IllegalArgumentException(JOB_INDEX + " x " + PODS_PER_JOB + " is too large");
            }
            b.flavour("JobSet").rank((int) rank, JOB_INDEX + " x " + PODS_PER_JOB + " + " + COMPLETION_INDEX);
        } else {
            b.flavour("Indexed Job").rank(index, COMPLETION_INDEX);
        }
        LaunchInfo partial = b.build();
        b.nodeRank(partial.rank(), partial.source(LaunchInfo.Field.RANK)).localRank(0, "one process per pod")
                .localWorldSize(1, "one process per pod");
        b.rankNote("set WORLD_SIZE in the manifest to the number of pods (the job's completions"
                + (partial.flavour().equals("JobSet") ? ", times the jobs" : "") + ")");
        String host = env.get("HOSTNAME");
        String suffix = "-" + env.get(COMPLETION_INDEX);
        String first = host != null && host.endsWith(suffix) && partial.flavour().equals("Indexed Job")
                ? host.substring(0, host.length() - suffix.length()) + "-0.<headless service>" : null;
        b.masterNote("set MASTER_ADDR in the manifest to the first pod's DNS name: "
                + (first != null ? first : "<job>-0.<headless service> for an Indexed Job, "
                + "<jobset>-<replicated job>-0-0.<jobset> for a JobSet"));
        return b.build();
    }
}
