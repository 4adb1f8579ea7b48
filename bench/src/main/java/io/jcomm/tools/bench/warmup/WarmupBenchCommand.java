package io.jcomm.tools.bench.warmup;

import io.jcomm.api.config.Settings;
import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import io.jcomm.tools.bench.WorkerJvms;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code commbench warmup}: what a fresh job's first small operations cost against its steady state. Two
 * worker JVMs (each on its own CPUs when they fit, as {@code commrun} binds them; {@code --cpu-bind none}
 * leaves placement to the scheduler) make a tcp group and at once run {@code --calls} operations; the p50
 * of the first {@code --first} and of the last {@code --first} are printed, per operation and size, with
 * their ratio.
 */
@Command(name = "warmup", mixinStandardHelpOptions = true,
        description = "p50 of a fresh job's first small operations against its steady state.")
public final class WarmupBenchCommand implements Callable<Integer> {

    @Option(names = "--ops", defaultValue = "allreduce,sendrecv", description = "allreduce and/or sendrecv (default ${DEFAULT-VALUE})")
    String ops;

    @Option(names = "--sizes", defaultValue = "1024", description = "bytes, comma-separated (default ${DEFAULT-VALUE})")
    String sizes;

    @Option(names = "--calls", defaultValue = "300000", description = "operations per run (default ${DEFAULT-VALUE})")
    int calls;

    @Option(names = "--first", defaultValue = "10000", description = "calls at each end compared (default ${DEFAULT-VALUE})")
    int first;

    @Option(names = "--runs", defaultValue = "1", description = "fresh jobs per operation and size (default ${DEFAULT-VALUE})")
    int runs;

    @Option(names = "--cpu-bind", defaultValue = "auto", description = "auto: each worker on its own CPUs, as commrun "
            + "binds workers that fit the CPUs; none: placement left to the scheduler (default ${DEFAULT-VALUE})")
    String cpuBind;

    @Option(names = "--jvm-arg", description = "extra worker JVM argument (repeatable)")
    List<String> jvmArgs = new ArrayList<>();

    @Override
    public Integer call() throws Exception {
        if (first < 1 || calls < 2 * first) {
            System.err.println("commbench warmup: --calls must be at least twice --first");
            return 2;
        }
        System.out.printf(Locale.ROOT, "# commbench warmup: 2 fresh worker JVMs per run (cpu binding %s), tcp group, %d "
                + "calls; p50 of the first %d against the last %d (us)%n", cpuBind, calls, first, first);
        System.out.printf(Locale.ROOT, "%-10s %8s %5s %12s %12s %8s%n", "op", "bytes", "run", "first p50", "steady p50",
                "ratio");
        int exit = 0;
        for (String op : ops.split(",")) {
            for (String size : sizes.split(",")) {
                for (int run = 1; run <= runs; run++) {
                    exit = Math.max(exit, run(op.trim(), Integer.parseInt(size.trim()), run));
                }
            }
        }
        return exit;
    }

    private List<String> pinned(int rank, List<String> cmd) {
        if (!cpuBind.equals("auto")) {
            return cmd;
        }
        List<String> c = new ArrayList<>(io.jcomm.tools.run.CpuBinding.prefix(rank, 2, io.jcomm.tools.run.CpuBinding.allowed(),
                io.jcomm.tools.run.CpuBinding.findTaskset()));
        c.addAll(cmd);
        return c;
    }

    private int run(String op, int bytes, int run) throws Exception {
        List<String> flags = new ArrayList<>(List.of("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"));
        flags.addAll(jvmArgs);
        List<String> cmd = WorkerJvms.javaCommand(flags, WarmupBenchWorker.class);
        cmd.addAll(List.of(op, Integer.toString(bytes), Integer.toString(calls), Integer.toString(first)));
        String[] result = new String[1];
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().port(0).build());
             WorkerJvms w = WorkerJvms.start(2, r -> pinned(r, cmd), server.port(), Map.of(Settings.LAUNCHER_STORE.name(), "1"),
                     (rank, line) -> {
                         if (line.startsWith("@@warmup ")) {
                             result[0] = line;
                         } else {
                             System.err.println("[rank " + rank + "] " + line);
                         }
                     }, "warmup-out")) {
            int exit = w.await(600, "commbench warmup");
            if (result[0] == null) {
                return 1;
            }
            String[] f = result[0].split(" ");
            double head = Long.parseLong(f[3]) / 1e3;
            double tail = Long.parseLong(f[4]) / 1e3;
            System.out.printf(Locale.ROOT, "%-10s %8d %5d %12.1f %12.1f %7.1fx%n", op, bytes, run, head, tail, head / tail);
            return exit;
        }
    }
}
