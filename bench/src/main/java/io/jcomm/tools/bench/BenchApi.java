package io.jcomm.tools.bench;

import java.util.Locale;

/**
 * Which API a {@code commbench} run calls: the {@link io.jcomm.api.ProcessGroup} of one CPU backend
 * (c10d's level), or a {@link io.jcomm.parallel.GroupCoordinator} (vLLM's level), whose own routes
 * (node-local channel, shared-memory message queue, CPU group) are then what is measured.
 */
public enum BenchApi {
    PROCESS_GROUP,
    COORDINATOR;

    public String cliName() {
        return name().toLowerCase(Locale.ROOT).replace('_', '-');
    }

    public static BenchApi parse(String s) {
        String t = s.trim().toUpperCase(Locale.ROOT).replace('-', '_');
        for (BenchApi a : values()) {
            if (a.name().equals(t)) {
                return a;
            }
        }
        throw new IllegalArgumentException("unknown --api '" + s.trim() + "' (process-group or coordinator)");
    }

    /**
     * Whether {@code op} has a counterpart in this API: a {@code GroupCoordinator} has no scatter and no
     * plain all-to-all (its all-to-all is MoE dispatch/combine).
     */
    public boolean supports(BenchOp op) {
        if (this == PROCESS_GROUP) {
            return true;
        }
        return op != BenchOp.SCATTER && op != BenchOp.ALLTOALL && op != BenchOp.ALLTOALLV;
    }
}
