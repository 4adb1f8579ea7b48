package io.jcomm.it.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.examples.CpuGroupExample;
import io.jcomm.examples.ParallelStateExample;
import io.jcomm.examples.StoreExample;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The sources of the top-level examples/ folder (compiled into this module's test classes) run as
 * real multi-JVM jobs through commrun, with their output checked.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ExamplesIT {

    static final Path EXAMPLES = Path.of(System.getProperty("user.dir")).resolve("../examples/src/io/jcomm/examples")
            .normalize();

    @Test
    void storeExampleFromItsSourceFile() throws Exception {
        Path src = EXAMPLES.resolve("StoreExample.java");
        assertTrue(Files.isRegularFile(src), src.toString());
        // the way the README runs it: commrun compiles the .java file itself
        CommRunJob job = CommRunJob.run(Map.of(), "--nproc-per-node", "3", src.toString());
        job.assertSucceeded();
        for (int r = 0; r < 3; r++) {
            List<String> lines = job.lines(r);
            assertTrue(lines.stream().anyMatch(l -> l.startsWith("rank ")
                    && l.contains(" sees [worker-0, worker-1, worker-2], arrival #")), lines.toString());
        }
        // arrivals are numbered 1..3 exactly once
        for (int n = 1; n <= 3; n++) {
            String arrival = "arrival #" + n;
            assertEquals(1, job.out.lines().filter(l -> l.endsWith(arrival)).count(), job.out);
        }
        job.assertNothingLeftBehind();
    }

    @Test
    void cpuGroupExample() throws Exception {
        CommRunJob job = CommRunJob.run(Map.of("JCOMM_CPU_BACKEND", "tcp"), "--nproc-per-node", "3",
                CpuGroupExample.class.getName());
        job.assertSucceeded();
        for (int r = 0; r < 3; r++) {
            String expect = "rank " + r + "/3 on tcp: allReduce=[6.0, 60.0] plan=Plan[step=42, mode=decode] "
                    + "names=[rank-0, rank-1, rank-2]";
            assertTrue(job.lines(r).contains(expect), job.lines(r) + " should contain " + expect);
        }
        job.assertNothingLeftBehind();
    }

    @Test
    void parallelStateExampleOfTheReadme() throws Exception {
        CommRunJob job = CommRunJob.run(Map.of(), "--nproc-per-node", "4", ParallelStateExample.class.getName());
        job.assertSucceeded();
        // vLLM's layout for TP=2 x PP=2: stage 1 is ranks 2 and 3; each got stage 0's reduced tensor
        for (int r = 2; r < 4; r++) {
            assertEquals(List.of("stage 1 rank " + r + " got r-7 [3.0, 20.0]"), job.programLines(r));
        }
        assertTrue(job.programLines(0).isEmpty() && job.programLines(1).isEmpty(), job.out);
        // rank 0 says which launcher it found (the others say it at DEBUG)
        assertTrue(job.lines(0).stream().anyMatch(l -> l.contains("INFO io.jcomm.api.DistributedConfig - jcomm launcher: "
                + "torchrun: rank 0 of 4 (RANK, WORLD_SIZE)")), job.lines(0).toString());
        job.assertNothingLeftBehind();
    }

    @Test
    void theReadmeShowsTheParallelStateExample() throws Exception {
        String readme = Files.readString(EXAMPLES.resolve("../../../../../README.md").normalize());
        String src = Files.readString(EXAMPLES.resolve("ParallelStateExample.java"));
        int from = src.indexOf("    public static void main");
        int to = src.indexOf("\n    }\n", from) + 6;
        String body = src.substring(from, to).replaceAll("(?m)^    ", "");
        assertTrue(readme.contains(body), "README.md must show ParallelStateExample.main as it is:\n" + body);
    }

    static {
        // keep the example classes referenced so that a rename breaks the build here
        assertTrue(StoreExample.class.getName().startsWith("io.jcomm.examples."));
    }
}
