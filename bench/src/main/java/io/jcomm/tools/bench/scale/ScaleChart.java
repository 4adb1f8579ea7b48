package io.jcomm.tools.bench.scale;

import io.jcomm.tools.bench.plot.BenchCharts;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.ToDoubleFunction;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * The chart of {@code commbench scale}, two panels against the number of ranks (a logarithmic axis): the
 * wall times (every group ready, the first world barrier, the all-reduces; logarithmic) and what each rank
 * costs (CPU until ready, sockets at ready, store commands), which stays flat when group creation scales.
 * Where a size ran several times, each point is the median of its runs.
 */
public final class ScaleChart {

    private ScaleChart() {
    }

    /**
     * Draws {@code rows} into {@code png}.
     *
     * @param title what ran, for the panels' titles (e.g. "TP8 x PP4, 4 JVMs")
     * @throws IllegalArgumentException when there are no rows
     */
    public static void write(List<ScaleRow> rows, String title, Path png) throws IOException {
        BenchCharts.writeSheet(charts(rows, title), png);
    }

    static List<XYChart> charts(List<ScaleRow> rows, String title) {
        if (rows.isEmpty()) {
            throw new IllegalArgumentException("no results to plot");
        }
        Map<Integer, List<ScaleRow>> byN = new TreeMap<>();
        rows.forEach(r -> byN.computeIfAbsent(r.n(), k -> new ArrayList<>()).add(r));
        XYChart times = chart("group creation, " + title, "wall time (ms)");
        times.getStyler().setYAxisLogarithmic(true).setYAxisDecimalPattern("0.###");
        // a logarithmic axis has no place for 0: a time under 1 ms is drawn at 1 ms
        add(times, "every group ready", byN, r -> Math.max(1, r.readyMs()), SeriesMarkers.CIRCLE);
        add(times, "first barrier", byN, r -> Math.max(1, r.barrierMs()), SeriesMarkers.DIAMOND);
        add(times, "launch to barrier", byN, r -> Math.max(1, r.launchToBarrierMs()), SeriesMarkers.TRIANGLE_UP);
        add(times, "all-reduces", byN, r -> Math.max(1, r.allReduceMs()), SeriesMarkers.SQUARE);
        XYChart perRank = chart("per rank, " + title, "per rank");
        perRank.getStyler().setYAxisMin(0.0);
        add(perRank, "CPU ms until ready", byN, ScaleRow::cpuMsPerRank, SeriesMarkers.CIRCLE);
        add(perRank, "sockets at ready", byN, ScaleRow::socketsReady, SeriesMarkers.DIAMOND);
        add(perRank, "store commands", byN, ScaleRow::storeCommandsPerRank, SeriesMarkers.SQUARE);
        return List.of(times, perRank);
    }

    private static XYChart chart(String title, String yTitle) {
        XYChart c = new XYChartBuilder().width(BenchCharts.CHART_WIDTH).height(BenchCharts.CHART_HEIGHT).title(title)
                .xAxisTitle("ranks").yAxisTitle(yTitle).build();
        BenchCharts.style(c.getStyler());
        // the lines rise (times) or stay level (per rank): a legend inside would cover points
        c.getStyler().setLegendPosition(Styler.LegendPosition.OutsideS).setLegendLayout(Styler.LegendLayout.Horizontal);
        c.getStyler().setPlotGridLinesVisible(true);
        // x is log2(ranks) on a linear axis, labelled back as ranks (xchart's own logarithmic axis labels decades)
        c.setCustomXAxisTickLabelsFormatter(ScaleChart::ranksTick);
        return c;
    }

    /** The tick label at {@code log2(ranks) = v}: 64, 256, 1024, or 91 between them. */
    static String ranksTick(double v) {
        return String.format(Locale.ROOT, "%.0f", Math.pow(2, v));
    }

    private static void add(XYChart c, String name, Map<Integer, List<ScaleRow>> byN, ToDoubleFunction<ScaleRow> f,
                            org.knowm.xchart.style.markers.Marker marker) {
        List<Double> x = new ArrayList<>();
        List<Double> y = new ArrayList<>();
        byN.forEach((n, rs) -> {
            double m = median(rs.stream().mapToDouble(f).toArray());
            if (!Double.isNaN(m)) {
                x.add(Math.log(n) / Math.log(2));
                y.add(m);
            }
        });
        if (!x.isEmpty()) {
            XYSeries s = c.addSeries(name, x, y);
            s.setMarker(marker);
            s.setLineWidth(2f);
        }
    }

    /** The median (the mean of the middle two for an even count); NaN when any value is NaN. */
    static double median(double[] v) {
        if (Arrays.stream(v).anyMatch(Double::isNaN)) {
            return Double.NaN;
        }
        double[] s = v.clone();
        Arrays.sort(s);
        int k = s.length / 2;
        return s.length % 2 == 1 ? s[k] : (s[k - 1] + s[k]) / 2;
    }
}
