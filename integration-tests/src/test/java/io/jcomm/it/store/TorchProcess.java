package io.jcomm.it.store;


import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * A {@code /usr/bin/python3 torch_store.py} process: output kept for assertions and echoed with a
 * prefix, lines awaited with a deadline, lines written to its stdin; killed on close.
 */
final class TorchProcess implements AutoCloseable {

    static final String PYTHON = "/usr/bin/python3";
    private static volatile Boolean torchAvailable;

    private final Process process;
    private final List<String> lines = new ArrayList<>();
    private final Thread pump;
    private final OutputStream stdin;

    private TorchProcess(List<String> cmd, String label) throws IOException {
        process = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        stdin = process.getOutputStream();
        pump = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    System.out.println("[" + label + "] " + line);
                    synchronized (lines) {
                        lines.add(line);
                        lines.notifyAll();
                    }
                }
            } catch (IOException ignored) {
                // process gone
            }
            synchronized (lines) {
                lines.notifyAll();
            }
        }, "torch-out");
        pump.setDaemon(true);
        pump.start();
    }

    /** Skips the test (with the reason) when Debian's python3 with torch is not there. */
    static void assumeTorch() {
        if (torchAvailable == null) {
            boolean ok;
            try {
                Process p = new ProcessBuilder(PYTHON, "-c", "import torch.distributed").redirectErrorStream(true).start();
                ok = p.waitFor(60, TimeUnit.SECONDS) && p.exitValue() == 0;
            } catch (IOException | InterruptedException e) {
                ok = false;
            }
            torchAvailable = ok;
        }
        io.jcomm.testkit.Requirements.assume("torch", torchAvailable, PYTHON + " with torch.distributed is not available on this machine");
    }

    static Path script() {
        try {
            return Path.of(TorchProcess.class.getResource("/store/torch_store.py").toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Runs another script of Debian's python3 (e.g. one of the checkout's {@code scripts/}). */
    static TorchProcess startScript(Path script, String label, String... args) throws IOException {
        if (!Files.isRegularFile(script)) {
            throw new IllegalStateException("missing " + script);
        }
        List<String> cmd = new ArrayList<>(List.of(PYTHON, script.toString()));
        cmd.addAll(List.of(args));
        return new TorchProcess(cmd, label);
    }

    static TorchProcess start(String label, String... args) throws IOException {
        List<String> cmd = new ArrayList<>(List.of(PYTHON, script().toString()));
        cmd.addAll(List.of(args));
        if (!Files.isRegularFile(script())) {
            throw new IllegalStateException("missing " + script());
        }
        return new TorchProcess(cmd, label);
    }

    /** Waits for a line containing {@code text}; fails with the output when the process exits first. */
    String awaitLine(String text, Duration timeout) throws InterruptedException {
        long end = System.nanoTime() + timeout.toNanos();
        synchronized (lines) {
            int seen = 0;
            while (true) {
                for (int i = seen; i < lines.size(); i++) {
                    if (lines.get(i).contains(text)) {
                        return lines.get(i);
                    }
                }
                seen = lines.size();
                if (!process.isAlive() && !pump.isAlive()) {
                    throw new AssertionError("torch process exited (" + process.exitValue() + ") before printing '"
                            + text + "':\n" + String.join("\n", lines));
                }
                long left = end - System.nanoTime();
                if (left <= 0) {
                    throw new AssertionError("torch process did not print '" + text + "' in time:\n" + String.join("\n", lines));
                }
                lines.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
            }
        }
    }

    void writeLine(String s) throws IOException {
        stdin.write((s + "\n").getBytes(StandardCharsets.UTF_8));
        stdin.flush();
    }

    void closeStdin() throws IOException {
        stdin.close();
    }

    /** Waits for exit and returns the status (kills it at the deadline). */
    int waitFor(Duration timeout) throws InterruptedException {
        if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
            process.destroyForcibly();
            throw new AssertionError("torch process did not exit in time:\n" + output());
        }
        pump.join(2000);
        return process.exitValue();
    }

    String output() {
        synchronized (lines) {
            return String.join("\n", lines);
        }
    }

    List<String> lines() {
        synchronized (lines) {
            return List.copyOf(lines);
        }
    }

    @Override
    public void close() {
        process.descendants().forEach(ProcessHandle::destroyForcibly);
        process.destroyForcibly();
    }
}
