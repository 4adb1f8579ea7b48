package io.jcomm.parallel.scale;

import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import io.jcomm.parallel.ParallelSizes;
import io.jcomm.parallel.ParallelState;
import io.jcomm.parallel.ParallelStateOptions;
import io.jcomm.testkit.RankThreads;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;

/**
 * One JVM of {@link ParallelStateScaleTest}: {@code n / jvms} thread ranks, each with its own store
 * client and {@link ParallelState}, all model-parallel groups made in one step. Prints one
 * {@code SCALE} line with this JVM's figures: the slowest rank's time until every group was ready,
 * the slowest first world barrier, the slowest pair of all-reduces that follows it (a world all-reduce,
 * small and large, then one in each TP group, their values checked), the sockets this JVM opened for its
 * groups (its ranks' store clients not counted) once every group was ready, after the barrier and after
 * the all-reduces, and the CPU time the JVM used until every group was ready.
 *
 * <p>Arguments: world size, number of JVMs, TP size, PP size, store port, timeout in seconds.
 */
public final class ScaleWorker {

    private ScaleWorker() {
    }

    public static void main(String[] args) {
        int n = Integer.parseInt(args[0]);
        int jvms = Integer.parseInt(args[1]);
        int tp = Integer.parseInt(args[2]);
        int pp = Integer.parseInt(args[3]);
        int port = Integer.parseInt(args[4]);
        Duration timeout = Duration.ofSeconds(Integer.parseInt(args[5]));
        int jvm = Integer.parseInt(System.getenv("RANK"));
        int per = n / jvms;
        ParallelStateOptions options = ParallelStateOptions.builder().tpMessageQueue(false).timeout(timeout)
                .cpuOption("tcp.shm.ringBytes", "65536").build();
        long socketsBefore = sockets();
        long[] readyNanos = new long[per];
        long[] barrierNanos = new long[per];
        long[] allReduceNanos = new long[per];
        try (RankThreads<ParallelState> ranks = new RankThreads<>(per)) {
            ranks.open(i -> {
                int rank = jvm * per + i;
                TcpStore store = TcpStore.connect(TcpStoreConfig.builder().host("127.0.0.1").port(port).timeout(timeout)
                        .connectTimeout(timeout).build());
                DistributedConfig dc = DistributedConfig.builder().rank(rank).worldSize(n).hostId("node-" + jvm)
                        .timeout(timeout).build();
                long t0 = System.nanoTime();
                ParallelState ps = ParallelState.initialize(dc, store, options, ParallelSizes.of(tp, pp, n / tp / pp));
                readyNanos[i] = System.nanoTime() - t0;
                return ps;
            }, timeout.plusSeconds(10));
            long socketsReady = sockets();
            long cpuReady = cpuMillis();
            System.out.println("READY jvm=" + jvm);
            ranks.call(i -> {
                long t0 = System.nanoTime();
                ranks.get(i).world().barrier();
                barrierNanos[i] = System.nanoTime() - t0;
                return null;
            }, timeout);
            long socketsBarrier = sockets();
            ranks.call(i -> {
                long t0 = System.nanoTime();
                allReduces(ranks.get(i), n, tp);
                allReduceNanos[i] = System.nanoTime() - t0;
                return null;
            }, timeout);
            long socketsAllReduce = sockets();
            System.out.println("SCALE jvm=" + jvm + " ranks=" + per + " readyMs=" + maxMillis(readyNanos) + " barrierMs="
                    + maxMillis(barrierNanos) + " allReduceMs=" + maxMillis(allReduceNanos) + " socketsReady="
                    + (socketsReady - socketsBefore - per) + " socketsBarrier=" + (socketsBarrier - socketsBefore - per)
                    + " socketsAllReduce=" + (socketsAllReduce - socketsBefore - per) + " cpuMs=" + cpuReady);
        }
    }

    /** Elements of the large world all-reduce: above {@code tcp.smallBytes} (64 KiB), so it takes the ring. */
    private static final int LARGE = 20_000;

    /**
     * A small and a large world all-reduce (every rank adds its global rank to each element) and a TP
     * all-reduce (its rank in the TP group); fails with {@link AssertionError} on a wrong value.
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
            throw new AssertionError(what + ": " + got + " instead of " + want);
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
        return ProcessHandle.current().info().totalCpuDuration().map(java.time.Duration::toMillis).orElse(-1L);
    }

    /** Open sockets of this process (Linux; -1 elsewhere). */
    static long sockets() {
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
}
