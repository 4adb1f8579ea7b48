package io.jcomm.tools.bench.plot;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code commbench plot -o chart.png a.json b.json ...}: draws the runs of several {@code --json}
 * files together (see {@link BenchCharts}).
 */
@Command(name = "plot", mixinStandardHelpOptions = true,
        description = "Draws commbench --json results (one or more files) into a PNG: bus bandwidth vs size per "
                + "collective, latency percentiles for the latency operations, one line per backend.")
public final class PlotCommand implements Callable<Integer> {

    @Option(names = {"-o", "--output"}, required = true, description = "PNG file to write")
    Path output;

    @Parameters(arity = "1..*", paramLabel = "JSON", description = "result files of commbench --json")
    List<Path> files = new ArrayList<>();

    @Override
    public Integer call() throws Exception {
        List<BenchRun> runs = new ArrayList<>();
        for (Path f : files) {
            runs.addAll(BenchRun.read(f));
        }
        int n = BenchCharts.write(runs, output);
        System.err.println("commbench: wrote " + n + (n == 1 ? " chart" : " charts") + " of " + runs.size()
                + (runs.size() == 1 ? " run" : " runs") + " to " + output);
        return 0;
    }
}
