package io.jcomm.parallel.scale;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import io.jcomm.testkit.MultiJvm;
import java.time.Duration;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Scale of group creation: {@link io.jcomm.parallel.ParallelState} with N thread ranks spread over 4
 * JVMs (TP8 × PP4 × DP) on one jcomm store server; every rank makes all its groups in one step and
 * then joins a world barrier. Prints the table of docs/PERFORMANCE.md ("Scale of group creation"):
 * time until every group of every rank is ready, sockets per rank, store commands per rank and the
 * first world barrier.
 *
 * <p>N is 256 by default (CI); {@code -Djcomm.scale.ranks=1024} runs another size, a multiple of 128.
 */
class ParallelStateScaleTest {

    private static final int JVMS = 4;
    private static final int TP = 8;
    private static final int PP = 4;
    private static final Pattern LINE = Pattern.compile(
            "SCALE jvm=(\\d+) ranks=(\\d+) readyMs=(\\d+) barrierMs=(\\d+) allReduceMs=(\\d+) socketsReady=(-?\\d+) "
            + "socketsBarrier=(-?\\d+) socketsAllReduce=(-?\\d+) cpuMs=(-?\\d+)");

    /** One row of the table. */
    record Row(int n, long readyMs, long barrierMs, long allReduceMs, double socketsReady, double socketsBarrier,
               double socketsAllReduce, double storeOps, double cpuMsPerRank) {
        @Override
        public String toString() {
            return String.format(Locale.ROOT, "| %5d | %6d | %6.1f | %6.1f | %6.1f | %6.1f | %6d | %6d | %6.1f |", n, readyMs,
                    socketsReady, socketsBarrier, socketsAllReduce, storeOps, barrierMs, allReduceMs, cpuMsPerRank);
        }
    }

    static Row run(int n, Duration timeout) {
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().name("scale")
                .maxPendingConnections(4 * n).build())) {
            long commandsBefore = server.stats().commands();
            try (MultiJvm job = MultiJvm.builder().name("scale-" + n).worldSize(JVMS).mainClass(ScaleWorker.class)
                    .args(Integer.toString(n), Integer.toString(JVMS), Integer.toString(TP), Integer.toString(PP),
                            Integer.toString(server.port()), Long.toString(timeout.toSeconds()))
                    .maxHeap("1g").jvmArg("-Xss512k").jvmArg("-XX:MaxDirectMemorySize=6g").deadline(timeout.plusSeconds(30)).start()) {
                MultiJvm.Results r = job.awaitAll();
                r.assertAllSucceeded();
                long ready = 0;
                long barrier = 0;
                long allReduce = 0;
                double socketsReady = 0;
                double socketsBarrier = 0;
                double socketsAllReduce = 0;
                double cpu = 0;
                for (int jvm = 0; jvm < JVMS; jvm++) {
                    List<String> lines = r.linesContaining(jvm, "SCALE jvm=");
                    assertEquals(1, lines.size(), String.join("\n", r.output(jvm)));
                    Matcher m = LINE.matcher(lines.get(0));
                    assertTrue(m.find(), lines.get(0));
                    ready = Math.max(ready, Long.parseLong(m.group(3)));
                    barrier = Math.max(barrier, Long.parseLong(m.group(4)));
                    allReduce = Math.max(allReduce, Long.parseLong(m.group(5)));
                    socketsReady += Long.parseLong(m.group(6));
                    socketsBarrier += Long.parseLong(m.group(7));
                    socketsAllReduce += Long.parseLong(m.group(8));
                    cpu += Long.parseLong(m.group(9));
                }
                long commands = server.stats().commands() - commandsBefore;
                return new Row(n, ready, barrier, allReduce, socketsReady / n, socketsBarrier / n, socketsAllReduce / n,
                        (double) commands / n, cpu / n);
            }
        }
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void groupsOfThreadRanksOverFourJvms() {
        int n = Integer.getInteger("jcomm.scale.ranks", 256);
        Row row = run(n, Duration.ofSeconds(120));
        System.out.println("|     N | ready ms | sockets/rank ready | sockets/rank after barrier | sockets/rank after "
                + "all-reduces | store ops/rank | barrier ms | all-reduces ms | CPU ms/rank |");
        System.out.println(row);
        // at creation a group of at most 16 ranks has its full mesh, a larger one at most 2 ceil(log2 size)
        // links (its barrier's and object all-gather's peers) and its listener; the world and TP all-reduces
        // keep to the same links
        io.jcomm.parallel.RankLayout l = io.jcomm.parallel.RankLayout.of(n, TP, PP, n / TP / PP);
        int bound = 0;
        for (List<List<Integer>> groups : List.of(List.of(l.ranks()), l.tpGroups(), l.ppGroups(), l.dpGroups(), l.epGroups())) {
            int size = groups.get(0).size();
            bound += size <= 16 ? size - 1 : 2 * (32 - Integer.numberOfLeadingZeros(size - 1)) + 1;
        }
        assertTrue(row.socketsReady() <= bound, row + " vs at most " + bound);
        assertTrue(row.socketsAllReduce() <= bound, row + " vs at most " + bound + " after the all-reduces");
    }
}
