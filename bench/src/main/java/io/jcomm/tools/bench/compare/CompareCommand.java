package io.jcomm.tools.bench.compare;

import io.jcomm.tools.bench.plot.BenchRun;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Parameters;

/** {@code commbench compare A.json B.json} (also {@code commbench --compare A.json B.json}). */
@Command(name = "compare", mixinStandardHelpOptions = true,
        description = "Prints, per operation and size, the results of two commbench --json files side by side "
                + "with the speed-up of B over A.")
public final class CompareCommand implements Callable<Integer> {

    @Parameters(index = "0", paramLabel = "A.json")
    Path a;

    @Parameters(index = "1", paramLabel = "B.json")
    Path b;

    public CompareCommand() {
    }

    public CompareCommand(Path a, Path b) {
        this.a = a;
        this.b = b;
    }

    @Override
    public Integer call() throws Exception {
        BenchCompare.Result r = BenchCompare.compare(BenchRun.read(a), a.toString(), BenchRun.read(b), b.toString());
        System.out.print(r.table());
        return r.lines().isEmpty() ? 1 : 0;
    }
}
