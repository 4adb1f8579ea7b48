package io.jcomm.tools.bench.plot;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;
import javax.imageio.ImageIO;
import org.knowm.xchart.BitmapEncoder;
import org.knowm.xchart.CategoryChart;
import org.knowm.xchart.CategoryChartBuilder;
import org.knowm.xchart.XYChart;
import org.knowm.xchart.XYChartBuilder;
import org.knowm.xchart.XYSeries;
import org.knowm.xchart.internal.chartpart.Chart;
import org.knowm.xchart.style.Styler;
import org.knowm.xchart.style.markers.SeriesMarkers;

/**
 * Draws benchmark runs into one PNG: a chart per operation, one line per backend, so that it shows at
 * a glance where each backend wins.
 *
 * <ul>
 *   <li>bandwidth operations (all-reduce, all-gather, ...): bus bandwidth (GB/s) against message size,
 *       both axes logarithmic;</li>
 *   <li>latency operations over several sizes (object broadcast, ...): p50 (solid) and p99 (dashed)
 *       latency against size, log-log;</li>
 *   <li>latency operations of one size (barrier): bars of p50, p99 and p99.9 per backend.</li>
 * </ul>
 * Rendering is headless ({@code java.awt.headless=true}); it needs a font, which every JDK with
 * fontconfig has.
 */
public final class BenchCharts {

    /** Width of one chart on a sheet, in pixels. */
    public static final int CHART_WIDTH = 640;
    /** Height of one chart on a sheet, in pixels. */
    public static final int CHART_HEIGHT = 420;

    private static final Color[] PALETTE = {
        new Color(0x1f77b4), new Color(0xd62728), new Color(0x2ca02c), new Color(0xff7f0e),
        new Color(0x9467bd), new Color(0x8c564b), new Color(0xe377c2), new Color(0x17becf),
    };

    private BenchCharts() {
    }

    /**
     * Writes the charts of {@code runs} (any mix of operations and backends) to {@code png}.
     *
     * @return the number of charts drawn
     * @throws IllegalArgumentException when there is nothing to draw
     */
    public static int write(List<BenchRun> runs, Path png) throws IOException {
        System.setProperty("java.awt.headless", "true");
        List<Chart<?, ?>> charts = charts(runs);
        if (charts.isEmpty()) {
            throw new IllegalArgumentException("no results to plot");
        }
        writeSheet(charts, png);
        return charts.size();
    }

    /**
     * Writes {@code charts} to {@code png} as one sheet, two charts a row ({@link #CHART_WIDTH} ×
     * {@link #CHART_HEIGHT} each), through a temporary file beside it.
     */
    public static void writeSheet(List<? extends Chart<?, ?>> charts, Path png) throws IOException {
        System.setProperty("java.awt.headless", "true");
        int cols = charts.size() == 1 ? 1 : 2;
        int rows = (charts.size() + cols - 1) / cols;
        Path parent = png.toAbsolutePath().getParent();
        if (parent != null) {
            Files.createDirectories(parent);
        }
        BufferedImage sheet = new BufferedImage(cols * CHART_WIDTH, rows * CHART_HEIGHT, BufferedImage.TYPE_INT_RGB);
        Graphics2D g = sheet.createGraphics();
        try {
            g.setColor(Color.WHITE);
            g.fillRect(0, 0, sheet.getWidth(), sheet.getHeight());
            for (int i = 0; i < charts.size(); i++) {
                g.drawImage(BitmapEncoder.getBufferedImage(charts.get(i)), (i % cols) * CHART_WIDTH,
                        (i / cols) * CHART_HEIGHT, null);
            }
        } finally {
            g.dispose();
        }
        Path tmp = png.resolveSibling(png.getFileName() + ".tmp");
        try (OutputStream os = Files.newOutputStream(tmp)) {
            if (!ImageIO.write(sheet, "png", os)) {
                throw new IOException("no PNG writer in this JDK");
            }
        }
        Files.move(tmp, png, StandardCopyOption.REPLACE_EXISTING);
    }

    /** The charts, one per operation, in the order the operations first appear. */
    static List<Chart<?, ?>> charts(List<BenchRun> runs) {
        Map<String, List<BenchRun>> byOp = new LinkedHashMap<>();
        for (BenchRun r : runs) {
            if (!r.rows().isEmpty()) {
                byOp.computeIfAbsent(r.op(), k -> new ArrayList<>()).add(r);
            }
        }
        List<Chart<?, ?>> out = new ArrayList<>();
        for (Map.Entry<String, List<BenchRun>> e : byOp.entrySet()) {
            List<BenchRun> rs = e.getValue();
            List<String> labels = labels(rs);
            boolean latency = rs.get(0).latency();
            TreeSet<Long> sizes = new TreeSet<>();
            rs.forEach(r -> r.rows().forEach(row -> sizes.add(row.size())));
            if (!latency) {
                out.add(bandwidth(e.getKey(), rs, labels));
            } else if (sizes.size() == 1) {
                out.add(latencyBars(e.getKey(), sizes.first(), rs, labels));
            } else {
                out.add(latencyLines(e.getKey(), rs, labels));
            }
        }
        return out;
    }

    /**
     * Legend labels of {@code runs}, in order: the backend, then whatever tells equal backends apart
     * (ranks, options, file, a number).
     */
    public static List<String> labels(List<BenchRun> runs) {
        List<String> out = new ArrayList<>();
        runs.forEach(r -> out.add(r.backend()));
        if (unique(out)) {
            return out;
        }
        out.clear();
        runs.forEach(r -> out.add(r.backend() + " (" + r.nproc() + " ranks)"));
        if (unique(out)) {
            return out;
        }
        out.clear();
        runs.forEach(r -> out.add(r.describe()));
        if (unique(out)) {
            return out;
        }
        out.clear();
        Map<String, Integer> seen = new HashMap<>();
        for (BenchRun r : runs) {
            String l = r.describe() + " [" + r.source() + "]";
            int n = seen.merge(l, 1, Integer::sum);
            out.add(n == 1 ? l : l + " #" + n);
        }
        return out;
    }

    private static boolean unique(List<String> labels) {
        return new TreeSet<>(labels).size() == labels.size();
    }

    private static String title(String op, List<BenchRun> rs) {
        TreeSet<Integer> n = new TreeSet<>();
        rs.forEach(r -> n.add(r.nproc()));
        return op + (n.size() == 1 ? "  (" + n.first() + " ranks)" : "");
    }

    /** The look of every commbench chart: white, the legend top left, the palette. */
    public static void style(Styler s) {
        s.setChartBackgroundColor(Color.WHITE);
        s.setPlotBackgroundColor(Color.WHITE);
        s.setLegendPosition(Styler.LegendPosition.InsideNW);
        s.setLegendBorderColor(new Color(0xcccccc));
        s.setChartTitleFont(new Font(Font.SANS_SERIF, Font.BOLD, 15));
        s.setLegendFont(new Font(Font.SANS_SERIF, Font.PLAIN, 12));
        s.setSeriesColors(PALETTE);
    }

    private static XYChart bandwidth(String op, List<BenchRun> rs, List<String> labels) {
        XYChart c = new XYChartBuilder().width(CHART_WIDTH).height(CHART_HEIGHT).title(title(op, rs) + ": bus bandwidth")
                .xAxisTitle("message size (bytes)").yAxisTitle("bus bandwidth (GB/s)").build();
        style(c.getStyler());
        logLog(c);
        for (int k = 0; k < rs.size(); k++) {
            BenchRun r = rs.get(k);
            List<Double> x = new ArrayList<>();
            List<Double> y = new ArrayList<>();
            for (BenchRun.Row row : r.rows()) {
                if (row.size() > 0 && row.busbwGBps() > 0) {
                    x.add(log2(row.size()));
                    y.add(row.busbwGBps());
                }
            }
            if (!x.isEmpty()) {
                XYSeries s = c.addSeries(labels.get(k), x, y);
                s.setMarker(SeriesMarkers.CIRCLE);
                s.setLineWidth(2f);
            }
        }
        return c;
    }

    private static XYChart latencyLines(String op, List<BenchRun> rs, List<String> labels) {
        XYChart c = new XYChartBuilder().width(CHART_WIDTH).height(CHART_HEIGHT).title(title(op, rs) + ": latency")
                .xAxisTitle("message size (bytes)").yAxisTitle("latency (us), p50 solid, p99 dashed").build();
        style(c.getStyler());
        logLog(c);
        for (int k = 0; k < rs.size(); k++) {
            BenchRun r = rs.get(k);
            Color color = PALETTE[k % PALETTE.length];
            List<Double> x = new ArrayList<>();
            List<Double> p50 = new ArrayList<>();
            List<Double> p99 = new ArrayList<>();
            for (BenchRun.Row row : r.rows()) {
                if (row.size() > 0 && row.p50Us() > 0) {
                    x.add(log2(row.size()));
                    p50.add(row.p50Us());
                    p99.add(Math.max(row.p99Us(), row.p50Us()));
                }
            }
            if (x.isEmpty()) {
                continue;
            }
            XYSeries a = c.addSeries(labels.get(k) + " p50", x, p50);
            a.setMarker(SeriesMarkers.CIRCLE);
            a.setMarkerColor(color);
            a.setLineColor(color);
            a.setLineWidth(2f);
            XYSeries b = c.addSeries(labels.get(k) + " p99", x, p99);
            b.setMarker(SeriesMarkers.DIAMOND);
            b.setMarkerColor(color);
            b.setLineColor(color);
            b.setLineStyle(new BasicStroke(2f, BasicStroke.CAP_BUTT, BasicStroke.JOIN_MITER, 10f, new float[] {6f, 4f}, 0f));
        }
        return c;
    }

    private static CategoryChart latencyBars(String op, long size, List<BenchRun> rs, List<String> labels) {
        CategoryChart c = new CategoryChartBuilder().width(CHART_WIDTH).height(CHART_HEIGHT)
                .title(title(op, rs) + ": latency" + (size > 0 ? " at " + BenchRun.humanSize(size) + " B" : ""))
                .xAxisTitle("percentile").yAxisTitle("latency (us)").build();
        style(c.getStyler());
        c.getStyler().setPlotGridVerticalLinesVisible(false);
        c.getStyler().setLabelsVisible(true);
        c.getStyler().setLabelsFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
        c.setCustomYAxisTickLabelsFormatter(BenchCharts::compact);
        for (int k = 0; k < rs.size(); k++) {
            BenchRun.Row row = rs.get(k).rows().get(0);
            c.addSeries(labels.get(k), List.of("p50", "p99", "p99.9"), List.of(row.p50Us(), row.p99Us(), row.p999Us()));
        }
        return c;
    }

    /**
     * Log-log axes. xchart's tick labels of a logarithmic axis cannot be formatted freely, so the x
     * values are log2(size) on a linear axis, labelled back as sizes (1K, 4K, ...) at whole powers of
     * two; the y axis is xchart's own logarithmic axis (decades).
     */
    private static void logLog(XYChart c) {
        c.getStyler().setYAxisLogarithmic(true).setPlotGridLinesVisible(true).setYAxisDecimalPattern("0.###");
        c.setCustomXAxisTickLabelsFormatter(BenchCharts::sizeTick);
    }

    /** The tick label at {@code log2(size) = v}: 4K at whole powers of two, else 100, 6.3K, 1.5M. */
    static String sizeTick(double v) {
        long e = Math.round(v);
        if (Math.abs(v - e) < 1e-6 && e >= 0 && e < 63) {
            return BenchRun.humanSize(1L << e);
        }
        double b = Math.rint(Math.pow(2, v)); // sizes are whole bytes
        if (b < 1024) {
            return String.format(Locale.ROOT, "%.0f", b);
        }
        String[] units = {"K", "M", "G", "T"};
        int u = 0;
        b /= 1024;
        while (b >= 1024 && u < units.length - 1) {
            b /= 1024;
            u++;
        }
        return trim(String.format(Locale.ROOT, b < 10 ? "%.1f" : "%.0f", b)) + units[u];
    }

    static double log2(long v) {
        return Math.log(v) / Math.log(2);
    }

    /** 0.012, 0.5, 3, 120, 4.5K: short tick labels. */
    public static String compact(double v) {
        double a = Math.abs(v);
        if (a >= 10_000) {
            return String.format(Locale.ROOT, "%.0fK", v / 1000);
        }
        if (a >= 100) {
            return String.format(Locale.ROOT, "%.0f", v);
        }
        if (a >= 1 || a == 0) {
            return trim(String.format(Locale.ROOT, "%.1f", v));
        }
        if (a >= 0.01) {
            return trim(String.format(Locale.ROOT, "%.2f", v));
        }
        return String.format(Locale.ROOT, "%.0e", v);
    }

    private static String trim(String s) {
        return s.contains(".") ? s.replaceAll("0+$", "").replaceAll("\\.$", "") : s;
    }
}
