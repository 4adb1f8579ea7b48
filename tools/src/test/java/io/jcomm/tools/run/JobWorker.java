package io.jcomm.tools.run;

import io.jcomm.api.DistributedConfig;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Worker of the commrun tests; the first argument picks the behaviour:
 * <ul>
 *   <li>{@code env}: prints the torchrun/JCOMM variables, meets the others in the launcher's store
 *       (rank 0 must not host one) and exits 0;</li>
 *   <li>{@code fail RANK CODE}: rank RANK exits with CODE after the others are up; the others wait;</li>
 *   <li>{@code term}: prints its pid, says "TERM" in a shutdown hook and sleeps;</li>
 *   <li>{@code litter}: leaves shared-memory files behind (one named with its pid, one only mapped)
 *       and a child process, then exits 0;</li>
 *   <li>{@code stall RANK STEP MILLIS [TIMEOUT_MS]}: all-reduces over a tcp group (set up within 60 s;
 *       each all-reduce within 60 s or TIMEOUT_MS); rank RANK stops before all-reduce #STEP, sleeps MILLIS and
 *       exits 3;</li>
 *   <li>{@code top RANK STEP STOPFILE}: all-reduces over a parallel state's world group (registered in
 *       the host's job registry); rank RANK stops before all-reduce #STEP until STOPFILE exists, then exits 3;</li>
 *   <li>{@code native}: prints whether Netty's epoll transport loaded, the file its library was mapped
 *       from and the library path;</li>
 *   <li>{@code jar}: prints the jar it was started from, its class path and whether Agrona's buffers work;</li>
 *   <li>{@code jit}: prints the JVM's {@code CompileThresholdScaling};</li>
 *   <li>{@code sleep}: prints "READY" and sleeps.</li>
 *   <li>{@code replace F CODE MS [again]}: rank F exits with CODE, the others work MS ms and exit 0; a restarted
 *       process says so (and with {@code again} fails like the first); a spare waits until the launcher says the
 *       job is over.</li>
 * </ul>
 */
public final class JobWorker {

    private JobWorker() {
    }

    public static void main(String[] args) throws Exception {
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        switch (args[0]) {
            case "env": {
                Map<String, String> shown = new TreeMap<>();
                for (String k : List.of("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR",
                        "MASTER_PORT", "GROUP_RANK", "JCOMM_LAUNCHER_STORE", "JCOMM_TOKEN_FILE", "JCOMM_TEST_MARK",
                        "GLIBC_TUNABLES")) {
                    shown.put(k, String.valueOf(System.getenv(k)));
                }
                System.out.println("ENV " + shown);
                System.out.println("ARGS " + String.join(" ", List.of(args).subList(1, args.length)));
                try (TcpStore store = TcpRendezvous.connect(cfg)) {
                    store.add("up", 1);
                    long deadline = System.nanoTime() + 30_000_000_000L;
                    while (store.add("up", 0) < cfg.worldSize() && System.nanoTime() < deadline) {
                        Thread.sleep(5);
                    }
                    System.out.println("MET " + store.add("up", 0));
                }
                System.err.println("bye from " + cfg.rank());
                return;
            }
            case "fail": {
                int failing = Integer.parseInt(args[1]);
                int code = Integer.parseInt(args[2]);
                try (TcpStore store = TcpRendezvous.connect(cfg)) {
                    store.add("up", 1);
                    long deadline = System.nanoTime() + 30_000_000_000L;
                    while (store.add("up", 0) < cfg.worldSize() && System.nanoTime() < deadline) {
                        Thread.sleep(5);
                    }
                }
                System.out.println("READY");
                if (cfg.rank() == failing) {
                    System.out.println("failing with " + code);
                    System.exit(code);
                }
                Thread.sleep(120_000);
                return;
            }
            case "term": {
                Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                    System.out.println("TERM " + ProcessHandle.current().pid());
                    System.out.flush();
                }));
                System.out.println("READY " + ProcessHandle.current().pid());
                Thread.sleep(120_000);
                return;
            }
            case "litter": {
                Path shm = Path.of(args[1]);
                long pid = ProcessHandle.current().pid();
                Files.writeString(shm.resolve("jcomm-test-r" + cfg.rank() + "-" + pid + "-named"), "x", StandardCharsets.UTF_8);
                Path mapped = shm.resolve("jcomm-test-mapped-" + args[2] + "-r" + cfg.rank());
                try (FileChannel fc = FileChannel.open(mapped, StandardOpenOption.CREATE, StandardOpenOption.READ,
                        StandardOpenOption.WRITE)) {
                    fc.map(FileChannel.MapMode.READ_WRITE, 0, 4096).put(0, (byte) 1);
                }
                Process child = new ProcessBuilder("sleep", "300").start();
                System.out.println("CHILD " + child.pid());
                Thread.sleep(1500); // long enough for the launcher to see the mapping and the child
                return;
            }
            case "stall": {
                // all-reduces over a tcp world group; rank STALLING stops before all-reduce #STEP (sleeps,
                // then exits 3), so the others wait inside it
                int stalling = Integer.parseInt(args[1]);
                int step = Integer.parseInt(args[2]);
                java.time.Duration timeout = java.time.Duration.ofMillis(args.length > 4 ? Long.parseLong(args[4]) : 60_000);
                try (TcpStore store = TcpRendezvous.connect(cfg);
                     io.jcomm.api.ProcessGroup g = io.jcomm.cpu.CpuGroups.create(io.jcomm.cpu.CpuGroupOptions.builder()
                             .store(store).rank(cfg.rank()).size(cfg.worldSize()).backend("tcp").groupName("world")
                             .timeout(java.time.Duration.ofSeconds(60)).build())) {
                    for (int i = 1; ; i++) {
                        if (i == step && cfg.rank() == stalling) {
                            System.out.println("STALLING before allReduce #" + i);
                            Thread.sleep(Long.parseLong(args[3]));
                            System.exit(3);
                        }
                        g.allReduce(io.jcomm.api.Tensor.ofFloats(1), io.jcomm.api.ReduceOp.SUM, timeout);
                    }
                }
            }
            case "top": {
                // a parallel state (so the rank registers in the host's job registry); all-reduces over its
                // world group; rank STALLING stops before all-reduce #STEP until STOPFILE exists (60 s at
                // most), then exits 3, so the others wait inside it
                int stalling = Integer.parseInt(args[1]);
                int step = Integer.parseInt(args[2]);
                Path stop = Path.of(args[3]);
                try (io.jcomm.parallel.ParallelState ps = io.jcomm.parallel.ParallelState.initialize(cfg)) {
                    for (int i = 1; ; i++) {
                        if (i == step && cfg.rank() == stalling) {
                            System.out.println("STALLING before allReduce #" + i);
                            long end = System.nanoTime() + 60_000_000_000L;
                            while (!Files.exists(stop) && System.nanoTime() < end) {
                                Thread.sleep(20);
                            }
                            System.exit(3);
                        }
                        ps.world().allReduce(io.jcomm.api.Tensor.ofFloats(1), io.jcomm.api.ReduceOp.SUM);
                    }
                }
            }
            case "native": {
                // Netty's first attempt, System.loadLibrary, finds the launcher's copy: no temporary file
                boolean epoll = io.netty.channel.epoll.Epoll.isAvailable();
                String mapped = Files.readAllLines(Path.of("/proc/self/maps")).stream()
                        .filter(l -> l.contains("libnetty_transport_native_epoll")).map(l -> l.substring(l.indexOf('/')))
                        .findFirst().orElse("none");
                System.out.println("NATIVE " + epoll + " " + mapped + " " + System.getProperty("java.library.path"));
                return;
            }
            case "jar": {
                String command = System.getProperty("sun.java.command");
                System.out.println("JAR " + command.substring(0, command.indexOf(' ')));
                System.out.println("CLASSPATH " + System.getProperty("java.class.path"));
                // the manifest's Add-Exports: Agrona's way into jdk.internal.misc
                System.out.println("UNSAFE " + (org.agrona.UnsafeApi.class.getName() != null
                        && org.agrona.concurrent.UnsafeBuffer.class.getName() != null
                        && new org.agrona.concurrent.UnsafeBuffer(new byte[8]).getLong(0) == 0));
                return;
            }
            case "jit": {
                // the value the JVM took (the last of the flag's occurrences on the command line)
                com.sun.management.HotSpotDiagnosticMXBean hs = java.lang.management.ManagementFactory
                        .getPlatformMXBean(com.sun.management.HotSpotDiagnosticMXBean.class);
                System.out.println("SCALING " + hs.getVMOption("CompileThresholdScaling").getValue());
                return;
            }
            case "lose": {
                // args: comma-separated failing ranks, their exit code, how long the others work (ms) before exit 0
                java.util.Set<Integer> failing = new java.util.HashSet<>();
                for (String r : args[1].split(",")) {
                    failing.add(Integer.parseInt(r));
                }
                System.out.println("READY");
                if (failing.contains(cfg.rank())) {
                    Thread.sleep(100L * cfg.rank()); // one after the other
                    System.out.println("failing with " + args[2]);
                    System.exit(Integer.parseInt(args[2]));
                }
                Thread.sleep(Long.parseLong(args[3]));
                System.out.println("done");
                return;
            }
            case "replace": {
                int code = Integer.parseInt(args[2]);
                if (cfg.role() == DistributedConfig.Role.SPARE) {
                    try (TcpStore store = TcpRendezvous.connect(cfg, TcpRendezvous.Options.builder().hostServer(false)
                            .declareMember(false).build())) {
                        System.out.println("SPARE WAITING");
                        long deadline = System.nanoTime() + 30_000_000_000L;
                        while (!store.check(List.of(DistributedConfig.LAUNCHER_DONE_KEY)) && System.nanoTime() < deadline) {
                            Thread.sleep(5);
                        }
                        System.out.println(store.check(List.of(DistributedConfig.LAUNCHER_DONE_KEY)) ? "SPARE TOLD"
                                : "SPARE NOT TOLD");
                    }
                    return;
                }
                if (cfg.role() == DistributedConfig.Role.RESTARTED) {
                    System.out.println("RESTARTED " + cfg.rank() + " count " + System.getenv("TORCHELASTIC_RESTART_COUNT")
                            + " recovery " + cfg.recovery());
                    if (args.length > 4 && args[4].equals("again")) {
                        System.exit(code);
                    }
                } else if (cfg.rank() == Integer.parseInt(args[1])) {
                    System.out.println("failing with " + code);
                    System.exit(code);
                }
                Thread.sleep(Long.parseLong(args[3]));
                System.out.println("done");
                return;
            }
            case "cpus": {
                for (String line : java.nio.file.Files.readAllLines(java.nio.file.Path.of("/proc/self/status"))) {
                    if (line.startsWith("Cpus_allowed_list:")) {
                        System.out.println("CPUS " + line.substring(line.indexOf(':') + 1).trim());
                    }
                }
                return;
            }
            case "sleep": {
                System.out.println("READY " + ProcessHandle.current().pid());
                Thread.sleep(120_000);
                return;
            }
            default:
                throw new IllegalArgumentException(args[0]);
        }
    }
}
