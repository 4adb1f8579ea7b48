package io.jcomm.tools.bench.plot;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.tools.bench.CommBench;
import java.awt.image.BufferedImage;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** commbench --plot and --json over real ranks, then plot and compare of the files. */
class PlotEndToEndTest {

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void benchThenPlotAndCompare(@TempDir Path dir) throws Exception {
        ChartFonts.assume();
        Path json = dir.resolve("a.json");
        Path png = dir.resolve("a.png");
        assertEquals(0, CommBench.commandLine().execute("allreduce", "--nproc", "2", "-b", "1K", "-e", "16K", "-f", "4",
                "-w", "2", "-n", "5", "--json", json.toString(), "--plot", png.toString()));
        List<BenchRun> runs = BenchRun.read(json);
        assertEquals(1, runs.size());
        assertEquals(List.of(1024L, 4096L, 16384L), runs.get(0).rows().stream().map(BenchRun.Row::size).toList());
        BufferedImage img = ImageIO.read(png.toFile());
        assertEquals(BenchCharts.CHART_WIDTH, img.getWidth());
        Path both = dir.resolve("both.png");
        assertEquals(0, CommBench.commandLine().execute("plot", "-o", both.toString(), json.toString(), json.toString()));
        assertEquals(BenchCharts.CHART_HEIGHT, ImageIO.read(both.toFile()).getHeight());
        assertEquals(0, CommBench.commandLine().execute("--compare", json.toString(), json.toString()));
    }
}
