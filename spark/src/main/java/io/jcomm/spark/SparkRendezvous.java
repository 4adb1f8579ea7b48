package io.jcomm.spark;

import io.jcomm.api.config.Settings;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.StoreException;
import io.jcomm.cpu.store.JobToken;
import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.apache.spark.BarrierTaskContext;
import org.apache.spark.BarrierTaskInfo;

/**
 * The jcomm job of one barrier stage, seen from one of its tasks: task 0 hosts the job's store on its host
 * (a free port, or {@code MASTER_PORT} when the executors' environment sets one) and shares the port with
 * {@code allGather}, as pyspark's {@code TorchDistributor} agrees on its master; every task gets its
 * {@link DistributedConfig} ({@link SparkLayout}). Close it when the task's jcomm work is done: every task
 * meets at the stage's barrier first, so that task 0 stops the store only after every rank has closed.
 *
 * <pre>{@code
 * rdd.rdd().barrier().mapPartitions(it -> {
 *     try (SparkRendezvous r = SparkRendezvous.join(BarrierTaskContext.get());
 *          ParallelState ps = ParallelState.initialize(r.config())) { ... }
 * }, ...);
 * }</pre>
 *
 * Not thread safe; one per task.
 */
public final class SparkRendezvous implements AutoCloseable {

    /** What task 0 shares when it could not start the store (the others fail with its reason). */
    private static final String FAILED = "failed:";

    private final BarrierTaskContext context;
    private final DistributedConfig config;
    private final TcpStoreServer server;
    private boolean closed;

    private SparkRendezvous(BarrierTaskContext context, DistributedConfig config, TcpStoreServer server) {
        this.context = context;
        this.config = config;
        this.server = server;
    }

    /**
     * Joins this task's stage as a jcomm job: task 0 starts the store, every task learns its port. A
     * collective of the stage: every task must call it.
     *
     * @throws StoreException when task 0 could not start the store (on every task, with task 0's reason)
     */
    public static SparkRendezvous join(BarrierTaskContext context) {
        Objects.requireNonNull(context, "context");
        Map<String, String> env = System.getenv();
        List<String> addresses = new ArrayList<>();
        for (BarrierTaskInfo i : context.getTaskInfos()) {
            addresses.add(i.address());
        }
        int partition = context.partitionId();
        String host0 = SparkLayout.host(addresses.get(0));
        String jobId = "spark-stage-" + context.stageId() + "." + context.stageAttemptNumber();
        TcpStoreServer server = null;
        String mine = "";
        if (partition == 0) {
            try {
                server = startStore(host0, addresses.size(), env);
                mine = Integer.toString(server.port());
            } catch (RuntimeException e) {
                mine = FAILED + e.getMessage();
            }
        }
        String[] all = context.allGather(mine);
        String first = all[0];
        if (first.startsWith(FAILED)) {
            throw new StoreException("task 0 of the barrier stage could not start the job's store on " + host0 + ": "
                    + first.substring(FAILED.length()));
        }
        int port = Integer.parseInt(first);
        DistributedConfig config = SparkLayout.config(partition, addresses, port, jobId, env);
        return new SparkRendezvous(context, config, server);
    }

    private static TcpStoreServer startStore(String host, int world, Map<String, String> env) {
        TcpStoreServerConfig.Builder b = TcpStoreServerConfig.builder().host(host).name("spark-stage")
                .expectedClients(world).logConnections(false);
        String port = env.get(Settings.MASTER_PORT.name());
        b.port(port == null || port.isBlank() ? 0 : Integer.parseInt(port.trim()));
        String token = env.get(Settings.TOKEN_FILE.name());
        if (token != null && !token.isBlank()) {
            b.token(JobToken.read(java.nio.file.Path.of(token.trim())));
        }
        return TcpStoreServer.start(b.build());
    }

    /** This task's place in the job: rank = partition id, master = task 0's host and the store's port. */
    public DistributedConfig config() {
        return config;
    }

    /** The Spark task this rank runs in. */
    public BarrierTaskContext context() {
        return context;
    }

    /**
     * Meets every task at the stage's barrier (so that no rank's store client outlives the store), then stops the
     * store in task 0. Idempotent.
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        try {
            context.barrier();
        } finally {
            if (server != null) {
                server.close();
            }
        }
    }
}
