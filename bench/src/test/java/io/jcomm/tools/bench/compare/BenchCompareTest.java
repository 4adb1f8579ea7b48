package io.jcomm.tools.bench.compare;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.tools.bench.plot.BenchRun;
import java.util.List;
import org.junit.jupiter.api.Test;

class BenchCompareTest {

    private static String run(String op, String backend, long[] sizes, double[] timesUs) {
        StringBuilder sb = new StringBuilder("{\"op\": \"" + op + "\", \"backend\": \"" + backend
                + "\", \"nproc\": 2, \"results\": [");
        for (int i = 0; i < sizes.length; i++) {
            sb.append(i == 0 ? "" : ",").append("{\"size\": ").append(sizes[i]).append(", \"time_us\": ").append(timesUs[i])
                    .append(", \"busbw_gbps\": ").append(sizes[i] / timesUs[i] / 1000).append(", \"p50_us\": ")
                    .append(timesUs[i]).append(", \"p99_us\": ").append(timesUs[i] * 2).append("}");
        }
        return sb.append("]}").toString();
    }

    @Test
    void ratiosPerOperationAndSize() {
        List<BenchRun> a = BenchRun.parse("[" + run("allreduce", "tcp", new long[] {1024, 4096, 16384}, new double[] {10, 20, 40})
                + "," + run("barrier", "tcp", new long[] {0}, new double[] {30}) + "]", "a");
        List<BenchRun> b = BenchRun.parse("[" + run("allreduce", "gloo", new long[] {4096, 16384, 65536}, new double[] {40, 20, 10})
                + "," + run("broadcast-object", "gloo", new long[] {100}, new double[] {50}) + "]", "b");
        BenchCompare.Result r = BenchCompare.compare(a, "a.json", b, "b.json");
        assertEquals(2, r.lines().size(), r.table());
        assertEquals(new BenchCompare.Line("allreduce", 4096, 20, 40, 0.5), r.lines().get(0));
        assertEquals(new BenchCompare.Line("allreduce", 16384, 40, 20, 2.0), r.lines().get(1));
        assertTrue(r.table().contains("0.50x") && r.table().contains("2.00x"), r.table());
        assertEquals(List.of("barrier (tcp) only in A", "broadcast-object (gloo) only in B"), r.unmatched());
    }

    @Test
    void severalRunsOfOneOperationPairByBackend() {
        List<BenchRun> a = BenchRun.parse("[" + run("barrier", "tcp", new long[] {0}, new double[] {30}) + ","
                + run("barrier", "gloo", new long[] {0}, new double[] {60}) + "]", "a");
        List<BenchRun> b = BenchRun.parse("[" + run("barrier", "gloo", new long[] {0}, new double[] {30}) + ","
                + run("barrier", "tcp", new long[] {0}, new double[] {60}) + "]", "b");
        BenchCompare.Result r = BenchCompare.compare(a, "a", b, "b");
        assertEquals(List.of(new BenchCompare.Line("barrier", 0, 30, 60, 0.5), new BenchCompare.Line("barrier", 0, 60, 30, 2.0)),
                r.lines());
    }
}
