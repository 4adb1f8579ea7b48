package io.jcomm.tools.bench.rdzv;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * A store server in its own process, so that its CPU time and resident memory can be read from
 * {@code /proc}: commstore (this class path's {@code CommStoreCommand}) or torch's own TCPStore server
 * ({@code torch_store_crowd.py serve}). Its descriptor limit is raised through the shell's {@code ulimit}
 * before it starts (the hard limit too when this process may).
 */
final class ServerProcess implements AutoCloseable {

    /** Which server. */
    enum Kind {
        JCOMM, TORCH
    }

    /** Linux reports CPU time in /proc in USER_HZ ticks, 100 a second on every architecture torch ships on. */
    private static final double TICKS_PER_SECOND = 100;
    private static final Pattern JCOMM_READY = Pattern.compile("listening on \\S+:(\\d+)");
    private static final Pattern TORCH_READY = Pattern.compile("^READY (\\d+)");

    final Kind kind;
    final int port;
    private final Process process;

    private ServerProcess(Kind kind, Process process, int port) {
        this.kind = kind;
        this.process = process;
        this.port = port;
    }

    /**
     * Starts a server and waits (bounded) until it listens.
     *
     * @param expectedClients clients to come (commstore checks its descriptor budget against it)
     * @param descriptors     the descriptor limit to ask for
     * @param script          torch_store_crowd.py (TORCH only)
     */
    static ServerProcess start(Kind kind, int expectedClients, long descriptors, Path script, long timeoutMillis)
            throws IOException, InterruptedException {
        List<String> cmd = new ArrayList<>(List.of("/bin/sh", "-c",
                "ulimit -Hn " + descriptors + " 2>/dev/null; ulimit -Sn " + descriptors + " 2>/dev/null || "
                        + "ulimit -Sn \"$(ulimit -Hn)\"; exec \"$0\" \"$@\""));
        if (kind == Kind.JCOMM) {
            String java = ProcessHandle.current().info().command().orElse("java");
            cmd.addAll(List.of(java, "--add-opens", "java.base/java.nio=ALL-UNNAMED", "--add-opens",
                    "java.base/sun.nio.ch=ALL-UNNAMED", "-Dio.netty.tryReflectionSetAccessible=true",
                    "-Dio.netty.jfr.enabled=false", "-cp", System.getProperty("java.class.path"),
                    "io.jcomm.tools.store.CommStoreCommand", "--port", "0", "--quiet", "--world-size",
                    Integer.toString(expectedClients)));
        } else {
            if (!Files.isRegularFile(script)) {
                throw new IOException(script + " not found (--script)");
            }
            cmd.addAll(List.of("/usr/bin/python3", script.toString(), "serve", "--port", "0"));
        }
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        Pattern ready = kind == Kind.JCOMM ? JCOMM_READY : TORCH_READY;
        BufferedReader out = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
        CompletableFuture<Integer> port = new CompletableFuture<>();
        Thread reader = new Thread(() -> {
            try {
                String line;
                while ((line = out.readLine()) != null) {
                    Matcher m = ready.matcher(line);
                    if (!port.isDone() && m.find()) {
                        port.complete(Integer.parseInt(m.group(1)));
                    }
                    if (!port.isDone() || line.contains("WARN") || line.contains("ERROR") || line.contains("Error")) {
                        System.err.println("[" + kind.name().toLowerCase(java.util.Locale.ROOT) + " server] " + line);
                    }
                }
            } catch (IOException e) {
                // the server ended
            }
            port.complete(-1);
        }, "rdzv-server-log");
        reader.setDaemon(true);
        reader.start();
        int bound;
        try {
            bound = port.get(timeoutMillis, TimeUnit.MILLISECONDS);
        } catch (ExecutionException | TimeoutException e) {
            bound = -1;
        }
        ServerProcess s = new ServerProcess(kind, p, bound);
        if (bound <= 0) {
            s.close();
            throw new IOException(kind + " server did not start listening within " + timeoutMillis + " ms");
        }
        return s;
    }

    long pid() {
        return process.pid();
    }

    /** User plus system CPU seconds so far. */
    double cpuSeconds() throws IOException {
        String stat = String.join(" ", Files.readAllLines(Path.of("/proc", Long.toString(pid()), "stat")));
        String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
        // fields after the command: state is field 3, utime 14, stime 15 (1-based over the whole line)
        return (Long.parseLong(f[11]) + Long.parseLong(f[12])) / TICKS_PER_SECOND;
    }

    /** {@code VmRSS} and {@code VmHWM} in KiB. */
    long[] residentKiB() throws IOException {
        long rss = -1;
        long hwm = -1;
        for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid()), "status"))) {
            if (line.startsWith("VmRSS:")) {
                rss = Long.parseLong(line.replaceAll("\\D", ""));
            } else if (line.startsWith("VmHWM:")) {
                hwm = Long.parseLong(line.replaceAll("\\D", ""));
            }
        }
        return new long[] {rss, hwm};
    }

    /** The server's {@code Max open files} line of /proc/PID/limits. */
    String descriptorLimit() {
        return Limits.openFiles(Path.of("/proc", Long.toString(pid()), "limits"));
    }

    /** Stops the server: closes its standard input (torch's script serves until then), then TERM, then KILL. */
    @Override
    public void close() {
        try {
            process.getOutputStream().close();
        } catch (IOException e) {
            // already gone
        }
        try {
            if (kind == Kind.JCOMM || !process.waitFor(3, TimeUnit.SECONDS)) {
                process.destroy();
            }
            if (!process.waitFor(5, TimeUnit.SECONDS)) {
                process.destroyForcibly();
                process.waitFor(5, TimeUnit.SECONDS);
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        }
    }
}
