package io.jcomm.api.launch;

import io.jcomm.api.config.Settings;
import java.util.Map;
import java.util.Optional;

/**
 * torchrun's variables, set by torchrun, {@code bin/commrun}, a Kubeflow PyTorchJob or by hand:
 * {@code RANK}, {@code WORLD_SIZE}, {@code LOCAL_RANK}, {@code LOCAL_WORLD_SIZE}, {@code GROUP_RANK} and
 * {@code GROUP_WORLD_SIZE} (the node of a per-node launcher), {@code MASTER_ADDR}, {@code MASTER_PORT},
 * {@code TORCHELASTIC_RUN_ID}. Detected when any of them is set; it names a rank only with {@code RANK}
 * (the others alone are settings that fill in or check what a scheduler says).
 */
final class TorchrunLauncher implements Launcher {

    static final String RANK = Settings.RANK.name();
    static final String WORLD_SIZE = Settings.WORLD_SIZE.name();
    static final String LOCAL_RANK = Settings.LOCAL_RANK.name();
    static final String LOCAL_WORLD_SIZE = Settings.LOCAL_WORLD_SIZE.name();
    static final String GROUP_RANK = "GROUP_RANK";
    static final String GROUP_WORLD_SIZE = "GROUP_WORLD_SIZE";
    static final String MASTER_ADDR = Settings.MASTER_ADDR.name();
    static final String MASTER_PORT = Settings.MASTER_PORT.name();
    static final String RUN_ID = Settings.TORCHELASTIC_RUN_ID.name();

    @Override
    public String name() {
        return "torchrun";
    }

    @Override
    public Optional<LaunchInfo> detect(Map<String, String> environment) {
        Env env = new Env(environment);
        if (env.firstSet(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK, GROUP_WORLD_SIZE, MASTER_ADDR,
                MASTER_PORT, RUN_ID) == null) {
            return Optional.empty();
        }
        LaunchInfo.Builder b = LaunchInfo.builder(name());
        if (env.has(RANK)) {
            b.rank(env.intOf(RANK, 0), RANK);
        }
        if (env.has(WORLD_SIZE)) {
            b.worldSize(env.intOf(WORLD_SIZE, 1), WORLD_SIZE);
        }
        if (env.has(LOCAL_RANK)) {
            b.localRank(env.intOf(LOCAL_RANK, 0), LOCAL_RANK);
        }
        if (env.has(LOCAL_WORLD_SIZE)) {
            b.localWorldSize(env.intOf(LOCAL_WORLD_SIZE, 1), LOCAL_WORLD_SIZE);
        }
        if (env.has(GROUP_RANK)) {
            b.nodeRank(env.intOf(GROUP_RANK, 0), GROUP_RANK);
        }
        if (env.has(GROUP_WORLD_SIZE)) {
            b.nodeCount(env.intOf(GROUP_WORLD_SIZE, 1), GROUP_WORLD_SIZE);
        }
        if (env.has(MASTER_ADDR)) {
            b.masterAddr(env.get(MASTER_ADDR), MASTER_ADDR);
        }
        if (env.has(MASTER_PORT)) {
            int port = env.intOf(MASTER_PORT, 0);
            if (port > 65535) {
                throw new IllegalArgumentException(MASTER_PORT + " out of range: " + port);
            }
            b.masterPort(port, MASTER_PORT);
        }
        if (env.has(RUN_ID)) {
            b.jobId(env.get(RUN_ID), RUN_ID);
        }
        return Optional.of(b.build());
    }
}
