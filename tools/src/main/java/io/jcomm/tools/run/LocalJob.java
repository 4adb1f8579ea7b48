package io.jcomm.tools.run;

import io.jcomm.api.config.Settings;
import io.jcomm.api.JvmFlags;
import io.jcomm.runtime.registry.JobRegistry;
import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The worker JVMs of one node of a {@code commrun} job: starts them, streams their output with a
 * {@code [rank N]} prefix, and stops them all when one fails, when the deadline passes, or when the
 * launcher is asked to stop ({@link #stop}): SIGTERM first, SIGKILL after the grace period. Each
 * worker's standard input is a pipe the launcher keeps open, so that workers exit by themselves when
 * the launcher dies ({@link RunWorker}).
 */
final class LocalJob {

    /** Why the job ended. */
    enum Outcome { SUCCEEDED, FAILED, STOPPED, TIMED_OUT }

    /** Result of {@link #await}. */
    record Result(Outcome outcome, int exitCode, int firstFailedRank, int[] exitCodes, List<Integer> lost, int restarts) {
    }

    /**
     * How long after the launch the janitor starts scanning the workers' shared memory (it records
     * their processes from the first sample): the scans would compete with the workers' start.
     */
    static final long SHM_SCAN_DELAY_NANOS = java.util.concurrent.TimeUnit.SECONDS.toNanos(1);

    private final RunPlan plan;
    private final PrintStream out;
    private final PrintStream err;
    private final boolean prefix;
    private final Process[] processes;
    private final List<Thread> pumps = new ArrayList<>();
    private final BlockingQueue<Integer> exits = new LinkedBlockingQueue<>();
    private final AtomicBoolean stopping = new AtomicBoolean();
    private final JobJanitor janitor;
    private final Thread sampler;
    private final Duration stallReport;
    /** The workers' class-data archive; finished once every worker has exited. */
    private final AppCds.Launch cds;
    private volatile StallWatch stalls;
    private volatile boolean stopRequested;
    /** What {@link #launch} needs to start a worker again (set once by {@link #start}). */
    private String launched;
    private Map<String, String> parentEnv;
    private Path workerJar;
    private List<String> nodeArgs;

    private LocalJob(RunPlan plan, PrintStream out, PrintStream err, boolean prefix, Path shmDir, Duration stallReport,
                     AppCds.Launch cds, Path registry) {
        this.plan = plan;
        this.cds = cds;
        this.stallReport = stallReport;
        this.out = out;
        this.err = err;
        this.prefix = prefix;
        this.processes = new Process[plan.nprocPerNode() + plan.spares()];
        this.janitor = new JobJanitor(shmDir, registry);
        this.sampler = new Thread(this::sampleLoop, "commrun-janitor");
        this.sampler.setDaemon(true);
    }

    /** Starts every worker of this node. */
    static LocalJob start(RunPlan plan, Map<String, String> parentEnv, PrintStream out, PrintStream err,
                          boolean prefix, Path shmDir) throws IOException {
        return start(plan, parentEnv, out, err, prefix, shmDir, Duration.ZERO);
    }

    /**
     * Starts every worker of this node; with a positive {@code stallReport}, prints a stall report
     * ({@link StallWatch}) when no rank's operations advanced for that long, and on a failure.
     */
    static LocalJob start(RunPlan plan, Map<String, String> parentEnv, PrintStream out, PrintStream err,
                          boolean prefix, Path shmDir, Duration stallReport) throws IOException {
        // an outer launcher's time (a scheduler's job script that set it) stays: the job was launched then
        String inherited = parentEnv.get(Settings.LAUNCH_EPOCH_MS.name());
        String launched = inherited != null && inherited.trim().matches("[0-9]{1,18}") ? inherited.trim()
                : Long.toString(System.currentTimeMillis());
        Path cache = AppCds.Options.cacheRoot(parentEnv);
        Path workerJar = WorkerJar.prepare(cache, plan.classPath());
        LocalJob job = new LocalJob(plan, out, err, prefix, shmDir, stallReport,
                classDataArchive(plan, AppCds.Options.fromEnvironment(parentEnv), workerJar),
                JobRegistry.configuredDirectory(parentEnv).orElse(null));
        int dumper = archiveWriter(plan.nprocPerNode());
        List<String> nodeArgs = new ArrayList<>(EpollLibraryCache.jvmArgs(cache, plan.classPath(),
                System.getProperty("os.name"), System.getProperty("os.arch"), System.getProperty("java.library.path")));
        nodeArgs.addAll(WorkerJit.jvmArgs(plan.nprocPerNode(), Runtime.getRuntime().availableProcessors()));
        job.launched = launched;
        job.parentEnv = parentEnv;
        job.workerJar = workerJar;
        job.nodeArgs = List.copyOf(nodeArgs);
        try {
            for (int local = 0; local < plan.nprocPerNode(); local++) {
                job.launch(local, plan.workerEnv(parentEnv, local), local == dumper);
            }
            for (int i = 0; i < plan.spares(); i++) {
                job.launch(plan.nprocPerNode() + i, plan.spareEnv(parentEnv, i), false);
            }
        } catch (IOException | RuntimeException e) {
            job.stop(Duration.ZERO);
            job.cds.finish(false);
            throw e;
        }
        long[] pids = new long[plan.nprocPerNode()];
        int[] ranks = new int[plan.nprocPerNode()];
        for (int i = 0; i < pids.length; i++) {
            pids[i] = job.processes[i].pid();
            ranks[i] = plan.globalRank(i);
        }
        // several nodes: the launchers share their ranks' state through the job's store (node 0 merges)
        StallExchange exchange = plan.nnodes() > 1 && !stallReport.isZero() ? new StallExchange(plan) : null;
        job.stalls = new StallWatch(shmDir, stallReport, err, plan.javaBinary(), pids, ranks, exchange);
        job.sampler.start();
        return job;
    }

    /**
     * Starts process {@code idx} (a worker below {@link RunPlan#nprocPerNode()}, a spare from there on) with
     * {@code env}, and pumps its output.
     */
    private void launch(int idx, Map<String, String> env, boolean dumper) throws IOException {
        List<String> launchArgs = new ArrayList<>(cds.jvmArgs(dumper));
        launchArgs.addAll(nodeArgs);
        ProcessBuilder pb = new ProcessBuilder(plan.workerCommand(idx, launchArgs, workerJar));
        Map<String, String> e = pb.environment();
        e.clear();
        e.putAll(env);
        e.put(Settings.LAUNCH_EPOCH_MS.name(), launched);
        Process p = pb.start();
        processes[idx] = p;
        janitor.add(p.toHandle());
        String tag = idx < plan.nprocPerNode() ? "rank " + plan.globalRank(idx) : "spare " + (idx - plan.nprocPerNode());
        pump(p.getInputStream(), out, tag, "out");
        pump(p.getErrorStream(), err, tag, "err");
        p.onExit().thenRun(() -> exits.add(idx));
    }

    /**
     * The class-data archive of the plan's workers: keyed by their {@code java}, their JVM flags, their
     * class path (with the {@link WorkerJar} they start from, if any: the archive records it, and a
     * rewritten one is another key) and the program ({@link RunWorker} and the main class).
     */
    static AppCds.Launch classDataArchive(RunPlan plan, AppCds.Options settings, Path workerJar) {
        List<String> args = new ArrayList<>(JvmFlags.REQUIRED);
        args.addAll(plan.jvmArgs());
        String classPath = workerJar == null ? plan.classPath() : workerJar + File.pathSeparator + plan.classPath();
        return AppCds.prepare(settings, plan.javaBinary(), classPath, args,
                RunWorker.class.getName() + " " + plan.mainClass());
    }

    /**
     * The local rank that writes the class-data archive when a launch makes one: the second worker
     * when there is one (in a group mesh it both accepts and connects, so it loads the classes of
     * either side).
     */
    static int archiveWriter(int nprocPerNode) {
        return Math.min(1, nprocPerNode - 1);
    }

    /** What this job does with its workers' class-data archive. */
    AppCds.Launch classDataArchive() {
        return cds;
    }

    private void pump(InputStream in, PrintStream sink, String who, String kind) {
        String tag = prefix ? "[" + who + "] " : "";
        Thread t = new Thread(() -> {
            try (BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null) {
                    synchronized (sink) {
                        sink.println(tag + line);
                    }
                }
            } catch (IOException ignored) {
                // the worker went away
            }
            sink.flush();
        }, "commrun-" + kind + "-" + who.replace(' ', '-'));
        t.setDaemon(true);
        t.start();
        pumps.add(t);
    }

    private void sampleLoop() {
        long shmScansFrom = System.nanoTime() + SHM_SCAN_DELAY_NANOS;
        while (true) {
            janitor.sample(System.nanoTime() - shmScansFrom >= 0);
            StallWatch w = stalls;
            if (w != null) {
                w.poll();
            }
            boolean any = false;
            for (Process p : processes) {
                any |= p != null && p.isAlive();
            }
            if (!any) {
                return;
            }
            try {
                Thread.sleep(150);
            } catch (InterruptedException e) {
                return;
            }
        }
    }

    Process process(int localRank) {
        return processes[localRank];
    }

    JobJanitor janitor() {
        return janitor;
    }

    /**
     * Waits until every worker has exited. The first worker to exit non-zero makes the others stop
     * (SIGTERM, then SIGKILL after the grace period) and gives the job its exit code, unless the plan lets
     * the job go on without it ({@link RunPlan#maxLost()}, a spare to take its place) or start it again
     * ({@link RunPlan#maxRestarts()}). Once every worker has exited, {@code workersDone} runs (the launcher
     * tells waiting spares that the job is over) and the spares get the grace period to exit by themselves.
     *
     * @param deadline    the longest the job may run ({@code null}: no limit)
     * @param workersDone run once when every worker has exited while spares are still running (may be null)
     */
    Result await(Duration deadline, Runnable workersDone) throws InterruptedException {
        int n = plan.nprocPerNode();
        int[] codes = new int[n];
        java.util.Arrays.fill(codes, -1);
        int remaining = n;
        int sparesRunning = plan.spares();
        int firstFailed = -1;
        int firstCode = 0;
        int restarts = 0;
        int replacedBySpares = 0;
        List<Integer> lost = new ArrayList<>();
        boolean timedOut = false;
        long sparesUntil = Long.MAX_VALUE;
        long end = deadline == null ? Long.MAX_VALUE : System.nanoTime() + deadline.toNanos();
        while (remaining + sparesRunning > 0) {
            if (remaining == 0 && sparesUntil == Long.MAX_VALUE) {
                // every worker is done: the spares still waiting for a vacancy are not needed any more
                sparesUntil = System.nanoTime() + plan.grace().toNanos();
                if (workersDone != null) {
                    workersDone.run();
                }
            }
            if (System.nanoTime() - sparesUntil > 0 && !stopping.get()) {
                stopAsync();
            }
            long left = Math.min(end, sparesUntil) - System.nanoTime();
            Integer idx = exits.poll(Math.max(1, Math.min(left, TimeUnit.SECONDS.toNanos(1))), TimeUnit.NANOSECONDS);
            if (idx == null) {
                if (deadline != null && System.nanoTime() - end >= 0 && !timedOut) {
                    timedOut = true;
                    err.println("commrun: the job ran longer than " + deadline.toSeconds() + " s; stopping it");
                    stopAsync();
                }
                continue;
            }
            int code = processes[idx].exitValue();
            boolean going = firstFailed < 0 && !stopRequested && !timedOut;
            if (idx >= n) {
                sparesRunning--;
                if (code != 0 && going && remaining > 0) {
                    err.println("commrun: spare " + (idx - n) + " exited with " + code + describe(code));
                }
                continue;
            }
            if (code != 0 && going && restarts < plan.maxRestarts()) {
                restarts++;
                err.println("commrun: rank " + plan.globalRank(idx) + " exited with " + code + describe(code)
                        + "; starting it again (restart " + restarts + " of " + plan.maxRestarts() + ", --max-restarts)");
                try {
                    launch(idx, plan.restartEnv(parentEnv, idx, restarts), false);
                    continue;
                } catch (IOException | RuntimeException e) {
                    err.println("commrun: cannot start rank " + plan.globalRank(idx) + " again: " + e.getMessage());
                }
            }
            remaining--;
            codes[idx] = code;
            if (code != 0 && going && replacedBySpares < plan.spares()) {
                replacedBySpares++;
                lost.add(idx);
                err.println("commrun: rank " + plan.globalRank(idx) + " exited with " + code + describe(code)
                        + "; a spare takes its place (" + replacedBySpares + " of " + plan.spares() + ", --spares)");
                continue;
            }
            if (code != 0 && going && lost.size() - replacedBySpares < plan.maxLost()) {
                lost.add(idx);
                err.println("commrun: rank " + plan.globalRank(idx) + " exited with " + code + describe(code) + "; lost "
                        + (lost.size() - replacedBySpares) + " of at most " + plan.maxLost() + " (--max-lost): the others go on");
                continue;
            }
            if (code != 0 && going) {
                firstFailed = plan.globalRank(idx);
                firstCode = code;
                if (remaining + sparesRunning > 0) {
                    err.println("commrun: rank " + firstFailed + " exited with " + code + describe(code)
                            + "; stopping the other ranks");
                    StallWatch w = stalls;
                    if (w != null && !stallReport.isZero()) {
                        w.reportNow("rank " + firstFailed + " exited with " + code + describe(code)
                                + "; the others as they were before being stopped");
                    }
                    stopAsync();
                }
            }
        }
        joinPumps();
        cds.finish(codes[archiveWriter(n)] == 0);
        Outcome o = timedOut ? Outcome.TIMED_OUT : firstFailed >= 0 ? Outcome.FAILED : stopRequested ? Outcome.STOPPED
                : Outcome.SUCCEEDED;
        int code = o == Outcome.TIMED_OUT ? 124 : o == Outcome.FAILED ? firstCode : o == Outcome.STOPPED ? 143 : 0;
        return new Result(o, code, firstFailed, codes, List.copyOf(lost), restarts);
    }

    /** {@link #await(Duration, Runnable)} without spares to tell. */
    Result await(Duration deadline) throws InterruptedException {
        return await(deadline, null);
    }

    static String describe(int code) {
        if (code == RunWorker.LAUNCHER_GONE_STATUS) {
            return " (its launcher went away)";
        }
        if (code > 128 && code < 160) {
            int sig = code - 128;
            String name = sig == 9 ? "SIGKILL" : sig == 15 ? "SIGTERM" : sig == 2 ? "SIGINT" : sig == 6 ? "SIGABRT"
                    : sig == 11 ? "SIGSEGV" : "signal " + sig;
            return " (" + name + ")";
        }
        return "";
    }

    private void stopAsync() {
        Thread t = new Thread(() -> stop(plan.grace()), "commrun-stop");
        t.setDaemon(true);
        t.start();
    }

    /** Asks the job to stop (e.g. on SIGTERM of the launcher); the outcome becomes {@code STOPPED}. */
    void requestStop() {
        stopRequested = true;
    }

    /**
     * Stops every worker still running: SIGTERM, then SIGKILL (the worker and its descendants) after
     * {@code grace}. Blocks until they are gone (bounded). Safe to call more than once.
     */
    void stop(Duration grace) {
        if (!stopping.compareAndSet(false, true)) {
            waitGone(grace.plusSeconds(5));
            return;
        }
        // ProcessHandle.destroy only signals; Process.destroy would also close the worker's pipes, which
        // loses its last output and makes it see end-of-file on stdin (as if the launcher had died)
        for (Process p : processes) {
            if (p != null && p.isAlive()) {
                p.toHandle().destroy();
            }
        }
        if (!waitGone(grace)) {
            for (Process p : processes) {
                if (p != null && p.isAlive()) {
                    p.descendants().forEach(ProcessHandle::destroyForcibly);
                    p.toHandle().destroyForcibly();
                }
            }
            waitGone(Duration.ofSeconds(5));
        }
    }

    private boolean waitGone(Duration d) {
        long end = System.nanoTime() + d.toNanos();
        for (Process p : processes) {
            if (p == null) {
                continue;
            }
            long left = end - System.nanoTime();
            try {
                if (left <= 0 ? p.isAlive() : !p.waitFor(left, TimeUnit.NANOSECONDS)) {
                    return false;
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
        return true;
    }

    private void joinPumps() throws InterruptedException {
        for (Thread t : pumps) {
            t.join(2000);
        }
    }

    /** Kills leftover job processes and removes the job's leftover shared-memory entries; says what it did. */
    CleanupReport cleanUp() {
        StallWatch w = stalls;
        if (w != null) {
            w.close();
        }
        List<ProcessHandle> killed = janitor.killLeftovers(Duration.ofSeconds(5));
        List<Set<String>> shm = janitor.cleanShm();
        janitor.cleanRegistry();
        return new CleanupReport(killed.size(), shm.get(0), shm.get(1));
    }

    /** What {@link #cleanUp} found. */
    record CleanupReport(int processesKilled, Set<String> shmDeleted, Set<String> shmKept) {
        boolean clean() {
            return processesKilled == 0 && shmDeleted.isEmpty() && shmKept.isEmpty();
        }
    }
}
