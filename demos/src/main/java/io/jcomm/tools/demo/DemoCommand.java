package io.jcomm.tools.demo;

import io.jcomm.api.DistributedConfig;
import java.io.PrintStream;
import java.util.concurrent.Callable;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code demo}: the demo programs, one subcommand each, every one with its own options: {@code pipeline}
 * ({@link PipelineDemo}, the default: {@code demo --tp 2 --pp 2} is {@code demo pipeline --tp 2 --pp 2}),
 * {@code pd ROLE} ({@link PdDemo}), {@code weights ROLE} ({@link WeightsDemo}) and {@code elastic}
 * ({@link ElasticServing}). {@code --pd}, {@code --weights} and {@code --elastic} are aliases of the last
 * three, so that {@code demo --pd decode} is {@code demo pd decode}. The main class is {@link PipelineDemo}
 * (commrun's {@code demo}, the manifests in {@code deploy/}).
 */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = {"The demo programs; 'demo [OPTIONS]' without a command runs the pipeline demo "
                + "('demo pipeline [OPTIONS]')."})
public final class DemoCommand {

    /** The subcommand run when the first argument names none. */
    static final String DEFAULT = "pipeline";

    private DemoCommand() {
    }

    /** The command line of {@code demo}, whose programs print to {@code out}. */
    public static CommandLine commandLine(PrintStream out) {
        CommandLine cl = new CommandLine(new DemoCommand());
        cl.addSubcommand(DEFAULT, new PipelineDemo(out));
        cl.addSubcommand("pd", new Pd(out), "--pd");
        cl.addSubcommand("weights", new Weights(out), "--weights");
        cl.addSubcommand("elastic", new Elastic(out), "--elastic");
        return cl;
    }

    /**
     * {@code args} for {@code cl}: as they are when the first names a subcommand or one of the command's own
     * options ({@code --help}, {@code --version}), else after {@value #DEFAULT}.
     */
    static String[] withDefault(CommandLine cl, String[] args) {
        if (args.length > 0 && (cl.getSubcommands().containsKey(args[0]) || cl.getCommandSpec().findOption(args[0]) != null)) {
            return args;
        }
        String[] all = new String[args.length + 1];
        all[0] = DEFAULT;
        System.arraycopy(args, 0, all, 1, args.length);
        return all;
    }

    /** Runs {@code demo} with {@code args}; picocli's exit status (0, 1 for a failure, 2 for a usage error). */
    static int run(PrintStream out, String[] args) {
        CommandLine cl = commandLine(out);
        return cl.execute(withDefault(cl, args));
    }

    /** {@code demo pd ROLE}: disaggregated prefill and decode as two jobs (see {@link PdDemo}). */
    @Command(name = "pd", mixinStandardHelpOptions = true,
            description = "Disaggregated prefill and decode as two jobs whose transfer agents meet in one store; run the "
                    + "decode job with commrun --master-port P and the prefill job with --store HOST:P.")
    static final class Pd implements Callable<Integer> {

        @Parameters(index = "0", paramLabel = "ROLE", description = "decode (registers a paged block pool per rank and "
                + "verifies every byte) or prefill (writes each request's blocks into it with one notification)")
        String role;

        @Option(names = "--store", paramLabel = "HOST:PORT", description = "the store where both jobs' agents meet "
                + "(default for decode: its own launcher store; prefill must name it)")
        String store;

        @Option(names = "--requests", description = "requests per rank (default ${DEFAULT-VALUE})")
        int requests = 200;

        @Option(names = "--layers", description = "layers of each request's KV (default ${DEFAULT-VALUE})")
        int layers = 4;

        @Option(names = "--blocks", description = "KV blocks per layer of each request (default ${DEFAULT-VALUE})")
        int blocks = 16;

        @Option(names = "--block-bytes", description = "bytes per block, a multiple of 8 (default ${DEFAULT-VALUE})")
        int blockBytes = 64 << 10;

        @Option(names = "--window", description = "requests in flight per rank, the decode pool's request slots "
                + "(default ${DEFAULT-VALUE})")
        int window = 4;

        private final PrintStream out;

        Pd(PrintStream out) {
            this.out = out;
        }

        @Override
        public Integer call() {
            return new PdDemo(role, store, new PdDemo.Shape(requests, layers, blocks, blockBytes, window),
                    DistributedConfig.fromEnvironment().timeout(), out).run();
        }
    }

    /** {@code demo weights ROLE}: weight updates from a trainer job into an engine job (see {@link WeightsDemo}). */
    @Command(name = "weights", mixinStandardHelpOptions = true,
            description = "Weight updates as two jobs whose transfer agents meet in one store; run the engine job with "
                    + "commrun --master-port P and the trainer job with --store HOST:P.")
    static final class Weights implements Callable<Integer> {

        @Parameters(index = "0", paramLabel = "ROLE", description = "engine (each rank registers room for the whole "
                + "weight set and verifies every byte of every version) or trainer (each rank pushes its shard of the "
                + "tensors into every engine rank, version after version, one notification per version and engine rank)")
        String role;

        @Option(names = "--store", paramLabel = "HOST:PORT", description = "the store where both jobs' agents meet "
                + "(default for engine: its own launcher store; trainer must name it)")
        String store;

        @Option(names = "--weights-mib", description = "MiB of the whole weight set, held by every engine rank "
                + "(default ${DEFAULT-VALUE})")
        int weightsMib = 2048;

        @Option(names = "--tensors", description = "tensors in the weight set, of uneven sizes (default ${DEFAULT-VALUE})")
        int tensors = 64;

        @Option(names = "--versions", description = "versions the trainer pushes (default ${DEFAULT-VALUE})")
        int versions = 3;

        @Option(names = "--region-mib", description = "largest registered region in MiB; the weight set takes as many "
                + "as it needs, no tensor split between two (default ${DEFAULT-VALUE})")
        int regionMib = 1024;

        private final PrintStream out;

        Weights(PrintStream out) {
            this.out = out;
        }

        @Override
        public Integer call() {
            return new WeightsDemo(role, store, new WeightsDemo.Shape((long) weightsMib << 20, tensors, versions,
                    (long) regionMib << 20), DistributedConfig.fromEnvironment().timeout(), out).run();
        }
    }

    /** {@code demo elastic}: a serving loop that keeps answering when ranks die (see {@link ElasticServing}). */
    @Command(name = "elastic", mixinStandardHelpOptions = true,
            description = "A serving loop of DP replicas of --tp ranks that keeps answering when ranks die (run it with "
                    + "commrun --max-lost N): replicas that lose a rank leave, the others re-form their DP groups "
                    + "(ParallelState.shrink) and go on.")
    static final class Elastic implements Callable<Integer> {

        @Option(names = "--tp", description = "tensor-parallel size of each replica (default ${DEFAULT-VALUE})")
        int tp = 2;

        @Option(names = "--steps", description = "requests (default ${DEFAULT-VALUE})")
        int steps = 300;

        @Option(names = "--hidden", description = "values of each request (default ${DEFAULT-VALUE})")
        int hidden = 1024;

        @Option(names = "--moe", description = "also an MoE layer each request: 8 experts over the EP group of every "
                + "rank, placed again by each recovery")
        boolean moe;

        private final PrintStream out;

        Elastic(PrintStream out) {
            this.out = out;
        }

        @Override
        public Integer call() {
            return new ElasticServing(tp, hidden, steps, moe, out).run();
        }
    }
}
