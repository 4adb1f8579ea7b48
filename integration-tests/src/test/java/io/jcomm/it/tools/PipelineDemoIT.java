package io.jcomm.it.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The README's second command, shortened (fewer steps): {@code commrun --nproc-per-node 4 demo --tp 2
 * --pp 2} as 4 real JVMs; checks the exit code, the report, and that no process or /dev/shm entry of
 * the job is left.
 */
class PipelineDemoIT {

    @Test
    void theReadmeStartsWithTheTestCommandAndTheDemoCommand() throws Exception {
        List<String> fenced = new java.util.ArrayList<>();
        boolean in = false;
        for (String line : java.nio.file.Files.readAllLines(ExamplesIT.EXAMPLES.resolve("../../../../../README.md").normalize())) {
            if (line.startsWith("```")) {
                in = !in;
            } else if (in && fenced.size() < 2 && !line.isBlank()) {
                fenced.add(line);
            }
        }
        // .ci/run runs the first fenced line starting with "mvn "
        assertEquals(List.of("mvn -B install", "bin/commrun --nproc-per-node 4 demo --tp 2 --pp 2"), fenced);
    }

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void demoRunsVerifiesAndReports() throws Exception {
        CommRunJob job = CommRunJob.run(Map.of(), "--nproc-per-node", "4", "--timeout", "120", "demo", "--tp", "2", "--pp",
                "2", "--steps", "40", "--warmup", "10", "--hidden", "256");
        job.assertSucceeded();
        List<String> report = job.lines(0);
        String all = String.join("\n", report);
        assertTrue(all.contains("jcomm pipeline demo: TP=2 x PP=2 (DP=1) on 4 ranks, 1 host"), all);
        assertTrue(all.contains("TP metadata via the shared-memory message queue"), all);
        assertTrue(all.contains("actor ids mapped to PP ranks (ActorRankMapper, 2 per PP group) and checked"), all);
        Matcher m = Pattern.compile("verified (\\d+) values on 4 ranks: all exact").matcher(all);
        assertTrue(m.find(), all);
        // per step: stage 0 checks 6 metadata values and 256 reduced values per rank; stage 1 checks the
        // step, the size and 2 x 256 received values and 256 reduced values per rank; then 40 steps that
        // check the first and the last value of each tensor only
        long perStep = 2 * (6 + 256) + 2 * (2 + 3 * 256);
        long perLightStep = 2 * (6 + 2) + 2 * (2 + 3 * 2);
        assertEquals(50 * perStep + 40 * perLightStep, Long.parseLong(m.group(1)), all);
        assertTrue(Pattern.compile("40 steps \\(\\+10 warm-up\\) of 256 f32 in [0-9.]+ s: [0-9]+ steps/s, checking every "
                + "value; the same number again checking two values per tensor: [0-9]+ steps/s").matcher(all).find(), all);
        for (String op : List.of("tp broadcast metadata", "tp all-reduce", "pp send tensor dict", "pp recv tensor dict",
                "whole step")) {
            assertTrue(Pattern.compile("  " + Pattern.quote(op) + " +\\d+ +[0-9.]+ +[0-9.]+").matcher(all).find(), op + " in\n" + all);
        }
        assertTrue(all.contains("tp all-reduce                  160"), "4 ranks x 40 measured steps:\n" + all);
        for (int r = 1; r < 4; r++) {
            assertTrue(job.lines(r).isEmpty(), "only rank 0 reports: " + job.lines(r));
        }
        job.assertNothingLeftBehind();
    }

    /**
     * {@code demo --moe}: besides the pipeline, each step a mixture-of-experts layer over the EP group
     * (the TP ranks), with the {@code alltoall} manager (token counts exchanged, then all-to-all-v), every
     * combined value checked on every rank.
     */
    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void demoWithAMixtureOfExpertsLayerVerifiesEveryToken() throws Exception {
        CommRunJob job = CommRunJob.run(Map.of("JCOMM_ALL2ALL_BACKEND", "alltoall"), "--nproc-per-node", "4", "--timeout",
                "120", "demo", "--tp", "2", "--pp", "2", "--steps", "40", "--warmup", "10", "--hidden", "256", "--moe");
        job.assertSucceeded();
        String all = String.join("\n", job.lines(0));
        assertTrue(all.contains("MoE layer each step over EP=2 (alltoall): 16 tokens of 64 f32 per rank, 2 of 4 experts"),
                all);
        Matcher m = Pattern.compile("verified (\\d+) values on 4 ranks: all exact").matcher(all);
        assertTrue(m.find(), all);
        long perStep = 2 * (6 + 256) + 2 * (2 + 3 * 256) + 4 * 16 * 64;
        long perLightStep = 2 * (6 + 2) + 2 * (2 + 3 * 2) + 4 * 16 * 64;
        assertEquals(50 * perStep + 40 * perLightStep, Long.parseLong(m.group(1)), all);
        assertTrue(all.contains("ep dispatch+combine            160"), "4 ranks x 40 measured steps:\n" + all);
        job.assertNothingLeftBehind();
    }

    /**
     * A long pipeline with the defaults: 30,000 steps in which stage 0 only sends to stage 1 and runs
     * ahead of it as far as the credit allows. It used to stall after some ten thousand steps (bytes left
     * in stage 0's outbound buffer while it was busy in its TP group, and a growing backlog).
     */
    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void thirtyThousandStepsRunWithoutStallingAndVerifyEveryValue() throws Exception {
        int steps = 30_000;
        int warmup = 50;
        CommRunJob job = CommRunJob.run(Map.of(), "--nproc-per-node", "4", "--timeout", "280", "demo", "--tp", "2", "--pp",
                "2", "--steps", Integer.toString(steps), "--warmup", Integer.toString(warmup));
        job.assertSucceeded();
        String all = String.join("\n", job.lines(0));
        long perStep = 2 * (6 + 1024) + 2 * (2 + 3 * 1024);
        long perLightStep = 2 * (6 + 2) + 2 * (2 + 3 * 2);
        Matcher m = Pattern.compile("verified (\\d+) values on 4 ranks: all exact").matcher(all);
        assertTrue(m.find(), all);
        assertEquals((steps + warmup) * perStep + steps * perLightStep, Long.parseLong(m.group(1)), all);
        assertTrue(all.contains(steps + " steps (+" + warmup + " warm-up) of 1024 f32"), all);
        assertTrue(all.contains("pp send tensor dict          " + 2 * steps), "2 stage-0 ranks x the steps:\n" + all);
        job.assertNothingLeftBehind();
    }
}
