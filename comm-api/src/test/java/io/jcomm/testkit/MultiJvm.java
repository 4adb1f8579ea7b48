package io.jcomm.testkit;

import io.jcomm.api.JvmFlags;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;
import java.util.function.Predicate;

/**
 * Starts N worker JVMs as the ranks of a job on this host, the way torchrun would: each gets the
 * project's JVM flags, the test's class path and torchrun-style environment ({@code RANK},
 * {@code WORLD_SIZE}, {@code LOCAL_RANK}, {@code LOCAL_WORLD_SIZE}, {@code MASTER_ADDR},
 * {@code MASTER_PORT}).
 *
 * <p>Guarantees: output is streamed with a {@code [rank N]} prefix and kept for assertions; a hard
 * deadline kills every worker; when a worker fails (non-zero exit not caused by {@link #kill}) the
 * others are killed; {@link #close()} kills whatever is left, including the workers' own child
 * processes; workers halt by themselves if the test JVM dies ({@link WorkerMain}).
 *
 * <pre>{@code
 * try (MultiJvm job = MultiJvm.builder().worldSize(4).mainClass(MyWorker.class)
 *         .masterPort(port).deadline(Duration.ofSeconds(60)).start()) {
 *     MultiJvm.Results r = job.awaitAll();
 *     r.assertAllSucceeded();
 * }
 * }</pre>
 */
public final class MultiJvm implements AutoCloseable {

    private static final int MAX_LINES_KEPT = 20_000;

    private final Builder config;
    private final long deadlineNanos;
    private final Process[] processes;
    private final List<List<String>> outputs;
    private final Thread[] pumps;
    private final boolean[] killedOnPurpose;
    private final Object lineLock = new Object();
    private volatile String firstFailure;

    private MultiJvm(Builder b) throws IOException {
        this.config = b;
        this.deadlineNanos = System.nanoTime() + b.deadline.toNanos();
        int n = b.worldSize;
        this.processes = new Process[n];
        this.pumps = new Thread[n];
        this.killedOnPurpose = new boolean[n];
        List<List<String>> outs = new ArrayList<>(n);
        for (int i = 0; i < n; i++) {
            outs.add(Collections.synchronizedList(new ArrayList<>()));
        }
        this.outputs = outs;
        try {
            for (int rank = 0; rank < n; rank++) {
                processes[rank] = launch(rank);
                final int r = rank;
                pumps[rank] = new Thread(() -> pump(r), "multijvm-out-" + rank);
                pumps[rank].setDaemon(true);
                pumps[rank].start();
            }
        } catch (IOException | RuntimeException e) {
            killAll();
            throw e;
        }
    }

    public static Builder builder() {
        return new Builder();
    }

    private Process launch(int rank) throws IOException {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.addAll(JvmFlags.REQUIRED);
        if (config.jvmArgs.stream().noneMatch(a -> a.matches("-XX:\\+Use\\w+GC"))) {
            cmd.add("-XX:+UseSerialGC"); // the default; a collector among the JVM arguments replaces it
        }
        cmd.addAll(List.of("-XX:-UsePerfData", "-Xmx" + config.maxHeap));
        cmd.addAll(config.jvmArgs);
        cmd.add("-cp");
        cmd.add(config.classPath);
        cmd.add(WorkerMain.class.getName());
        cmd.add(config.mainClass);
        cmd.addAll(config.argsForRank.apply(rank));
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.redirectErrorStream(true);
        Map<String, String> env = pb.environment();
        env.put("MASTER_ADDR", config.masterAddr);
        env.put("MASTER_PORT", Integer.toString(config.masterPort));
        env.put("RANK", Integer.toString(rank));
        env.put("WORLD_SIZE", Integer.toString(config.worldSize));
        int lws = config.localWorldSize > 0 ? config.localWorldSize : config.worldSize;
        env.put("LOCAL_RANK", Integer.toString(rank % lws));
        env.put("LOCAL_WORLD_SIZE", Integer.toString(lws));
        env.putAll(config.env);
        env.putAll(config.envForRank.apply(rank));
        return pb.start();
    }

    private void pump(int rank) {
        Process p = processes[rank];
        PrintStream sink = config.echo;
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            String line;
            while ((line = r.readLine()) != null) {
                List<String> out = outputs.get(rank);
                if (out.size() < MAX_LINES_KEPT) {
                    out.add(line);
                }
                if (sink != null) {
                    sink.println("[" + config.name + " rank " + rank + "] " + line);
                }
                synchronized (lineLock) {
                    lineLock.notifyAll();
                }
            }
        } catch (IOException ignored) {
            // process gone
        }
        synchronized (lineLock) {
            lineLock.notifyAll();
        }
    }

    public int worldSize() {
        return processes.length;
    }

    public Process process(int rank) {
        return processes[rank];
    }

    public long pid(int rank) {
        return processes[rank].pid();
    }

    /** Lines printed so far by {@code rank} (stdout and stderr). */
    public List<String> output(int rank) {
        synchronized (outputs.get(rank)) {
            return List.copyOf(outputs.get(rank));
        }
    }

    /** Kills {@code rank} with SIGKILL (like {@code kill -9}); its exit is not counted as a failure. */
    public void kill(int rank) {
        synchronized (killedOnPurpose) {
            killedOnPurpose[rank] = true;
        }
        processes[rank].toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
        processes[rank].destroyForcibly();
    }

    /**
     * Waits until {@code rank} prints a line matching {@code match}.
     *
     * @return the line
     * @throws AssertionError if the worker exits first or {@code timeout} passes
     */
    public String awaitLine(int rank, Predicate<String> match, Duration timeout) {
        long end = System.nanoTime() + Math.min(timeout.toNanos(), Math.max(0, deadlineNanos - System.nanoTime()));
        int seen = 0;
        synchronized (lineLock) {
            while (true) {
                List<String> out = output(rank);
                for (int i = seen; i < out.size(); i++) {
                    if (match.test(out.get(i))) {
                        return out.get(i);
                    }
                }
                seen = out.size();
                if (!processes[rank].isAlive() && !pumps[rank].isAlive()) {
                    throw new AssertionError("rank " + rank + " exited (" + processes[rank].exitValue()
                            + ") before printing the awaited line\n" + tail(rank));
                }
                long left = end - System.nanoTime();
                if (left <= 0) {
                    throw new AssertionError("rank " + rank + " did not print the awaited line in time\n" + tail(rank));
                }
                try {
                    lineLock.wait(Math.max(1, TimeUnit.NANOSECONDS.toMillis(left)));
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    throw new AssertionError("interrupted", e);
                }
            }
        }
    }

    /** Waits for a line containing {@code text}. */
    public String awaitLine(int rank, String text, Duration timeout) {
        return awaitLine(rank, l -> l.contains(text), timeout);
    }

    /**
     * Waits until every worker has exited, or the deadline passes (then all are killed). When a
     * worker fails (exit code other than 0 and not killed on purpose), the others are killed at once
     * unless {@link Builder#keepOthersOnFailure()} was set.
     */
    public Results awaitAll() {
        int n = processes.length;
        boolean[] done = new boolean[n];
        int remaining = n;
        boolean timedOut = false;
        while (remaining > 0) {
            for (int r = 0; r < n; r++) {
                if (done[r] || processes[r].isAlive()) {
                    continue;
                }
                done[r] = true;
                remaining--;
                int code = processes[r].exitValue();
                boolean purposeful;
                synchronized (killedOnPurpose) {
                    purposeful = killedOnPurpose[r];
                }
                if (code != 0 && !purposeful && firstFailure == null) {
                    firstFailure = "rank " + r + " exited with " + code;
                    if (!config.keepOthersOnFailure) {
                        killAll();
                    }
                }
            }
            if (remaining == 0) {
                break;
            }
            if (System.nanoTime() - deadlineNanos > 0) {
                timedOut = true;
                killAll();
                waitForExit(Duration.ofSeconds(10));
                break;
            }
            try {
                Thread.sleep(5);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                killAll();
                throw new AssertionError("interrupted", e);
            }
        }
        for (Thread t : pumps) {
            try {
                t.join(2000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        Map<Integer, Integer> codes = new LinkedHashMap<>();
        Map<Integer, List<String>> outs = new HashMap<>();
        boolean[] purposeful = new boolean[n];
        for (int r = 0; r < n; r++) {
            codes.put(r, processes[r].isAlive() ? -1 : processes[r].exitValue());
            outs.put(r, output(r));
            synchronized (killedOnPurpose) {
                purposeful[r] = killedOnPurpose[r];
            }
        }
        return new Results(config.name, codes, outs, purposeful, timedOut, firstFailure);
    }

    private void waitForExit(Duration d) {
        long end = System.nanoTime() + d.toNanos();
        for (Process p : processes) {
            long left = end - System.nanoTime();
            if (left > 0) {
                try {
                    p.waitFor(left, TimeUnit.NANOSECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    return;
                }
            }
        }
    }

    private void killAll() {
        for (Process p : processes) {
            if (p != null) {
                p.toHandle().descendants().forEach(ProcessHandle::destroyForcibly);
                p.destroyForcibly();
            }
        }
    }

    private String tail(int rank) {
        List<String> out = output(rank);
        int from = Math.max(0, out.size() - 40);
        return "--- last lines of rank " + rank + " ---\n" + String.join("\n", out.subList(from, out.size()));
    }

    /** Kills every worker still running and waits (bounded) for them to go. */
    @Override
    public void close() {
        killAll();
        waitForExit(Duration.ofSeconds(10));
    }

    /** Exit codes and output of a finished job. */
    public static final class Results {
        private final String name;
        private final Map<Integer, Integer> exitCodes;
        private final Map<Integer, List<String>> outputs;
        private final boolean[] killedOnPurpose;
        private final boolean timedOut;
        private final String firstFailure;

        Results(String name, Map<Integer, Integer> exitCodes, Map<Integer, List<String>> outputs,
                boolean[] killedOnPurpose, boolean timedOut, String firstFailure) {
            this.name = name;
            this.exitCodes = exitCodes;
            this.outputs = outputs;
            this.killedOnPurpose = killedOnPurpose;
            this.timedOut = timedOut;
            this.firstFailure = firstFailure;
        }

        public int exitCode(int rank) {
            return exitCodes.get(rank);
        }

        public List<String> output(int rank) {
            return outputs.get(rank);
        }

        public boolean timedOut() {
            return timedOut;
        }

        /** Lines of {@code rank} containing {@code text}. */
        public List<String> linesContaining(int rank, String text) {
            List<String> out = new ArrayList<>();
            for (String l : outputs.get(rank)) {
                if (l.contains(text)) {
                    out.add(l);
                }
            }
            return out;
        }

        /** Throws an AssertionError with every rank's exit code and output tail unless all exited 0. */
        public void assertAllSucceeded() {
            assertSucceeded(r -> true);
        }

        /** Like {@link #assertAllSucceeded()} for the ranks not killed on purpose. */
        public void assertSurvivorsSucceeded() {
            assertSucceeded(r -> !killedOnPurpose[r]);
        }

        private void assertSucceeded(Predicate<Integer> which) {
            StringBuilder sb = new StringBuilder();
            boolean bad = timedOut;
            for (Map.Entry<Integer, Integer> e : exitCodes.entrySet()) {
                if (which.test(e.getKey()) && e.getValue() != 0) {
                    bad = true;
                }
            }
            if (!bad) {
                return;
            }
            sb.append(name).append(timedOut ? ": deadline passed" : ": worker failure");
            if (firstFailure != null) {
                sb.append(" (first: ").append(firstFailure).append(')');
            }
            sb.append('\n');
            for (Map.Entry<Integer, Integer> e : exitCodes.entrySet()) {
                List<String> out = outputs.get(e.getKey());
                int from = Math.max(0, out.size() - 60);
                sb.append("--- rank ").append(e.getKey()).append(" exit ").append(e.getValue()).append(" ---\n");
                sb.append(String.join("\n", out.subList(from, out.size()))).append('\n');
            }
            throw new AssertionError(sb.toString());
        }
    }

    /** Configuration of a {@link MultiJvm} job. */
    public static final class Builder {
        private String name = "job";
        private int worldSize = 2;
        private int localWorldSize = -1;
        private String mainClass;
        private IntFunction<List<String>> argsForRank = r -> List.of();
        private final Map<String, String> env = new HashMap<>();
        private IntFunction<Map<String, String>> envForRank = r -> Map.of();
        private final List<String> jvmArgs = new ArrayList<>();
        private Duration deadline = Duration.ofSeconds(120);
        private String masterAddr = "127.0.0.1";
        private int masterPort = -1;
        private String classPath = System.getProperty("java.class.path");
        private String maxHeap = "1g";
        private PrintStream echo = System.out;
        private boolean keepOthersOnFailure;

        private Builder() {
        }

        /** A label for output prefixes and failure messages. */
        public Builder name(String v) { this.name = v; return this; }
        public Builder worldSize(int v) { this.worldSize = v; return this; }
        /** Ranks per "host" for LOCAL_RANK/LOCAL_WORLD_SIZE (default: all on one). */
        public Builder localWorldSize(int v) { this.localWorldSize = v; return this; }
        public Builder mainClass(Class<?> v) { this.mainClass = v.getName(); return this; }
        public Builder mainClass(String v) { this.mainClass = v; return this; }
        public Builder args(String... v) { List<String> a = List.of(v); this.argsForRank = r -> a; return this; }
        public Builder argsForRank(IntFunction<List<String>> v) { this.argsForRank = v; return this; }
        public Builder env(String k, String v) { this.env.put(k, v); return this; }
        public Builder env(Map<String, String> v) { this.env.putAll(v); return this; }
        public Builder envForRank(IntFunction<Map<String, String>> v) { this.envForRank = v; return this; }
        /** An extra JVM argument; a collector ({@code -XX:+UseG1GC}...) replaces the default serial one. */
        public Builder jvmArg(String v) { this.jvmArgs.add(v); return this; }
        /** Hard deadline for the whole job; every worker is killed when it passes. */
        public Builder deadline(Duration v) { this.deadline = v; return this; }
        public Builder masterAddr(String v) { this.masterAddr = v; return this; }
        public Builder masterPort(int v) { this.masterPort = v; return this; }
        public Builder classPath(String v) { this.classPath = v; return this; }
        public Builder maxHeap(String v) { this.maxHeap = v; return this; }
        /** Where prefixed output goes ({@code null}: only kept). */
        public Builder echo(PrintStream v) { this.echo = v; return this; }
        /** Do not kill the other workers when one fails (failure-injection tests). */
        public Builder keepOthersOnFailure() { this.keepOthersOnFailure = true; return this; }

        public MultiJvm start() {
            Objects.requireNonNull(mainClass, "mainClass");
            if (worldSize < 1) {
                throw new IllegalArgumentException("worldSize " + worldSize);
            }
            if (masterPort < 0) {
                masterPort = FreePorts.find();
            }
            try {
                return new MultiJvm(this);
            } catch (IOException e) {
                throw new AssertionError("could not start workers", e);
            }
        }

        public int masterPort() {
            return masterPort;
        }
    }
}
