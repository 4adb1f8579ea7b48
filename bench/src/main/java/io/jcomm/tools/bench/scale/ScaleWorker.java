package io.jcomm.tools.bench.scale;

import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelState;
import io.jcomm.parallel.ParallelStateOptions;
import io.jcomm.tools.bench.ParentWatch;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.IntConsumer;
import java.util.stream.Stream;

/**
 * One JVM of a scale run ({@link ScaleRun}): {@code n / jvms} thread ranks, each on a thread of its own
 * with its own store client and {@link ParallelState}, all groups (world, TP, PP, DP, EP) made in one step
 * ({@code ParallelState.initialize(..., ParallelSizes)}). Then the first world barrier, then a world
 * all-reduce, small and large, and one in each TP group, their values checked. Prints one line,
 * {@link ScaleRow.Jvm#toLine()}: the slowest rank's time until every group was ready, the slowest first
 * world barrier, the slowest set of all-reduces, the sockets this JVM opened for its groups (its ranks'
 * store clients not counted) once every group was ready, after the barrier and after the all-reduces, and
 * the CPU time the JVM used until every group was ready (JVM start included). Then closes every rank.
 *
 * <p>Arguments: world size, number of JVMs, TP size, PP size, store port, timeout in seconds; this JVM's
 * index comes from {@code RANK}, each JVM being a host of its own ({@code node-<index>}). A rank that
 * fails, or a step that outlives the timeout, ends the JVM at once with exit code 1 after printing why;
 * the JVM also halts when its launcher goes away ({@link ParentWatch}).
 */
public final class ScaleWorker {

    /** Elements of the large world all-reduce: above {@code tcp.smallBytes} (64 KiB), so it takes the ring. */
    private static final int LARGE = 20_000;

    /** How the line that says why a worker failed begins. */
    static final String FAILED = "commbench scale worker failed: ";

    private ScaleWorker() {
    }

    /**
     * Runs this JVM's ranks.
     *
     * @param args world size, JVMs, TP size, PP size, store port, timeout in seconds
     */
    public static void main(String[] args) {
        ParentWatch.start(3);
        try {
            run(args);
        } catch (Throwable t) {
            StringBuilder why = new StringBuilder(t.toString());
            for (Throwable c = t.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
                why.append(" <- ").append(c); // the root cause in the one line the run reports
            }
            System.out.println(FAILED + why);
            t.printStackTrace(System.out);
            System.out.flush();
            io.jcomm.runtime.recorder.FlightRecorder.releaseFile(); // halt skips the hook that removes it
            Runtime.getRuntime().halt(1);
        }
        System.exit(0);
    }

    private static void run(String[] args) {
        int n = Integer.parseInt(args[0]);
        int jvms = Integer.parseInt(args[1]);
        int tp = Integer.parseInt(args[2]);
        int pp = Integer.parseInt(args[3]);
        int port = Integer.parseInt(args[4]);
        Duration timeout = Duration.ofSeconds(Long.parseLong(args[5]));
        int jvm = Integer.parseInt(System.getenv("RANK"));
        int per = n / jvms;
        ParallelStateOptions options = ParallelStateOptions.builder().tpMessageQueue(false).timeout(timeout)
                .cpuOption("tcp.shm.ringBytes", "65536").build();
        long socketsBefore = sockets();
        long[] readyNanos = new long[per];
        long[] barrierNanos = new long[per];
        long[] allReduceNanos = new long[per];
        ParallelState[] states = new ParallelState[per];
        ExecutorService[] threads = new ExecutorService[per];
        for (int i = 0; i < per; i++) {
            int rank = jvm * per + i;
            threads[i] = Executors.newSingleThreadExecutor(r -> {
                Thread t = new Thread(r, "rank-" + rank);
                t.setDaemon(true);
                return t;
            });
        }
        onEveryRank(threads, i -> {
            int rank = jvm * per + i;
            TcpStore store = TcpStore.connect(TcpStoreConfig.builder().host("127.0.0.1").port(port).timeout(timeout)
                    .connectTimeout(timeout).build());
            DistributedConfig dc = DistributedConfig.builder().rank(rank).worldSize(n).hostId("node-" + jvm)
                    .timeout(timeout).build();
            long t0 = System.nanoTime();
            states[i] = ParallelState.initialize(dc, store, options, ParallelSizes.of(tp, pp, n / tp / pp));
            readyNanos[i] = System.nanoTime() - t0;
        }, timeout.plusSeconds(10), "initialize");
        long socketsReady = sockets();
        long cpuReady = cpuMillis();
        onEveryRank(threads, i -> {
            long t0 = System.nanoTime();
            states[i].world().barrier();
            barrierNanos[i] = System.nanoTime() - t0;
        }, timeout, "the first world barrier");
        long barrierDone = System.currentTimeMillis();
        long socketsBarrier = sockets();
        onEveryRank(threads, i -> {
            long t0 = System.nanoTime();
            allReduces(states[i], n, tp);
            allReduceNanos[i] = System.nanoTime() - t0;
        }, timeout, "the all-reduces");
        long socketsAllReduce = sockets();
        ScaleRow.Jvm report = new ScaleRow.Jvm(jvm, per, maxMillis(readyNanos), maxMillis(barrierNanos),
                maxMillis(allReduceNanos), opened(socketsReady, socketsBefore, per),
                opened(socketsBarrier, socketsBefore, per), opened(socketsAllReduce, socketsBefore, per), cpuReady, barrierDone);
        System.out.println(report.toLine());
        System.out.flush();
        close(threads, states); // on a failure main halts instead: the peers are broken anyway
    }

    /** Sockets opened since {@code before}, less the ranks' store clients; -1 where unknown. */
    private static long opened(long now, long before, int storeClients) {
        return now < 0 || before < 0 ? -1 : now - before - storeClients;
    }

    /**
     * Runs {@code step} for every rank on that rank's thread and waits for all, at most {@code timeout}.
     * Throws at the first rank that fails, or naming the ranks still running at the deadline with their
     * stacks.
     */
    private static void onEveryRank(ExecutorService[] threads, IntConsumer step, Duration timeout, String what) {
        List<Future<?>> fs = new ArrayList<>(threads.length);
        for (int i = 0; i < threads.length; i++) {
            int ii = i;
            fs.add(threads[i].submit(() -> step.accept(ii)));
        }
        long end = System.nanoTime() + timeout.toNanos();
        while (true) {
            List<Integer> running = new ArrayList<>();
            for (int i = 0; i < fs.size(); i++) {
                Future<?> f = fs.get(i);
                if (!f.isDone()) {
                    running.add(i);
                    continue;
                }
                try {
                    f.get();
                } catch (ExecutionException e) {
                    throw new IllegalStateException("thread rank " + i + " of this JVM failed in " + what, e.getCause());
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new IllegalStateException("interrupted in " + what, e);
                }
            }
            if (running.isEmpty()) {
                return;
            }
            if (System.nanoTime() - end > 0) {
                throw new IllegalStateException("thread ranks " + running + " of this JVM did not finish " + what
                        + " within " + timeout + "\n" + stacks());
            }
            try {
                fs.get(running.get(0)).get(20, TimeUnit.MILLISECONDS);
            } catch (ExecutionException | TimeoutException e) {
                // looked at on the next round
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted in " + what, e);
            }
        }
    }

    /** Closes every rank's state on its own thread, all at once (closes are collective), 30 s at most. */
    private static void close(ExecutorService[] threads, ParallelState[] states) {
        List<Future<?>> fs = new ArrayList<>();
        for (int i = 0; i < threads.length; i++) {
            ParallelState ps = states[i];
            if (ps != null) {
                fs.add(threads[i].submit(() -> {
                    ps.close();
                    return null;
                }));
            }
        }
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        for (Future<?> f : fs) {
            try {
                f.get(Math.max(1, end - System.nanoTime()), TimeUnit.NANOSECONDS);
            } catch (ExecutionException | TimeoutException e) {
                // best effort: the figures are printed; the JVM ends anyway
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        for (ExecutorService t : threads) {
            t.shutdownNow();
        }
    }

    /**
     * A small and a large world all-reduce (every rank adds its global rank to each element) and a TP
     * all-reduce (its rank in the TP group); fails with {@link IllegalStateException} on a wrong value.
     */
    private static void allReduces(ParallelState ps, int n, int tp) {
        int rank = ps.rank();
        Tensor small = Tensor.ofLongs(rank, 1);
        ps.world().cpuGroup().allReduce(small, ReduceOp.SUM);
        check(small.toDoubleArray()[0], (double) n * (n - 1) / 2, "world all-reduce");
        check(small.toDoubleArray()[1], n, "world all-reduce");
        Tensor large = Tensor.allocate(DType.F32, LARGE);
        for (int i = 0; i < LARGE; i++) {
            large.buffer().putFloat(4 * i, rank + (i & 7));
        }
        ps.world().cpuGroup().allReduce(large, ReduceOp.SUM);
        for (int i = 0; i < LARGE; i++) {
            check(large.buffer().getFloat(4 * i), (double) n * (n - 1) / 2 + (double) n * (i & 7), "large world all-reduce");
        }
        Tensor t = Tensor.ofLongs(ps.tp().rankInGroup());
        ps.tp().allReduce(t, ReduceOp.SUM);
        check(t.toDoubleArray()[0], (double) tp * (tp - 1) / 2, "TP all-reduce");
    }

    private static void check(double got, double want, String what) {
        if (got != want) {
            throw new IllegalStateException(what + ": " + got + " instead of " + want);
        }
    }

    private static long maxMillis(long[] nanos) {
        long max = 0;
        for (long v : nanos) {
            max = Math.max(max, v);
        }
        return max / 1_000_000;
    }

    /** CPU time of this process so far (all threads, JVM start included), or -1 where unknown. */
    private static long cpuMillis() {
        return ProcessHandle.current().info().totalCpuDuration().map(Duration::toMillis).orElse(-1L);
    }

    /** Open sockets of this process (Linux; -1 elsewhere). */
    private static long sockets() {
        Path fd = Path.of("/proc/self/fd");
        if (!Files.isDirectory(fd)) {
            return -1;
        }
        try (Stream<Path> s = Files.list(fd)) {
            List<Path> all = s.toList();
            long n = 0;
            for (Path p : all) {
                try {
                    if (Files.readSymbolicLink(p).toString().startsWith("socket:")) {
                        n++;
                    }
                } catch (IOException e) {
                    // closed meanwhile
                }
            }
            return n;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Stack traces of the rank threads and the SDK's own ({@code jcomm-}) threads, for a timeout's message. */
    private static String stacks() {
        return io.jcomm.runtime.ThreadStacks.of("rank-", "jcomm-");
    }
}
