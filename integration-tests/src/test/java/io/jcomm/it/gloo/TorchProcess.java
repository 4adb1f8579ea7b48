package io.jcomm.it.gloo;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * A PyTorch rank (Debian's {@code /usr/bin/python3} with torch 1.13) running a script from this
 * module's test resources. Output is echoed with a prefix and kept; {@link #close()} kills it.
 */
final class TorchProcess implements AutoCloseable {

    static final String PYTHON = "/usr/bin/python3";

    private final Process process;
    private final List<String> lines = Collections.synchronizedList(new ArrayList<>());
    private final Thread pump;

    private TorchProcess(Process process, String label) {
        this.process = process;
        this.pump = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(),
                    StandardCharsets.UTF_8))) {
                String l;
                while ((l = r.readLine()) != null) {
                    lines.add(l);
                    System.out.println("[" + label + "] " + l);
                }
            } catch (IOException ignored) {
                // process gone
            }
        }, label + "-out");
        pump.setDaemon(true);
        pump.start();
    }

    /** The torch version, or null when {@link #PYTHON} cannot import torch. */
    static String torchVersion() {
        try {
            Process p = new ProcessBuilder(PYTHON, "-c", "import torch; print(torch.__version__)")
                    .redirectErrorStream(true).start();
            String out;
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                out = String.join("\n", r.lines().toList()).trim();
            }
            if (!p.waitFor(60, TimeUnit.SECONDS)) {
                p.destroyForcibly();
                return null;
            }
            return p.exitValue() == 0 ? out : null;
        } catch (IOException e) {
            return null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return null;
        }
    }

    static Path script(String resource) {
        URL url = TorchProcess.class.getResource(resource);
        if (url == null) {
            throw new IllegalStateException("missing test resource " + resource);
        }
        try {
            return Path.of(url.toURI());
        } catch (URISyntaxException e) {
            throw new IllegalStateException(e);
        }
    }

    static TorchProcess start(String label, Path script, Map<String, String> env) throws IOException {
        ProcessBuilder pb = new ProcessBuilder(PYTHON, "-u", script.toString());
        pb.redirectErrorStream(true);
        pb.environment().putAll(env);
        return new TorchProcess(pb.start(), label);
    }

    /** Waits for exit; returns the exit code, or -1 (after killing it) when it did not exit in time. */
    int await(long timeout, TimeUnit unit) throws InterruptedException {
        if (!process.waitFor(timeout, unit)) {
            process.destroyForcibly();
            return -1;
        }
        pump.join(5000);
        return process.exitValue();
    }

    List<String> output() {
        synchronized (lines) {
            return List.copyOf(lines);
        }
    }

    /** The first line starting with {@code prefix}, or null. */
    String line(String prefix) {
        for (String l : output()) {
            if (l.startsWith(prefix)) {
                return l;
            }
        }
        return null;
    }

    @Override
    public void close() {
        process.descendants().forEach(ProcessHandle::destroyForcibly);
        process.destroyForcibly();
    }
}
