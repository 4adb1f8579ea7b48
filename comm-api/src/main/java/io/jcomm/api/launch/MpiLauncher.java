package io.jcomm.api.launch;

import java.util.Map;
import java.util.Optional;

/**
 * MPI runtimes: Open MPI's {@code mpirun} ({@code OMPI_COMM_WORLD_*}), a PMIx launcher that gives only
 * {@code PMIX_RANK}, and MPICH's Hydra or Intel MPI ({@code PMI_RANK}, {@code PMI_SIZE},
 * {@code MPI_LOCALRANKID}, {@code MPI_LOCALNRANKS}). None of them names rank 0's host: pass it
 * ({@code mpirun -x MASTER_ADDR=...}); when every rank runs on this host it is {@code 127.0.0.1}. The port
 * is {@code MASTER_PORT} when set, else derived from Open MPI's job id, else torchrun's 29500.
 */
final class MpiLauncher implements Launcher {

    static final String OMPI_RANK = "OMPI_COMM_WORLD_RANK";
    static final String OMPI_SIZE = "OMPI_COMM_WORLD_SIZE";
    static final String OMPI_LOCAL_RANK = "OMPI_COMM_WORLD_LOCAL_RANK";
    static final String OMPI_LOCAL_SIZE = "OMPI_COMM_WORLD_LOCAL_SIZE";
    static final String OMPI_JOBID = "OMPI_MCA_ess_base_jobid";
    static final String PMIX_RANK = "PMIX_RANK";
    static final String PMIX_NAMESPACE = "PMIX_NAMESPACE";
    static final String PMI_RANK = "PMI_RANK";
    static final String PMI_SIZE = "PMI_SIZE";
    static final String HYDRA_LOCAL_RANK = "MPI_LOCALRANKID";
    static final String HYDRA_LOCAL_SIZE = "MPI_LOCALNRANKS";

    @Override
    public String name() {
        return "mpi";
    }

    @Override
    public Optional<LaunchInfo> detect(Map<String, String> environment) {
        Env env = new Env(environment);
        LaunchInfo.Builder b = LaunchInfo.builder(name());
        if (env.has(OMPI_RANK)) {
            b.flavour("Open MPI");
            read(env, b, OMPI_RANK, OMPI_SIZE, OMPI_LOCAL_RANK, OMPI_LOCAL_SIZE);
        } else if (env.has(PMI_RANK)) {
            b.flavour("MPICH/Hydra");
            read(env, b, PMI_RANK, PMI_SIZE, HYDRA_LOCAL_RANK, HYDRA_LOCAL_SIZE);
        } else if (env.has(PMIX_RANK)) {
            b.flavour("PMIx");
            b.rank(env.intOf(PMIX_RANK, 0), PMIX_RANK);
        } else {
            return Optional.empty();
        }
        LaunchInfo partial = b.build();
        if (partial.worldSize() != LaunchInfo.UNKNOWN && partial.worldSize() == partial.localWorldSize()) {
            b.masterAddr("127.0.0.1", "every rank on this host");
        } else {
            b.masterNote("MPI does not tell a process where rank 0 runs: pass it with mpirun -x MASTER_ADDR=<host of "
                    + "rank 0> (and -x MASTER_PORT=<port> to choose the port)");
        }
        long job = env.longOf(OMPI_JOBID);
        if (job >= 0) {
            b.masterPort(Launchers.derivedPort(job, 0), "derived from " + OMPI_JOBID + "=" + job);
            b.jobId("mpi-" + job, OMPI_JOBID);
        } else if (env.has(PMIX_NAMESPACE)) {
            b.jobId("mpi-" + env.get(PMIX_NAMESPACE), PMIX_NAMESPACE);
        }
        return Optional.of(b.build());
    }

    private static void read(Env env, LaunchInfo.Builder b, String rank, String size, String localRank, String localSize) {
        int r = env.intOf(rank, 0);
        b.rank(r, rank);
        int s = env.intOf(size, 1);
        if (s != LaunchInfo.UNKNOWN) {
            if (r >= s) {
                throw new IllegalArgumentException(rank + "=" + r + " is not below " + size + "=" + s);
            }
            b.worldSize(s, size);
        }
        if (env.has(localRank)) {
            b.localRank(env.intOf(localRank, 0), localRank);
        }
        if (env.has(localSize)) {
            b.localWorldSize(env.intOf(localSize, 1), localSize);
        }
    }
}
