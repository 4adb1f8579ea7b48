package io.jcomm.tools.bench.scale;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.tools.bench.plot.BenchCharts;
import io.jcomm.tools.bench.plot.ChartFonts;
import java.awt.image.BufferedImage;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;
import picocli.CommandLine;

/** {@code commbench scale}: its checks, rows and chart, and one small run end to end. */
class ScaleBenchTest {

    private static ScaleRow.Jvm jvm(int index, int ranks, long readyMs, long sockets, long cpuMs) {
        return new ScaleRow.Jvm(index, ranks, readyMs, readyMs / 10, readyMs / 5, sockets, sockets, sockets - 2, cpuMs,
                LAUNCHED + 2 * readyMs);
    }

    private static final long LAUNCHED = 1_800_000_000_000L;

    @Test
    void sizesMustFitTheLayoutAndTheJvms() {
        assertNull(ScaleRun.check(256, 4, 8, 4));
        assertNull(ScaleRun.check(32, 4, 8, 4));
        assertTrue(ScaleRun.check(48, 4, 8, 4).contains("TP x PP = 32"));
        assertTrue(ScaleRun.check(96, 64, 8, 4).contains("64 JVMs"));
        assertTrue(ScaleRun.check(0, 4, 8, 4).contains("positive"));
        assertTrue(ScaleRun.check(64, 0, 8, 4).contains("at least 1"));
        assertNull(ScaleBenchCommand.check(List.of(64, 256, 1024), 4, 8, 4, 1, 120));
        assertTrue(ScaleBenchCommand.check(List.of(64, 100), 4, 8, 4, 1, 120).startsWith("100 ranks"));
        assertTrue(ScaleBenchCommand.check(List.of(), 4, 8, 4, 1, 120).contains("at least one"));
        assertTrue(ScaleBenchCommand.check(List.of(64), 4, 8, 4, 0, 120).contains("--runs"));
        assertTrue(ScaleBenchCommand.check(List.of(64), 4, 8, 4, 1, 0).contains("--timeout-s"));
        assertThrows(IllegalArgumentException.class, () -> new ScaleRun(100, 4, 8, 4, Duration.ofSeconds(1), List.of()));
        assertThrows(IllegalArgumentException.class, () -> new ScaleRun(64, 4, 8, 4, Duration.ZERO, List.of()));
    }

    @Test
    void badOptionsStopBeforeAnythingRuns() {
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        ScaleBenchCommand c = new ScaleBenchCommand(new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8));
        assertEquals(2, new CommandLine(c).execute("--ranks", "64,100"));
        assertTrue(err.toString(StandardCharsets.UTF_8).contains("100 ranks: not a positive multiple of TP x PP = 32"), err::toString);
    }

    @Test
    void reportsRoundTripAndMakeARow() {
        ScaleRow.Jvm a = jvm(0, 32, 900, 1100, 3000);
        assertEquals(a, ScaleRow.Jvm.parse(a.toLine()));
        assertTrue(ScaleRow.Jvm.isReport(a.toLine()) && !ScaleRow.Jvm.isReport("READY"));
        assertThrows(IllegalArgumentException.class, () -> ScaleRow.Jvm.parse("@@scale jvm=0 ranks=x"));
        ScaleRow row = ScaleRow.of(64, List.of(a, jvm(1, 32, 1200, 1000, 3400)), 2560, LAUNCHED);
        assertEquals(new ScaleRow(64, 1200, 120, 2400, 240, 2100 / 64.0, 2100 / 64.0, 2096 / 64.0, 40, 6400 / 64.0), row);
        String[] cells = row.toTableRow().trim().split(" +");
        assertEquals(List.of("64", "1200", "32.8", "32.8", "32.8", "40.0", "120", "2400", "240", "100.0"), List.of(cells));
        assertEquals(cells.length, ScaleRow.header().lines().skip(1).findFirst().orElseThrow().trim().split(" {2,}").length);
        // a JVM that could not count its sockets: no figure rather than a wrong one
        ScaleRow unknown = ScaleRow.of(64, List.of(a, jvm(1, 32, 1200, -1, 3400)), 2560, LAUNCHED);
        assertTrue(Double.isNaN(unknown.socketsReady()) && unknown.toTableRow().contains(" - "));
        assertThrows(IllegalArgumentException.class, () -> ScaleRow.of(96, List.of(a, jvm(1, 32, 1, 1, 1)), 1, LAUNCHED), "ranks");
        assertThrows(IllegalArgumentException.class, () -> ScaleRow.of(64, List.of(a, a), 1, LAUNCHED), "a JVM twice");
    }

    @Test
    void chartHelpers() {
        assertEquals(2.0, ScaleChart.median(new double[] {3, 1, 2}));
        assertEquals(2.5, ScaleChart.median(new double[] {4, 1, 2, 3}));
        assertTrue(Double.isNaN(ScaleChart.median(new double[] {1, Double.NaN})));
        assertEquals("256", ScaleChart.ranksTick(8));
        assertEquals("1024", ScaleChart.ranksTick(10));
        assertEquals(2, ScaleChart.charts(List.of(ScaleRow.of(64, List.of(jvm(0, 64, 10, 10, 10)), 64, LAUNCHED)), "x").size());
        assertThrows(IllegalArgumentException.class, () -> ScaleChart.charts(List.of(), "x"));
    }

    @Test
    void drawsTimesAndPerRankCosts(@TempDir Path dir) throws Exception {
        ChartFonts.assume();
        List<ScaleRow> rows = List.of(
                ScaleRow.of(64, List.of(jvm(0, 64, 3600, 2400, 6000)), 2400, LAUNCHED),
                ScaleRow.of(256, List.of(jvm(0, 256, 9000, 8700, 15000)), 10000, LAUNCHED),
                ScaleRow.of(256, List.of(jvm(0, 256, 11000, 8700, 16000)), 10200, LAUNCHED),
                ScaleRow.of(1024, List.of(jvm(0, 1024, 57000, 32800, 93000)), 37000, LAUNCHED));
        Path png = dir.resolve("scale.png");
        ScaleChart.write(rows, "TP8 x PP4, 4 JVMs", png);
        BufferedImage img = ImageIO.read(png.toFile());
        assertEquals(2 * BenchCharts.CHART_WIDTH, img.getWidth());
        assertEquals(BenchCharts.CHART_HEIGHT, img.getHeight());
        assertTrue(count(img, 0, 0x1f77b4) > 100, "ready line drawn");
        assertTrue(count(img, BenchCharts.CHART_WIDTH, 0x1f77b4) > 100, "CPU line drawn");
        assertTrue(count(img, BenchCharts.CHART_WIDTH, 0xd62728) > 100, "sockets line drawn");
    }

    @Test
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void thirtyTwoRanksEndToEnd(@TempDir Path dir) throws Exception {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Path png = dir.resolve("scale.png");
        CommandLine cl = new CommandLine(new ScaleBenchCommand(new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8)));
        boolean fonts = ChartFonts.available(); // without one the chart cannot be drawn; the table still is
        List<String> args = new java.util.ArrayList<>(List.of("--ranks", "32", "--timeout-s", "30"));
        if (fonts) {
            args.addAll(List.of("--plot", png.toString()));
        }
        int code = cl.execute(args.toArray(String[]::new));
        String o = out.toString(StandardCharsets.UTF_8);
        assertEquals(0, code, o + err.toString(StandardCharsets.UTF_8));
        List<String> rows = o.lines().filter(l -> l.trim().startsWith("32 ")).toList();
        assertEquals(1, rows.size(), o);
        String[] cells = rows.get(0).trim().split(" +");
        assertTrue(Long.parseLong(cells[1]) > 0, o);
        assertTrue(Double.parseDouble(cells[2]) <= ParallelStateScaleTest.socketBound(32, 8, 4), o);
        assertTrue(Double.parseDouble(cells[5]) > 0, o);
        if (fonts) {
            assertTrue(Files.size(png) > 0 && err.toString(StandardCharsets.UTF_8).contains("chart written to"));
        }
    }


    private static int count(BufferedImage img, int x0, int rgb) {
        int n = 0;
        for (int y = 0; y < BenchCharts.CHART_HEIGHT; y++) {
            for (int x = x0; x < x0 + BenchCharts.CHART_WIDTH; x++) {
                if ((img.getRGB(x, y) & 0xffffff) == rgb) {
                    n++;
                }
            }
        }
        return n;
    }
}
