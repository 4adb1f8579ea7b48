package io.jcomm.testkit;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A fresh JVM for tests of what a cold process loads: runs a main class with the test's class path and
 * the JVM's class-load log ({@code -Xlog:class+load=info}, one line per class, {@code "<name> source:"}).
 */
public final class ChildJvm {

    private ChildJvm() {
    }

    /**
     * Runs {@code main} with {@code jvmArgs} before the class-load log and the class path; returns its
     * output (standard output and error, the log included) once it ended.
     *
     * @throws AssertionError when it has not ended within 40 s of its output's end
     */
    public static String classLoads(Class<?> main, List<String> jvmArgs) throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(jvmArgs);
        cmd.addAll(List.of("-Xlog:class+load=info", "-cp", System.getProperty("java.class.path"), main.getName()));
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!p.waitFor(40, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            throw new AssertionError("child JVM did not end: " + cmd);
        }
        return out;
    }
}
