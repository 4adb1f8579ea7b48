package io.jcomm.tools.bench;

import io.jcomm.tools.bench.compare.CompareCommand;
import io.jcomm.tools.bench.init.InitBenchCommand;
import io.jcomm.tools.bench.mq.MqBenchCommand;
import io.jcomm.tools.bench.pipeline.PipelineBenchCommand;
import io.jcomm.tools.bench.plot.PlotCommand;
import io.jcomm.tools.bench.store.StoreBenchCommand;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;

/**
 * {@code bin/commbench}: nccl-tests-style benchmarks of this SDK's communication paths.
 *
 * <p>One subcommand per operation of the CPU group ({@code allreduce}, {@code barrier},
 * {@code broadcast-object}, ...), each launching {@code --nproc} local ranks itself; then
 * {@code store} (rendezvous store round trips, jcomm vs torch), {@code mq} (the Aeron broadcaster),
 * {@code init} (group initialisation time), {@code scale} (group creation with hundreds of thread ranks),
 * {@code transfer} (one-sided transfers, jcomm vs torch gloo), {@code plot} and {@code compare}. Further benchmarks
 * plug in as subcommands of {@link #commandLine()}.
 */
@Command(name = "commbench", mixinStandardHelpOptions = true, subcommands = {},
        description = "Benchmarks collectives and other communication paths, nccl-tests style.")
public final class CommBench implements Callable<Integer> {

    @CommandLine.Spec
    CommandLine.Model.CommandSpec spec;

    /** The command line with every subcommand registered. */
    public static CommandLine commandLine() {
        CommandLine cl = new CommandLine(new CommBench());
        for (BenchOp op : BenchOp.values()) {
            cl.addSubcommand(op.cliName(), new CollectiveBenchCommand(op));
        }
        cl.addSubcommand("store", new StoreBenchCommand());
        cl.addSubcommand("mq", new MqBenchCommand());
        cl.addSubcommand("init", new InitBenchCommand());
        cl.addSubcommand("pipeline", new PipelineBenchCommand());
        cl.addSubcommand("transfer", new io.jcomm.tools.bench.transfer.TransferBenchCommand());
        cl.addSubcommand("rdzv", new io.jcomm.tools.bench.rdzv.RdzvBenchCommand());
        cl.addSubcommand("warmup", new io.jcomm.tools.bench.warmup.WarmupBenchCommand());
        cl.addSubcommand("scale", new io.jcomm.tools.bench.scale.ScaleBenchCommand());
        cl.addSubcommand("kv-index", new io.jcomm.kvcache.bench.KvIndexBench());
        cl.addSubcommand("plot", new PlotCommand());
        cl.addSubcommand("compare", new CompareCommand());
        return cl;
    }

    @CommandLine.Option(names = "--compare", arity = "2", paramLabel = "JSON",
            description = "compare two --json result files (same as the compare subcommand)")
    java.util.List<java.nio.file.Path> compare;

    @Override
    public Integer call() throws Exception {
        if (compare != null) {
            return new CompareCommand(compare.get(0), compare.get(1)).call();
        }
        spec.commandLine().usage(System.out);
        return 2;
    }

    public static void main(String[] args) {
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        System.exit(commandLine().execute(args));
    }
}
