package io.jcomm.it.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.tools.run.CommRun;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

/**
 * Runs a job through commrun inside the test JVM (its workers are real child JVMs), keeps the output,
 * and checks independently of commrun's own report that the job left no process and no
 * {@code /dev/shm} entry named after one of its processes behind.
 */
final class CommRunJob {

    final int exitCode;
    final String out;
    final String err;
    final Set<Long> pids;

    private CommRunJob(int exitCode, String out, String err, Set<Long> pids) {
        this.exitCode = exitCode;
        this.out = out;
        this.err = err;
        this.pids = pids;
    }

    static CommRunJob run(Map<String, String> extraEnv, String... args) throws InterruptedException {
        Map<String, String> env = new HashMap<>(System.getenv());
        env.remove("JCOMM_TOKEN_FILE");
        env.putAll(extraEnv);
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        ByteArrayOutputStream e = new ByteArrayOutputStream();
        Set<Long> seen = ConcurrentHashMap.newKeySet();
        Thread watch = new Thread(() -> {
            while (!Thread.currentThread().isInterrupted()) {
                try (Stream<ProcessHandle> d = ProcessHandle.current().descendants()) {
                    d.forEach(p -> seen.add(p.pid()));
                }
                try {
                    Thread.sleep(50);
                } catch (InterruptedException ex) {
                    return;
                }
            }
        }, "job-watch");
        watch.setDaemon(true);
        watch.start();
        int code;
        try {
            code = CommRun.commandLine(new CommRun(env, new PrintStream(tee(o, System.out), true, StandardCharsets.UTF_8),
                    new PrintStream(tee(e, System.err), true, StandardCharsets.UTF_8))).execute(args);
        } finally {
            watch.interrupt();
            watch.join(1000);
        }
        return new CommRunJob(code, o.toString(StandardCharsets.UTF_8), e.toString(StandardCharsets.UTF_8), Set.copyOf(seen));
    }

    private static OutputStream tee(OutputStream a, OutputStream b) {
        return new OutputStream() {
            @Override
            public synchronized void write(int c) throws IOException {
                a.write(c);
                b.write(c);
            }

            @Override
            public synchronized void write(byte[] buf, int off, int len) throws IOException {
                a.write(buf, off, len);
                b.write(buf, off, len);
            }
        };
    }

    /** Output lines of {@code rank} (without the prefix). */
    List<String> lines(int rank) {
        String tag = "[rank " + rank + "] ";
        List<String> out = new ArrayList<>();
        for (String l : (this.out + "\n" + err).split("\n")) {
            if (l.startsWith(tag)) {
                out.add(l.substring(tag.length()));
            }
        }
        return out;
    }

    /** The lines rank {@code rank}'s program printed itself: {@link #lines} without the SDK's log lines. */
    List<String> programLines(int rank) {
        List<String> out = new ArrayList<>(lines(rank));
        out.removeIf(l -> l.matches("\\[[^\\]]*\\] (TRACE|DEBUG|INFO|WARN|ERROR) io\\.jcomm\\..*"));
        return out;
    }

    void assertSucceeded() {
        assertEquals(0, exitCode, "commrun failed:\n" + err);
    }

    /** No process of the job alive, no /dev/shm entry named with one of its pids, and commrun says so too. */
    void assertNothingLeftBehind() throws IOException {
        assertFalse(pids.isEmpty(), "the workers were seen");
        for (long pid : pids) {
            assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "process " + pid + " of the job is alive");
        }
        Path shm = Path.of("/dev/shm");
        if (Files.isDirectory(shm)) {
            try (Stream<Path> s = Files.list(shm)) {
                s.map(p -> p.getFileName().toString()).filter(n -> n.startsWith("jcomm")).forEach(n -> {
                    for (String token : n.split("-")) {
                        for (long pid : pids) {
                            assertFalse(token.equals(Long.toString(pid)), "/dev/shm/" + n + " of job process " + pid + " is left");
                        }
                    }
                });
            }
        }
        assertTrue(err.contains("no processes or /dev/shm files left behind"), err);
    }
}
