package io.jcomm.cpu.testkit;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.store.Store;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import java.time.Duration;

/**
 * Shared start-up of the multi-JVM workers. Arguments: {@code <backend> <timeoutMillis> [key=value...]};
 * the rank, world size and store address come from the torchrun-style environment that
 * {@link io.jcomm.testkit.MultiJvm} sets.
 */
final class WorkerSupport {

    private WorkerSupport() {
    }

    static CpuGroupOptions options(String[] args, DistributedConfig cfg, Store store, String group, int firstOption) {
        CpuGroupOptions.Builder b = CpuGroupOptions.builder().store(store).groupName(group).rank(cfg.rank())
                .size(cfg.worldSize()).backend(args[0]).timeout(Duration.ofMillis(Long.parseLong(args[1])))
                .codec(CpuGroupCases.codec());
        for (int i = firstOption; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq > 0) {
                b.option(args[i].substring(0, eq), args[i].substring(eq + 1));
            }
        }
        return b.build();
    }

    static ProcessGroup create(String[] args, DistributedConfig cfg, Store store, String group, int firstOption) {
        return CpuGroups.create(options(args, cfg, store, group, firstOption));
    }

    static String oneLine(Throwable t) {
        return (t.getClass().getSimpleName() + ": " + t.getMessage()).replace('\n', ' ').replace('\r', ' ');
    }
}
