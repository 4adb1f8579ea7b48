package io.jcomm.it.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.examples.llama.LlamaDemo;
import io.jcomm.examples.llama.Reference;
import io.jcomm.testkit.FreePorts;
import io.jcomm.testkit.Requirements;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The Llama example (examples/llama) as real multi-JVM jobs under commrun, against torch 1.13's
 * unsharded reference ({@code scripts/llama_reference.py}, run here with Debian's python): TP2 x PP2
 * and DP2 x TP2 as 4-JVM jobs, and prefill/decode disaggregation as two TP2 jobs whose KV blocks move
 * with kv-transfer. Every job must give torch's tokens for each of 2 requests (64 and 72 new tokens);
 * the sharded jobs also logits within {@link Reference#LOGIT_TOLERANCE}. Without torch the tests are
 * skipped, or fail where the run requires torch ({@code JCOMM_REQUIRE=torch}, as CI sets).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class LlamaIT {

    static final String PYTHON = "/usr/bin/python3";
    static final Path SCRIPT = Path.of(System.getProperty("user.dir")).resolve("../scripts/llama_reference.py").normalize();
    static final Path DIR = Path.of(System.getProperty("user.dir")).resolve("target/llama-it");
    static final String MAIN = LlamaDemo.class.getName();

    static Reference reference;

    @BeforeAll
    static void model() throws Exception {
        Requirements.assume("torch", torchAvailable(), PYTHON + " cannot import torch");
        Files.createDirectories(DIR);
        Process p = new ProcessBuilder(PYTHON, SCRIPT.toString(), "generate", "--out", DIR.toString(), "--preset", "test",
                "--seed", "16", "--prompts", "2", "--tokens", "64", "--reference", DIR.resolve("reference.json").toString())
                .redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertTrue(p.waitFor(90, TimeUnit.SECONDS), "the torch reference took over 90 s");
        System.out.print(out);
        assertEquals(0, p.exitValue(), out);
        reference = Reference.read(DIR.resolve("reference.json"));
        assertEquals(2, reference.requests().size());
    }

    private static boolean torchAvailable() {
        try {
            Process p = new ProcessBuilder(PYTHON, "-c", "import torch").redirectErrorStream(true).start();
            p.getInputStream().readAllBytes();
            return p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0;
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    private static List<String> args(String... layout) {
        List<String> a = new ArrayList<>(List.of("--nproc-per-node", "4", MAIN));
        a.addAll(List.of(layout));
        a.addAll(List.of("--model", DIR.toString(), "--reference", DIR.resolve("reference.json").toString(), "--warmup", "0"));
        return a;
    }

    /** Rank 0 printed torch's tokens for every request. */
    private static void assertTorchTokens(CommRunJob job) {
        List<String> lines = job.programLines(0);
        for (int i = 0; i < reference.requests().size(); i++) {
            StringBuilder want = new StringBuilder("llama: request " + i + " tokens");
            for (int t : reference.requests().get(i).tokens()) {
                want.append(' ').append(t);
            }
            assertTrue(lines.contains(want.toString()), "rank 0 should print " + want + "\n" + lines);
        }
        assertTrue(lines.contains("llama: OK"), lines.toString());
    }

    @Test
    void tp2xPp2MatchesTorch() throws Exception {
        List<String> a = args("--tp", "2", "--pp", "2");
        CommRunJob job = CommRunJob.run(Map.of(), a.toArray(new String[0]));
        job.assertSucceeded();
        assertTorchTokens(job);
        List<String> lines = job.programLines(0);
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("llama: torch reference: 2 requests, 136 tokens, 0 differ; 8 logit rows")),
                lines.toString());
        // and the demo's own check against one process running the same weights unsharded
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("llama: one-process check") && l.contains(", 0 differ;")),
                lines.toString());
        job.assertNothingLeftBehind();
    }

    @Test
    void dp2xTp2MatchesTorch() throws Exception {
        List<String> a = args("--tp", "2", "--dp", "2", "--no-check");
        CommRunJob job = CommRunJob.run(Map.of(), a.toArray(new String[0]));
        job.assertSucceeded();
        assertTorchTokens(job);
        List<String> lines = job.programLines(0);
        assertTrue(lines.stream().anyMatch(l -> l.startsWith("llama: torch reference: 2 requests, 136 tokens, 0 differ; 8 logit rows")),
                lines.toString());
        // replica 0's request is 8 tokens shorter: it stepped the DP agreement while replica 1 finished
        assertTrue(lines.stream().anyMatch(l -> l.contains(" 8 idle iterations there")), lines.toString());
        job.assertNothingLeftBehind();
    }

    /**
     * Two jobs: prefill runs the prompts and writes their KV blocks into the decode job's registered
     * cache; decode continues from prefill's first token. Decode's tokens are torch's (which a
     * monolithic job gives too: the tests above).
     */
    @Test
    void prefillDecodeDisaggregationMatchesTorch() throws Exception {
        int port = FreePorts.find();
        String ref = DIR.resolve("reference.json").toString();
        CompletableFuture<CommRunJob> decode = CompletableFuture.supplyAsync(() -> run("--nproc-per-node", "2",
                "--master-port", Integer.toString(port), MAIN, "--tp", "2", "--model", DIR.toString(), "--reference", ref,
                "--warmup", "0", "--pd", "decode"));
        CommRunJob prefill = run("--nproc-per-node", "2", MAIN, "--tp", "2", "--model", DIR.toString(), "--reference", ref,
                "--warmup", "0", "--pd", "prefill", "--store", "127.0.0.1:" + port);
        CommRunJob d = decode.get(100, TimeUnit.SECONDS);
        prefill.assertSucceeded();
        d.assertSucceeded();
        assertTrue(prefill.programLines(0).contains("llama: torch reference (prefill job, first tokens): equal"),
                prefill.programLines(0).toString());
        for (int r = 0; r < 2; r++) {
            int rank = r;
            assertTrue(prefill.programLines(r).stream().anyMatch(l -> l.startsWith("llama --pd: prefill rank " + rank
                    + " ran 2 prompts") && l.contains("wrote 16 KV blocks")), prefill.programLines(r).toString());
        }
        assertTorchTokens(d);
        assertTrue(d.programLines(0).stream().anyMatch(l -> l.startsWith("llama: torch reference (decode job")
                && l.contains("2 requests, 136 tokens, 0 differ")), d.programLines(0).toString());
        prefill.assertNothingLeftBehind();
        d.assertNothingLeftBehind();
    }

    private static CommRunJob run(String... args) {
        try {
            return CommRunJob.run(Map.of(), args);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }
}
