package io.jcomm.it.transfer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.it.reliability.NetnsHosts;
import java.io.IOException;
import java.net.ServerSocket;
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
 * {@code demo --pd}: a decode job and a prefill job of two ranks each, each under its own
 * {@code commrun} (a JVM of its own, whose workers are JVMs of their own), meeting in the decode job's
 * launcher store: every byte of every request verified by decode, both jobs exit 0 and leave nothing
 * behind. Once on one host (the shm transport into decode's shared pool), once across two network
 * namespaces (tcp over a veth pair; skipped without root). The same for {@code demo --weights}: a
 * trainer job of two ranks pushes two versions of a weight set of uneven tensors, spread over several
 * regions, into both ranks of an engine job, which verify every byte of every version.
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class PdDemoIT {

    private static final int JOB_SECONDS = 90;
    private static final List<String> PD = List.of("--requests", "60", "--layers", "3", "--blocks", "5",
            "--block-bytes", "12344", "--window", "3");
    private static final Pattern DECODE = Pattern.compile(
            "decode rank (\\d) verified 60 requests, (\\d+) bytes, wrong bytes 0, [0-9.]+ GB/s, latency p50 [0-9.]+ ms p99 [0-9.]+ ms");
    private static final long REQUEST_BYTES = 3L * 5 * 12344;
    private static final List<String> WEIGHTS = List.of("--weights-mib", "80", "--tensors", "13", "--versions", "2",
            "--region-mib", "24");
    private static final long WEIGHT_BYTES = 80L << 20;
    private static final Pattern ENGINE = Pattern.compile("engine rank (\\d) verified 2 versions, (\\d+) bytes, wrong bytes 0, "
            + "[0-9.]+ GB/s, version p50 [0-9.]+ ms max [0-9.]+ ms \\(trainers' first write to verified, 2 trainer ranks\\)");
    private static final Pattern TRAINER = Pattern.compile("trainer rank (\\d) pushed 2 versions of (\\d+) tensors, (\\d+) bytes, "
            + "to 2 engine ranks, [0-9.]+ GB/s");

    @Test
    void prefillAndDecodeJobsOnOneHostVerifyEveryByte() throws Exception {
        int port = freePort();
        Path[] logs = {log("decode"), log("prefill")};
        Process[] p = new Process[2];
        try {
            p[0] = start(commrun(List.of("--master-port", Integer.toString(port)), "--pd", "decode", List.of()), Map.of(), logs[0]);
            p[1] = start(commrun(List.of(), "--pd", "prefill", List.of("--store", "127.0.0.1:" + port)), Map.of(), logs[1]);
            check(p, logs);
        } finally {
            destroy(p);
        }
    }

    @Test
    void prefillAndDecodeJobsAcrossTwoNetworkNamespacesVerifyEveryByte() throws Exception {
        try (NetnsHosts h = NetnsHosts.create("pd" + ProcessHandle.current().pid() % 100_000)) {
            Path[] logs = {log("netns-decode"), log("netns-prefill")};
            Process[] p = new Process[2];
            try {
                p[0] = h.start(1, commrun(List.of("--master-addr", h.addr1, "--master-port", "29611"), "--pd", "decode",
                        List.of()), Map.of("JCOMM_HOST_ID", "h1"), logs[0]);
                p[1] = h.start(2, commrun(List.of(), "--pd", "prefill", List.of("--store", h.addr1 + ":29611")),
                        Map.of("JCOMM_HOST_ID", "h2"), logs[1]);
                check(p, logs);
            } finally {
                destroy(p);
            }
        }
    }

    @Test
    void trainerAndEngineJobsOnOneHostVerifyEveryByteOfEveryVersion() throws Exception {
        int port = freePort();
        Path[] logs = {log("engine"), log("trainer")};
        Process[] p = new Process[2];
        try {
            p[0] = start(commrun(List.of("--master-port", Integer.toString(port)), "--weights", "engine", List.of()), Map.of(),
                    logs[0]);
            p[1] = start(commrun(List.of(), "--weights", "trainer", List.of("--store", "127.0.0.1:" + port)), Map.of(), logs[1]);
            checkWeights(p, logs, "[shm, tcp]");
        } finally {
            destroy(p);
        }
    }

    @Test
    void trainerAndEngineJobsAcrossTwoNetworkNamespacesVerifyEveryByteOfEveryVersion() throws Exception {
        try (NetnsHosts h = NetnsHosts.create("wu" + ProcessHandle.current().pid() % 100_000)) {
            Path[] logs = {log("netns-engine"), log("netns-trainer")};
            Process[] p = new Process[2];
            try {
                p[0] = h.start(1, commrun(List.of("--master-addr", h.addr1, "--master-port", "29612"), "--weights", "engine",
                        List.of()), Map.of("JCOMM_HOST_ID", "h1"), logs[0]);
                p[1] = h.start(2, commrun(List.of(), "--weights", "trainer", List.of("--store", h.addr1 + ":29612")),
                        Map.of("JCOMM_HOST_ID", "h2"), logs[1]);
                checkWeights(p, logs, "");
            } finally {
                destroy(p);
            }
        }
    }

    private static void check(Process[] p, Path[] logs) throws Exception {
        String[] out = awaitJobs(p, logs, "decode", "prefill");
        String decode = out[0];
        String prefill = out[1];
        boolean[] verified = new boolean[2];
        Matcher m = DECODE.matcher(decode);
        while (m.find()) {
            assertEquals(60 * REQUEST_BYTES, Long.parseLong(m.group(2)), decode);
            verified[Integer.parseInt(m.group(1))] = true;
        }
        assertTrue(verified[0] && verified[1], "both decode ranks verify every byte:\n" + decode);
        for (int r = 0; r < 2; r++) {
            assertTrue(prefill.contains("prefill rank " + r + " wrote 60 requests, " + 60 * REQUEST_BYTES + " bytes"), prefill);
        }
    }

    /**
     * Both engine ranks verified every byte of both versions; the trainer ranks' shards add up to the
     * weight set, each pushed to both engine ranks. {@code transports}: what the engine's agents offer
     * (empty: not checked).
     */
    private static void checkWeights(Process[] p, Path[] logs, String transports) throws Exception {
        String[] out = awaitJobs(p, logs, "engine", "trainer");
        String engine = out[0];
        String trainer = out[1];
        boolean[] verified = new boolean[2];
        Matcher m = ENGINE.matcher(engine);
        while (m.find()) {
            assertEquals(2 * WEIGHT_BYTES, Long.parseLong(m.group(2)), engine);
            verified[Integer.parseInt(m.group(1))] = true;
        }
        assertTrue(verified[0] && verified[1], "both engine ranks verify every byte of every version:\n" + engine);
        assertTrue(engine.contains("published 5 regions of " + WEIGHT_BYTES + " bytes in all (13 tensors)"), engine);
        assertTrue(engine.contains(transports), engine);
        long tensors = 0;
        long bytes = 0;
        boolean[] pushed = new boolean[2];
        m = TRAINER.matcher(trainer);
        while (m.find()) {
            pushed[Integer.parseInt(m.group(1))] = true;
            tensors += Long.parseLong(m.group(2));
            bytes += Long.parseLong(m.group(3));
        }
        assertTrue(pushed[0] && pushed[1], trainer);
        assertEquals(13, tensors, "every tensor has one owner:\n" + trainer);
        assertEquals(2 * WEIGHT_BYTES, bytes, "the shards add up to the weight set:\n" + trainer);
    }

    /** Waits for both jobs; both exit 0 and leave nothing behind. Their output. */
    private static String[] awaitJobs(Process[] p, Path[] logs, String first, String second) throws Exception {
        for (int n = 0; n < 2; n++) {
            assertTrue(p[n].waitFor(JOB_SECONDS + 20, TimeUnit.SECONDS), "job " + n + " did not finish:\n" + Files.readString(logs[n]));
        }
        String[] out = {Files.readString(logs[0]), Files.readString(logs[1])};
        assertEquals(0, p[0].exitValue(), first + " job failed:\n" + out[0] + "\n" + second + " job:\n" + out[1]);
        assertEquals(0, p[1].exitValue(), second + " job failed:\n" + out[1] + "\n" + first + " job:\n" + out[0]);
        for (String o : out) {
            assertTrue(o.contains("2 ranks exited 0") && o.contains("no processes or /dev/shm files left behind"), o);
        }
        return out;
    }

    /**
     * {@code commrun} with {@code launcher} options, running {@code demo <demo> <role>} ({@code --pd} with
     * {@link #PD}'s sizes, {@code --weights} with {@link #WEIGHTS}'), a JVM of its own on the test class path.
     */
    private static List<String> commrun(List<String> launcher, String demo, String role, List<String> more) {
        List<String> cmd = new ArrayList<>(NetnsHosts.commrunJvm());
        cmd.addAll(List.of("--nproc-per-node", "2", "--timeout", Integer.toString(JOB_SECONDS)));
        cmd.addAll(launcher);
        cmd.addAll(List.of("demo", demo, role));
        cmd.addAll(demo.equals("--pd") ? PD : WEIGHTS);
        cmd.addAll(more);
        return cmd;
    }

    private static Process start(List<String> cmd, Map<String, String> env, Path log) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
        pb.environment().remove("JCOMM_TOKEN_FILE");
        pb.environment().putAll(env);
        return pb.start();
    }

    private static void destroy(Process[] p) {
        for (Process q : p) {
            if (q != null) {
                q.toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
                q.destroyForcibly();
            }
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0)) {
            return s.getLocalPort();
        }
    }

    private static Path log(String name) throws IOException {
        Files.createDirectories(Path.of("target"));
        return Path.of("target", "pd-demo-" + name + ".log").toAbsolutePath();
    }
}
