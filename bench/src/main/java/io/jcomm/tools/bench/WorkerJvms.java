package io.jcomm.tools.bench;

import io.jcomm.api.JvmFlags;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;

/**
 * The worker JVMs of one benchmark run on this host: rank r started with torchrun's environment
 * ({@code RANK}, {@code WORLD_SIZE}, {@code LOCAL_RANK}, {@code LOCAL_WORLD_SIZE}, {@code MASTER_ADDR},
 * {@code MASTER_PORT} of the benchmark's own store) plus the given variables, its merged output handed line
 * by line to a sink on a pump thread. {@link #close()} kills whatever is left.
 */
public final class WorkerJvms implements AutoCloseable {

    /** Receives every output line of a worker: its rank and the line. */
    public interface LineSink {
        void line(int rank, String line);
    }

    private final List<Process> procs = new ArrayList<>();
    private final List<Thread> pumps = new ArrayList<>();

    private WorkerJvms() {
    }

    /**
     * The command line of a JVM on this JVM's class path running {@code main}: this JVM's {@code java}, the
     * SDK's required flags ({@link JvmFlags#REQUIRED}), {@code jvmFlags}, the class path and the class; its
     * arguments to follow (the list is mutable).
     */
    public static List<String> javaCommand(List<String> jvmFlags, Class<?> main) {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(JvmFlags.REQUIRED);
        cmd.addAll(jvmFlags);
        cmd.addAll(List.of("-cp", System.getProperty("java.class.path"), main.getName()));
        return cmd;
    }

    /**
     * Starts {@code world} workers: {@code command.apply(rank)} is rank's command line; each one's environment
     * is this process's with {@link io.jcomm.api.JvmFlags#workerEnvironment}'s malloc tunable, torchrun's
     * variables and {@code env} (a {@code null} value removes the variable).
     */
    public static WorkerJvms start(int world, IntFunction<List<String>> command, int storePort, Map<String, String> env,
                                   LineSink sink, String threadName) throws IOException {
        WorkerJvms w = new WorkerJvms();
        try {
            for (int r = 0; r < world; r++) {
                ProcessBuilder pb = new ProcessBuilder(command.apply(r)).redirectErrorStream(true);
                Map<String, String> e = pb.environment();
                e.putAll(io.jcomm.api.JvmFlags.workerEnvironment(e));
                e.put("MASTER_ADDR", "127.0.0.1");
                e.put("MASTER_PORT", Integer.toString(storePort));
                e.put("RANK", Integer.toString(r));
                e.put("WORLD_SIZE", Integer.toString(world));
                e.put("LOCAL_RANK", Integer.toString(r));
                e.put("LOCAL_WORLD_SIZE", Integer.toString(world));
                env.forEach((k, v) -> {
                    if (v == null) {
                        e.remove(k);
                    } else {
                        e.put(k, v);
                    }
                });
                Process p = pb.start();
                w.procs.add(p);
                int rank = r;
                Thread pump = new Thread(() -> pump(p, rank, sink), threadName + "-" + r);
                pump.setDaemon(true);
                pump.start();
                w.pumps.add(pump);
            }
            return w;
        } catch (IOException | RuntimeException e) {
            w.close();
            throw e;
        }
    }

    private static void pump(Process p, int rank, LineSink sink) {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                sink.line(rank, line);
            }
        } catch (IOException ignored) {
            // the worker went away
        }
    }

    /**
     * Waits for every worker, at most {@code timeoutSeconds} in all. Returns 0 when all exited 0, 1 as soon
     * as one exits otherwise (its peers would only wait for it until their own timeouts; {@link #close()}
     * ends them) or when the time ran out (then saying so on stderr, prefixed by {@code who}).
     */
    public int await(long timeoutSeconds, String who) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(timeoutSeconds);
        while (true) {
            boolean running = false;
            for (Process p : procs) {
                if (p.isAlive()) {
                    running = true;
                } else if (p.exitValue() != 0) {
                    return 1;
                }
            }
            if (!running) {
                return 0;
            }
            if (System.nanoTime() - end > 0) {
                System.err.println(who + ": timed out after " + timeoutSeconds + " s");
                return 1;
            }
            for (Process p : procs) {
                if (p.isAlive()) {
                    p.waitFor(20, TimeUnit.MILLISECONDS);
                    break;
                }
            }
        }
    }

    /** Kills the workers that are left (and their children) and lets the pumps finish (bounded). */
    @Override
    public void close() {
        for (Process p : procs) {
            p.descendants().forEach(ProcessHandle::destroyForcibly);
            p.destroyForcibly();
        }
        for (Process p : procs) {
            try {
                p.waitFor(5, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
        for (Thread t : pumps) {
            try {
                t.join(2000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
    }
}
