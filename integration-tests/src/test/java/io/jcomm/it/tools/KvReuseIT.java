package io.jcomm.it.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.it.reliability.NetnsHosts;
import io.jcomm.testkit.FreePorts;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The Llama example's prefix reuse ({@code model --prefix-cache}) as real jobs under commrun, each its
 * own JVM with worker JVMs, on the example's seeded test model: a producer job runs a shared-prefix
 * workload and holds its KV blocks ({@code --kv-hold}); a consumer job of another TP size, meeting it in
 * the producer's store, runs the same workload reading the cached prefixes instead of computing them,
 * each rank reading the KV heads it owns from the producer's ranks (the re-split). The consumer also
 * runs the workload without reuse first ({@code --compare-reuse}): its tokens with and without reuse
 * must be equal, and equal to one process running the same weights unsharded. On one host the consumer
 * finds the blocks in the host's Chronicle Map index; across two network namespaces (two simulated
 * hosts, each with its own index) through the producer's KV events, and reads them over tcp.
 */
@Timeout(value = 300, unit = TimeUnit.SECONDS)
class KvReuseIT {

    private static final int JOB_SECONDS = 120;
    private static final Path DIR = Path.of(System.getProperty("user.dir")).resolve("target/kv-reuse-it").toAbsolutePath();
    private static final Pattern READ = Pattern.compile(
            "llama: kv: rank (\\d+): stored \\d+ blocks \\(evicted \\d+\\), read (\\d+) from this rank's pool and (\\d+) from "
                    + "others \\((\\d+) re-split over KV heads, [0-9.]+ KB\\), 0 checksum and 0 transfer failures");

    private static List<String> workload() {
        return List.of("--preset", "test", "--model", DIR.resolve("model").toString(), "--workload", "shared-prefix", "--groups",
                "2", "--per-group", "2", "--system-tokens", "48", "--question-tokens", "8", "--tokens", "8", "--prefix-cache",
                "--warmup", "0", "--timeout", Integer.toString(JOB_SECONDS));
    }

    private static List<String> commrun(int ranks, List<String> launcher, List<String> demo) {
        List<String> cmd = new ArrayList<>(NetnsHosts.commrunJvm());
        cmd.addAll(List.of("--nproc-per-node", Integer.toString(ranks), "--timeout", Integer.toString(JOB_SECONDS + 30)));
        cmd.addAll(launcher);
        cmd.add("model");
        cmd.addAll(workload());
        cmd.addAll(demo);
        return cmd;
    }

    @Test
    void aTp2ProducerHandsItsBlocksToATp1ConsumerOnOneHost() throws Exception {
        pairOnOneHost(2, 1);
    }

    @Test
    void aTp1ProducerHandsItsBlocksToATp2ConsumerOnOneHost() throws Exception {
        pairOnOneHost(1, 2);
    }

    @Test
    void oneJobReusesItsOwnPrefixesWithTheSameTokens() throws Exception {
        Files.createDirectories(DIR);
        Path log = DIR.resolve("single.log");
        Process p = start(commrun(2, List.of("--master-port", Integer.toString(FreePorts.find())),
                List.of("--tp", "2", "--compare-reuse", "--kv-instance", "single")), Map.of("JCOMM_KV_INDEX",
                DIR.resolve("single.cmap").toString()), log);
        String out = await(p, log, "the job");
        assertTrue(out.contains("llama: reuse check: 4 requests, 0 differ"), out);
        assertTrue(out.contains("prompt tokens computed 128, reused 96 (42.9 %)"), "the second question of each group "
                + "reuses its system prompt's 3 blocks:\n" + out);
        assertOneProcessCheck(out);
    }

    @Test
    void aTp2ProducerOnOneHostHandsItsBlocksToATp1ConsumerOnAnotherThroughKvEvents() throws Exception {
        Files.createDirectories(DIR);
        try (NetnsHosts h = NetnsHosts.create("kv" + ProcessHandle.current().pid() % 100_000)) {
            Path[] logs = {DIR.resolve("netns-producer.log"), DIR.resolve("netns-consumer.log")};
            Process producer = null;
            Process consumer = null;
            try {
                producer = h.start(1, commrun(2, List.of("--master-addr", h.addr1, "--master-port", "29631"),
                        List.of("--tp", "2", "--kv-instance", "prod", "--kv-hold")), Map.of("JCOMM_HOST_ID", "host-a",
                        "JCOMM_KV_INDEX", DIR.resolve("host-a.cmap").toString()), logs[0]);
                awaitHolding(producer, logs[0], 2);
                consumer = h.start(2, commrun(1, List.of(), List.of("--tp", "1", "--kv-instance", "cons", "--kv-release",
                        "--compare-reuse", "--store", h.addr1 + ":29631")), Map.of("JCOMM_HOST_ID", "host-b",
                        "JCOMM_KV_INDEX", DIR.resolve("host-b.cmap").toString()), logs[1]);
                checkPair(producer, consumer, logs, 2, 1);
            } finally {
                destroy(producer);
                destroy(consumer);
            }
        }
    }

    private void pairOnOneHost(int producerTp, int consumerTp) throws Exception {
        Files.createDirectories(DIR);
        int port = FreePorts.find();
        String tag = "tp" + producerTp + "-tp" + consumerTp;
        Path[] logs = {DIR.resolve(tag + "-producer.log"), DIR.resolve(tag + "-consumer.log")};
        Map<String, String> env = Map.of("JCOMM_KV_INDEX", DIR.resolve(tag + ".cmap").toString());
        Process producer = null;
        Process consumer = null;
        try {
            producer = start(commrun(producerTp, List.of("--master-port", Integer.toString(port)), List.of("--tp",
                    Integer.toString(producerTp), "--kv-instance", "prod-" + tag, "--kv-hold")), env, logs[0]);
            awaitHolding(producer, logs[0], producerTp);
            consumer = start(commrun(consumerTp, List.of(), List.of("--tp", Integer.toString(consumerTp), "--kv-instance",
                    "cons-" + tag, "--kv-release", "--compare-reuse", "--store", "127.0.0.1:" + port)), env, logs[1]);
            checkPair(producer, consumer, logs, producerTp, consumerTp);
        } finally {
            destroy(producer);
            destroy(consumer);
        }
    }

    /**
     * The consumer reused every system prompt (3 blocks of 16 tokens for each of its 4 requests) from the
     * producer, each of its ranks reading the heads it owns ({@code consumerTp} ranks, 2 KV heads), with
     * the tokens of a run without reuse and of one process.
     */
    private static void checkPair(Process producer, Process consumer, Path[] logs, int producerTp, int consumerTp)
            throws Exception {
        String c = await(consumer, logs[1], "the consumer");
        String p = await(producer, logs[0], "the producer");
        assertTrue(c.contains("llama: prefix cache: 4 requests, prompt tokens computed 32, reused 192 (85.7 %)"), c);
        assertTrue(c.contains("llama: reuse check: 4 requests, 0 differ"), c);
        assertOneProcessCheck(c);
        Matcher m = READ.matcher(c);
        int ranks = 0;
        while (m.find()) {
            ranks++;
            // the first request of each group reads the producer's 3 blocks; the second, its own
            int fromOthers = Integer.parseInt(m.group(3));
            int resplit = Integer.parseInt(m.group(4));
            int sources = producerTp > consumerTp ? producerTp / consumerTp : 1;
            assertEquals(2 * 3 * sources, fromOthers, "rank " + m.group(1) + " read each block from the producer:\n" + c);
            assertEquals(fromOthers, resplit, "with other KV-head slices:\n" + c);
            assertEquals(2 * 3, Integer.parseInt(m.group(2)), "and then from its own pool:\n" + c);
        }
        assertEquals(consumerTp, ranks, c);
        assertTrue(p.contains("llama: OK"), p);
    }

    private static void assertOneProcessCheck(String out) {
        assertTrue(out.lines().anyMatch(l -> l.contains("llama: one-process check") && l.contains(", 0 differ;")), out);
        assertTrue(out.contains("llama: OK"), out);
    }

    private static void awaitHolding(Process p, Path log, int ranks) throws Exception {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(JOB_SECONDS);
        while (true) {
            String out = Files.exists(log) ? Files.readString(log) : "";
            if (out.lines().filter(l -> l.contains("llama: kv: rank") && l.contains("until released")).count() == ranks) {
                return;
            }
            assertTrue(p.isAlive(), "the producer ended before holding its blocks:\n" + out);
            assertTrue(System.nanoTime() < end, "the producer did not hold its blocks in time:\n" + out);
            Thread.sleep(100);
        }
    }

    private static String await(Process p, Path log, String what) throws Exception {
        assertTrue(p.waitFor(JOB_SECONDS + 40, TimeUnit.SECONDS), what + " did not finish:\n" + Files.readString(log));
        String out = Files.readString(log);
        assertEquals(0, p.exitValue(), what + " failed:\n" + out);
        assertTrue(out.contains("no processes or /dev/shm files left behind"), out);
        return out;
    }

    private static Process start(List<String> cmd, Map<String, String> env, Path log) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
        pb.environment().remove("JCOMM_TOKEN_FILE");
        pb.environment().putAll(env);
        return pb.start();
    }

    private static void destroy(Process p) {
        if (p != null) {
            p.toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
        }
    }
}
