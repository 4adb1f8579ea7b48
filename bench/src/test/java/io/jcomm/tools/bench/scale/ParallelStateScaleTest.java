package io.jcomm.tools.bench.scale;

import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.parallel.RankLayout;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Scale of group creation: {@link io.jcomm.parallel.ParallelState} with N thread ranks spread over 4
 * JVMs (TP8 × PP4 × DP) on one jcomm store server, run as {@code commbench scale} runs it
 * ({@link ScaleRun}); every rank makes all its groups in one step, then joins a world barrier and a few
 * all-reduces (their values checked). Prints the row of docs/PERFORMANCE.md ("Scale of group creation")
 * and checks the sockets per rank against the bound of the tcp backend's lazy links, and against 2 log2 N at
 * creation.
 *
 * <p>N is 256 by default (CI); {@code -Djcomm.scale.ranks=1024} runs another size, a multiple of 128.
 */
class ParallelStateScaleTest {

    private static final int JVMS = 4;
    private static final int TP = 8;
    private static final int PP = 4;

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void groupsOfThreadRanksOverFourJvms() throws Exception {
        int n = Integer.getInteger("jcomm.scale.ranks", 256);
        ScaleRow row = new ScaleRun(n, JVMS, TP, PP, Duration.ofSeconds(120), List.of())
                .run((jvm, line) -> System.out.println("[scale-" + n + " jvm " + jvm + "] " + line));
        System.out.println(ScaleRow.header());
        System.out.println(row.toTableRow());
        int bound = socketBound(n, TP, PP);
        // at creation a rank links its same-host TP group only (a group across hosts connects on first use)
        int log2 = ceilLog2(n);
        assertTrue(row.socketsReady() <= 2 * log2, row + " vs at most 2 log2 N = " + 2 * log2 + " at creation");
        assertTrue(row.socketsReady() <= bound, row + " vs at most " + bound);
        assertTrue(row.socketsAllReduce() <= bound, row + " vs at most " + bound + " after the all-reduces");
    }

    /**
     * The most sockets a rank may open for its groups: a group of at most 16 ranks at most its full mesh, a
     * larger one at most 2 ceil(log2 size) links (its barrier's peers) and its listener; the world and TP
     * all-reduces keep to the same links.
     */
    static int socketBound(int n, int tp, int pp) {
        RankLayout l = RankLayout.of(n, tp, pp, n / tp / pp);
        int bound = 0;
        for (List<List<Integer>> groups : List.of(List.of(l.ranks()), l.tpGroups(), l.ppGroups(), l.dpGroups(), l.epGroups())) {
            int size = groups.get(0).size();
            bound += size <= 16 ? size - 1 : 2 * ceilLog2(size) + 1;
        }
        return bound;
    }

    private static int ceilLog2(int n) {
        return 32 - Integer.numberOfLeadingZeros(n - 1);
    }
}
