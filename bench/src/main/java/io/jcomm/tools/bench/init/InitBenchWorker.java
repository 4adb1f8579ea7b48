package io.jcomm.tools.bench.init;

import io.jcomm.api.DistributedConfig;
import io.jcomm.api.store.Store;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.parallel.GroupCoordinator;
import io.jcomm.parallel.GroupListener;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelState;
import io.jcomm.parallel.ParallelStateOptions;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;

/**
 * One rank of {@link InitBenchCommand}: waits for {@code go <iteration> <port> <startNanos>} lines
 * on standard input, starts initialising at {@code startNanos} (on {@link System#nanoTime()}, which
 * on Linux is {@code CLOCK_MONOTONIC}, the same clock in every process of the host), and reports
 * on standard output when each phase was done:
 * {@code @@it <iteration> <rank> <start> <store> <world> <groups> <cpuNanos> <broadcasters>} (nanoTime values,
 * the CPU time the process used until the groups were ready, all threads, and when its broadcasters
 * were ready), then tears
 * everything down and prints {@code @@closed <iteration>}. Ends on {@code quit} or end of input.
 *
 * <p>Arguments: {@code <tp> <pp> <dp> <timeoutMillis> <tpMessageQueue> <concurrent> <oneStep>
 * <mqAcrossHostsOnly> <mqBackground> [cpu option key=value...]}.
 * The rank and world size come from the torchrun-style environment ({@code RANK}, {@code WORLD_SIZE},
 * {@code JCOMM_HOST_ID}).
 */
public final class InitBenchWorker {

    private InitBenchWorker() {
    }

    public static void main(String[] args) throws Exception {
        int tp = Integer.parseInt(args[0]);
        int pp = Integer.parseInt(args[1]);
        int dp = Integer.parseInt(args[2]);
        Duration timeout = Duration.ofMillis(Long.parseLong(args[3]));
        ParallelStateOptions options = ParallelStateOptions.builder().timeout(timeout)
                .tpMessageQueue(Boolean.parseBoolean(args[4]))
                .concurrentGroupCreation(Boolean.parseBoolean(args[5]))
                .build();
        boolean oneStep = Boolean.parseBoolean(args[6]);
        options = options.toBuilder().messageQueueAcrossHostsOnly(Boolean.parseBoolean(args[7]))
                .broadcasterInBackground(Boolean.parseBoolean(args[8])).build();
        for (int i = 9; i < args.length; i++) {
            int eq = args[i].indexOf('=');
            if (eq > 0) {
                options = options.toBuilder().cpuOption(args[i].substring(0, eq), args[i].substring(eq + 1)).build();
            }
        }
        List<String> created = Collections.synchronizedList(new ArrayList<>());
        long[] origin = {0};
        options = options.toBuilder().codec(ParallelStateOptions.defaultCodec()).listener(new GroupListener() {
            @Override
            public void created(GroupCoordinator g) {
                created.add(g.name() + "@" + String.format(Locale.ROOT, "%.2f", (System.nanoTime() - origin[0]) / 1e6));
            }
        }).build();
        ParallelStateOptions.defaultCodec().encode("warm"); // the codec is made once per process, as in an application
        com.sun.management.OperatingSystemMXBean os =
                (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();
        DistributedConfig base = DistributedConfig.fromEnvironment();
        System.out.println("@@ready " + base.rank());
        System.out.flush();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        String line;
        while ((line = in.readLine()) != null) {
            String[] f = line.trim().split(" ");
            if (f[0].equals("quit")) {
                break;
            }
            if (!f[0].equals("go")) {
                continue;
            }
            int iteration = Integer.parseInt(f[1]);
            int port = Integer.parseInt(f[2]);
            long startAt = Long.parseLong(f[3]);
            DistributedConfig config = base.toBuilder().masterPort(port).timeout(timeout).build();
            waitUntil(startAt);
            long cpu0 = os.getProcessCpuTime();
            long t0 = System.nanoTime();
            origin[0] = startAt;
            created.clear();
            Store store = TcpRendezvous.connect(config);
            long t1 = System.nanoTime();
            ParallelState ps;
            long t2;
            if (oneStep) {
                ps = ParallelState.initialize(config, store, options, ParallelSizes.of(tp, pp, dp));
                t2 = System.nanoTime();
            } else {
                ps = ParallelState.initialize(config, store, options);
                t2 = System.nanoTime();
                ps.initializeModelParallel(tp, pp, dp);
            }
            long t3 = System.nanoTime();
            long cpu = os.getProcessCpuTime() - cpu0;
            // broadcasters made in the background: until every one of this rank's is ready
            for (String name : ps.groups().names()) {
                GroupCoordinator g = ps.groups().get(name);
                if (g.hasBroadcaster() && g.awaitMessageQueue(timeout).isEmpty()) {
                    System.out.println("group " + name + ": no broadcaster");
                }
            }
            long t4 = System.nanoTime();
            System.out.println("@@it " + iteration + " " + config.rank() + " " + t0 + " " + t1 + " " + t2 + " " + t3 + " " + cpu
                    + " " + t4);
            System.out.println("groups ready (ms after start): " + created);
            System.out.flush();
            // everyone is ready before anyone tears down (rank 0's store goes with it)
            ps.world().barrier();
            ps.close();
            store.close();
            System.out.println("@@closed " + iteration);
            System.out.flush();
        }
    }

    private static void waitUntil(long at) {
        long left;
        while ((left = at - System.nanoTime()) > TimeUnit.MICROSECONDS.toNanos(300)) {
            LockSupport.parkNanos(left - TimeUnit.MICROSECONDS.toNanos(200));
        }
        while (at - System.nanoTime() > 0) {
            Thread.onSpinWait();
        }
    }
}
