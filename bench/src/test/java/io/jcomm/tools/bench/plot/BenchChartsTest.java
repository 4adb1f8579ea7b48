package io.jcomm.tools.bench.plot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.awt.image.BufferedImage;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class BenchChartsTest {

    static String run(String op, String backend, int nproc, double[][] rows) {
        StringBuilder sb = new StringBuilder("{\"tool\": \"commbench\", \"op\": \"" + op + "\", \"backend\": \"" + backend
                + "\", \"nproc\": " + nproc + ", \"options\": \"\", \"results\": [");
        for (int i = 0; i < rows.length; i++) {
            double[] r = rows[i];
            sb.append(i == 0 ? "" : ",").append("{\"size\": ").append((long) r[0]).append(", \"count\": ")
                    .append((long) r[0] / 4).append(", \"dtype\": \"f32\", \"time_us\": ").append(r[1])
                    .append(", \"algbw_gbps\": ").append(r[2]).append(", \"busbw_gbps\": ").append(r[2])
                    .append(", \"p50_us\": ").append(r[1]).append(", \"p99_us\": ").append(r[1] * 2)
                    .append(", \"p999_us\": ").append(r[1] * 3).append(", \"iters\": 20}");
        }
        return sb.append("]}").toString();
    }

    static List<BenchRun> sample() {
        List<BenchRun> runs = new ArrayList<>();
        runs.addAll(BenchRun.parse(run("allreduce", "tcp", 4, new double[][] {{1024, 20, 0.05}, {1 << 20, 900, 1.1}}), "a"));
        runs.addAll(BenchRun.parse("[" + run("allreduce", "gloo", 4, new double[][] {{1024, 60, 0.02}, {1 << 20, 580, 1.8}})
                + "," + run("barrier", "gloo", 4, new double[][] {{0, 68, 0}}) + "]", "b"));
        runs.addAll(BenchRun.parse(run("barrier", "tcp", 4, new double[][] {{0, 30, 0}}), "a"));
        runs.addAll(BenchRun.parse(run("broadcast-object", "tcp", 4, new double[][] {{100, 40, 0}, {16384, 56, 0}}), "a"));
        return runs;
    }

    @Test
    void parsesSingleRunsAndArrays() {
        List<BenchRun> runs = sample();
        assertEquals(5, runs.size());
        BenchRun gloo = runs.get(1);
        assertEquals("gloo", gloo.backend());
        assertEquals(4, gloo.nproc());
        assertEquals(1 << 20, gloo.rows().get(1).size());
        assertEquals(1.8, gloo.rows().get(1).busbwGBps());
        assertEquals(1160.0, gloo.rows().get(1).p99Us());
        assertTrue(runs.get(2).latency() && runs.get(4).latency() && !gloo.latency());
    }

    @Test
    void badJsonIsRefusedWithItsPosition() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> BenchRun.parse("{\"op\": }", "x"));
        assertTrue(e.getMessage().contains("offset 7"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> BenchRun.parse("{\"op\": \"x\"}", "x"), "no results");
        assertThrows(IllegalArgumentException.class, () -> BenchRun.parse("[1]", "x"));
        assertThrows(IllegalArgumentException.class, () -> BenchRun.parse("[".repeat(100), "x"), "depth bound");
        assertThrows(IllegalArgumentException.class, () -> BenchRun.parse("{} x", "x"));
    }

    @Test
    void labelsTellRunsApart() {
        List<BenchRun> two = new ArrayList<>(BenchRun.parse(run("allreduce", "tcp", 2, new double[][] {{8, 1, 1}}), "a.json"));
        assertEquals(List.of("tcp"), BenchCharts.labels(two));
        two.addAll(BenchRun.parse(run("allreduce", "tcp", 4, new double[][] {{8, 1, 1}}), "b.json"));
        assertEquals(List.of("tcp (2 ranks)", "tcp (4 ranks)"), BenchCharts.labels(two));
        two.addAll(BenchRun.parse(run("allreduce", "tcp", 4, new double[][] {{8, 1, 1}}), "c.json"));
        assertEquals("tcp, 4 ranks [c.json]", BenchCharts.labels(two).get(2));
        assertEquals("4K", BenchRun.humanSize(4096));
        assertEquals("0.05", BenchCharts.compact(0.05));
        assertEquals("12K", BenchCharts.compact(12_000));
        assertEquals("4K", BenchCharts.sizeTick(12));
        assertEquals("100", BenchCharts.sizeTick(BenchCharts.log2(100)));
        assertEquals("6.3K", BenchCharts.sizeTick(BenchCharts.log2(6400)));
        assertEquals("50K", BenchCharts.sizeTick(BenchCharts.log2(51200)));
    }

    @Test
    void drawsOneChartPerOperationWithALinePerBackend(@TempDir Path dir) throws Exception {
        ChartFonts.assume();
        Path png = dir.resolve("chart.png");
        assertEquals(3, BenchCharts.write(sample(), png));
        BufferedImage img = ImageIO.read(png.toFile());
        assertEquals(2 * BenchCharts.CHART_WIDTH, img.getWidth());
        assertEquals(2 * BenchCharts.CHART_HEIGHT, img.getHeight());
        // the first chart (allreduce) has a blue (tcp) and a red (gloo) line
        assertTrue(count(img, 0, 0, 0x1f77b4) > 100, "tcp line drawn");
        assertTrue(count(img, 0, 0, 0xd62728) > 100, "gloo line drawn");
        // the barrier bars (second chart) too
        assertTrue(count(img, BenchCharts.CHART_WIDTH, 0, 0xd62728) > 1000, "gloo bars drawn");
        assertTrue(Files.notExists(dir.resolve("chart.png.tmp")));
        assertThrows(IllegalArgumentException.class, () -> BenchCharts.write(List.of(), dir.resolve("none.png")));
    }


    private static int count(BufferedImage img, int x0, int y0, int rgb) {
        int n = 0;
        for (int y = y0; y < y0 + BenchCharts.CHART_HEIGHT; y++) {
            for (int x = x0; x < x0 + BenchCharts.CHART_WIDTH; x++) {
                if ((img.getRGB(x, y) & 0xffffff) == rgb) {
                    n++;
                }
            }
        }
        return n;
    }
}
