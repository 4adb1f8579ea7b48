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
 * namespaces (tcp over a veth pair; skipped without root).
 */
@Timeout(value = 240, unit = TimeUnit.SECONDS)
class PdDemoIT {

    private static final int JOB_SECONDS = 90;
    private static final List<String> SIZES = List.of("--requests", "60", "--layers", "3", "--blocks", "5",
            "--block-bytes", "12344", "--window", "3");
    private static final Pattern DECODE = Pattern.compile(
            "decode rank (\\d) verified 60 requests, (\\d+) bytes, wrong bytes 0, [0-9.]+ GB/s, latency p50 [0-9.]+ ms p99 [0-9.]+ ms");
    private static final long REQUEST_BYTES = 3L * 5 * 12344;

    @Test
    void prefillAndDecodeJobsOnOneHostVerifyEveryByte() throws Exception {
        int port = freePort();
        Path[] logs = {log("decode"), log("prefill")};
        Process[] p = new Process[2];
        try {
            p[0] = start(commrun(List.of("--master-port", Integer.toString(port)), "decode", List.of()), Map.of(), logs[0]);
            p[1] = start(commrun(List.of(), "prefill", List.of("--store", "127.0.0.1:" + port)), Map.of(), logs[1]);
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
                p[0] = h.start(1, commrun(List.of("--master-addr", h.addr1, "--master-port", "29611"), "decode", List.of()),
                        Map.of("JCOMM_HOST_ID", "h1"), logs[0]);
                p[1] = h.start(2, commrun(List.of(), "prefill", List.of("--store", h.addr1 + ":29611")),
                        Map.of("JCOMM_HOST_ID", "h2"), logs[1]);
                check(p, logs);
            } finally {
                destroy(p);
            }
        }
    }

    private static void check(Process[] p, Path[] logs) throws Exception {
        for (int n = 0; n < 2; n++) {
            assertTrue(p[n].waitFor(JOB_SECONDS + 20, TimeUnit.SECONDS), "job " + n + " did not finish:\n" + Files.readString(logs[n]));
        }
        String decode = Files.readString(logs[0]);
        String prefill = Files.readString(logs[1]);
        assertEquals(0, p[0].exitValue(), "decode job failed:\n" + decode + "\nprefill job:\n" + prefill);
        assertEquals(0, p[1].exitValue(), "prefill job failed:\n" + prefill + "\ndecode job:\n" + decode);
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
        for (String out : List.of(decode, prefill)) {
            assertTrue(out.contains("2 ranks exited 0") && out.contains("no processes or /dev/shm files left behind"), out);
        }
    }

    /** {@code commrun} with {@code launcher} options, running {@code demo --pd role}, a JVM of its own on the test class path. */
    private static List<String> commrun(List<String> launcher, String role, List<String> demo) {
        List<String> cmd = new ArrayList<>(NetnsHosts.commrunJvm());
        cmd.addAll(List.of("--nproc-per-node", "2", "--timeout", Integer.toString(JOB_SECONDS)));
        cmd.addAll(launcher);
        cmd.addAll(List.of("demo", "--pd", role));
        cmd.addAll(SIZES);
        cmd.addAll(demo);
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
