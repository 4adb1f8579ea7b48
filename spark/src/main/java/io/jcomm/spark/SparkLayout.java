package io.jcomm.spark;

import io.jcomm.api.config.Settings;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.launch.LaunchInfo;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * How a barrier stage's tasks map onto a jcomm job, as a pure function of what Spark tells each task
 * (its partition id, every task's executor address, the port task 0 bound): rank = partition id, world =
 * the stage's task count, master = task 0's host, local rank = the task's place among the tasks on its host
 * in partition order. Kept apart from Spark's classes so that it is unit-tested without a cluster.
 */
public final class SparkLayout {

    private SparkLayout() {
    }

    /** The host of an executor address as {@code BarrierTaskInfo.address()} gives it ({@code host:port} or {@code host}). */
    public static String host(String address) {
        Objects.requireNonNull(address, "address");
        String a = address.trim();
        if (a.startsWith("[")) { // [v6]:port
            int close = a.indexOf(']');
            return close > 0 ? a.substring(1, close) : a;
        }
        int colon = a.lastIndexOf(':');
        return colon > 0 && a.indexOf(':') == colon ? a.substring(0, colon) : a;
    }

    /**
     * The configuration of task {@code partition} of a barrier stage whose tasks run at {@code addresses} (in
     * partition order), with the store task 0 hosts at {@code port}. {@code env} gives the SDK's own settings
     * ({@code JCOMM_*}: timeout, backends, token file, ...); launcher variables in it are ignored, Spark is the
     * launcher. The store is the stage's (task 0's), never a rank's own.
     *
     * @throws IllegalArgumentException when the partition is not one of the tasks or the port is out of range
     */
    public static DistributedConfig config(int partition, List<String> addresses, int port, String jobId,
                                           Map<String, String> env) {
        int world = addresses.size();
        if (partition < 0 || partition >= world) {
            throw new IllegalArgumentException("partition " + partition + " is not one of the stage's " + world + " tasks");
        }
        if (port < 1 || port > 65535) {
            throw new IllegalArgumentException("store port out of range: " + port);
        }
        String mine = host(addresses.get(partition));
        int localRank = 0;
        int localWorld = 0;
        for (int i = 0; i < world; i++) {
            if (host(addresses.get(i)).equals(mine)) {
                if (i < partition) {
                    localRank++;
                }
                localWorld++;
            }
        }
        String master = host(addresses.get(0));
        Map<String, String> settings = new TreeMap<>();
        env.forEach((k, v) -> {
            if (k.startsWith("JCOMM_") && !k.equals(Settings.LAUNCHER.name()) && !k.equals(Settings.LAUNCHER_STORE.name())) {
                settings.put(k, v);
            }
        });
        LaunchInfo launch = LaunchInfo.builder("spark").flavour("barrier stage")
                .rank(partition, "BarrierTaskContext.partitionId()").worldSize(world, "getTaskInfos().length")
                .localRank(localRank, "tasks on this host, by partition").localWorldSize(localWorld, "tasks on this host")
                .masterAddr(master, "task 0's host").masterPort(port, "bound by task 0, shared by allGather")
                .jobId(jobId, "the stage").build();
        return DistributedConfig.fromEnvironment(settings).toBuilder().rank(partition).worldSize(world)
                .localRank(localRank).localWorldSize(localWorld).masterAddr(master).masterPort(port).launcherStore(true)
                .jobId(jobId).launch(launch).build();
    }
}
