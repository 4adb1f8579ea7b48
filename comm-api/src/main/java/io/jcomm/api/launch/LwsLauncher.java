package io.jcomm.api.launch;

import java.util.Map;
import java.util.Optional;

/**
 * LeaderWorkerSet: each group of pods is one job; the leader is worker 0 and its address is in every
 * pod's {@code LWS_LEADER_ADDRESS}. One process per pod is one rank; a pod that runs several starts them
 * with {@code bin/commrun}, which reads the same variables as its node rank, node count and master.
 */
final class LwsLauncher implements Launcher {

    static final String LEADER = "LWS_LEADER_ADDRESS";
    static final String GROUP_SIZE = "LWS_GROUP_SIZE";
    static final String WORKER_INDEX = "LWS_WORKER_INDEX";

    @Override
    public String name() {
        return "lws";
    }

    @Override
    public Optional<LaunchInfo> detect(Map<String, String> environment) {
        Env env = new Env(environment);
        if (!env.has(LEADER) && !env.has(WORKER_INDEX)) {
            return Optional.empty();
        }
        LaunchInfo.Builder b = LaunchInfo.builder(name()).flavour("LeaderWorkerSet");
        int index = env.intOf(WORKER_INDEX, 0);
        int size = env.intOf(GROUP_SIZE, 1);
        if (index == LaunchInfo.UNKNOWN || size == LaunchInfo.UNKNOWN) {
            throw new IllegalArgumentException("a LeaderWorkerSet pod needs " + WORKER_INDEX + " and " + GROUP_SIZE);
        }
        if (index >= size) {
            throw new IllegalArgumentException(WORKER_INDEX + "=" + index + " is not below " + GROUP_SIZE + "=" + size);
        }
        b.rank(index, WORKER_INDEX).worldSize(size, GROUP_SIZE).localRank(0, "one process per pod")
                .localWorldSize(1, "one process per pod").nodeRank(index, WORKER_INDEX).nodeCount(size, GROUP_SIZE);
        if (env.has(LEADER)) {
            b.masterAddr(env.get(LEADER), LEADER).jobId("lws-" + env.get(LEADER), LEADER);
        } else {
            b.masterNote("no " + LEADER + ": set MASTER_ADDR to the leader pod's address");
        }
        return Optional.of(b.build());
    }
}
