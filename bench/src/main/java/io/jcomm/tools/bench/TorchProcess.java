package io.jcomm.tools.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * Runs the torch side of a benchmark (a Python script that starts its own ranks) within a deadline: its
 * output goes line by line to a consumer on a reader thread, and past the deadline the script and every
 * process it started are killed. The wait never depends on the output ending: a rank the script left
 * behind may hold the pipe open after the script is gone.
 */
public final class TorchProcess {

    private TorchProcess() {
    }

    /**
     * Runs {@code command} (stderr merged into stdout) and hands each output line to {@code onLine}.
     *
     * @return the script's exit status, or -1 when it ran past {@code timeoutSeconds} (then it and its
     *         descendants were killed and a line saying so went to stderr, naming {@code who})
     */
    public static int run(List<String> command, long timeoutSeconds, String who, Consumer<String> onLine)
            throws IOException, InterruptedException {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        Thread reader = new Thread(() -> {
            try (BufferedReader in = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = in.readLine()) != null) {
                    onLine.accept(line);
                }
            } catch (IOException e) {
                // the process went away: its exit status says how
            }
        }, "torch-output");
        reader.setDaemon(true);
        reader.start();
        try {
            if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
                System.err.println(who + ": the torch side took longer than " + timeoutSeconds + " s; killed");
                return -1;
            }
            reader.join(TimeUnit.SECONDS.toMillis(5));
            return p.exitValue();
        } finally {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
        }
    }
}
