package io.jcomm.it.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** {@code bin/commstore} itself: starts, logs connections, serves, stops cleanly on SIGTERM. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class CommStoreScriptIT {

    private static final Pattern LISTENING = Pattern.compile("listening on [^ ]*:(\\d+)");

    @Test
    void binCommstoreServesAndLogsEveryConnection() throws Exception {
        Path root = Path.of("").toAbsolutePath().getParent();
        Path script = root.resolve("bin/commstore");
        assumeTrue(Files.isExecutable(script), "no bin/commstore under " + root);
        boolean jar;
        try (Stream<Path> s = Files.list(root.resolve("dist/target"))) {
            jar = s.anyMatch(p -> p.getFileName().toString().matches("jcomm-dist-.*(?<!-tests)\\.jar"));
        } catch (IOException e) {
            jar = false;
        }
        assumeTrue(jar, "the dist jar (what bin/ runs) is not built (run through the reactor: mvn -pl integration-tests -am verify)");
        ProcessBuilder pb = new ProcessBuilder(script.toString(), "--port", "0").redirectErrorStream(true);
        pb.environment().put("JCOMM_NO_BUILD", "1"); // never build from inside a test
        Process p = pb.start();
        List<String> lines = new ArrayList<>();
        try {
            BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), UTF_8));
            int port = -1;
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            String line;
            while (port < 0 && System.nanoTime() < end && (line = r.readLine()) != null) {
                System.out.println("[bin/commstore] " + line);
                lines.add(line);
                Matcher m = LISTENING.matcher(line);
                if (m.find()) {
                    port = Integer.parseInt(m.group(1));
                }
            }
            assertTrue(port > 0, "no listening line: " + lines);
            // it runs on the store artifact alone: no backend, no gloo, no JavaCPP on its class path
            String cmd = String.join(" ", Files.readAllLines(Path.of("/proc/" + p.pid() + "/cmdline"), UTF_8))
                    .replace('\0', ' ');
            assertTrue(cmd.contains("cpu-group-store-"), cmd);
            for (String absent : new String[] {"cpu-group-gloo-", "cpu-group-0", "javacpp", "device-communicator"}) {
                assertFalse(cmd.contains(absent), absent + " on commstore's class path: " + cmd);
            }
            try (TcpStore s = TcpStore.connect(TcpStoreConfig.builder().port(port).timeout(Duration.ofSeconds(10)).build())) {
                s.set("k", "v".getBytes(UTF_8));
                assertArrayEquals("v".getBytes(UTF_8), s.get("k"));
            }
            // the close line of our connection, with its dialect
            while ((line = r.readLine()) != null) {
                System.out.println("[bin/commstore] " + line);
                lines.add(line);
                if (line.contains("close #1")) {
                    break;
                }
            }
            assertTrue(lines.stream().anyMatch(l -> l.contains("open #1 /127.0.0.1:")), String.join("\n", lines));
            assertTrue(lines.stream().anyMatch(l -> l.contains("close #1") && l.contains("dialect=jcomm/2.1")
                    && l.contains("reason=closed by client")), String.join("\n", lines));
            p.destroy(); // SIGTERM: the shutdown hook closes the server
            assertTrue(p.waitFor(20, TimeUnit.SECONDS), "commstore did not stop on SIGTERM");
        } finally {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
        }
    }
}
