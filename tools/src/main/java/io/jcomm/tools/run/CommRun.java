package io.jcomm.tools.run;

import io.jcomm.api.config.Settings;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.launch.LaunchInfo;
import io.jcomm.api.launch.Launchers;
import io.jcomm.cpu.store.JobToken;
import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import java.io.File;
import java.io.IOException;
import java.io.PrintStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.UnknownHostException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;

/**
 * {@code bin/commrun}: starts the worker JVMs of a job on this node, the way {@code torchrun} does.
 *
 * <pre>
 * bin/commrun --nproc-per-node 4 demo --tp 2 --pp 2
 * bin/commrun --nproc-per-node 2 -cp my.jar com.example.Train --epochs 3
 * bin/commrun --nnodes 2 --node-rank 0 --master-addr 10.0.0.1 --master-port 29500 --token-file job.token app.jar
 * </pre>
 *
 * <p>Every worker gets the project's JVM flags and torchrun's environment ({@code RANK},
 * {@code WORLD_SIZE}, {@code LOCAL_RANK}, {@code LOCAL_WORLD_SIZE}, {@code MASTER_ADDR},
 * {@code MASTER_PORT}, plus {@code JCOMM_LAUNCHER_STORE=1}, {@code JCOMM_TOKEN_FILE} with a token, and
 * whatever {@code JCOMM_*} the launcher's environment carries). Node rank 0's launcher hosts the
 * rendezvous store in-process for the job's whole life, so a worker that dies does not take the store
 * with it. Output lines get a {@code [rank N]} prefix. When a worker fails the others are stopped and
 * the launcher exits with the failed worker's code; SIGINT/SIGTERM to the launcher is forwarded
 * (SIGTERM, SIGKILL after {@code --grace}); workers exit by themselves if the launcher dies. After the
 * job, leftover processes of the job are killed and its leftover {@code /dev/shm} entries removed,
 * and the launcher says so.
 */
@Command(name = "commrun", mixinStandardHelpOptions = true, sortOptions = false,
        description = {"Starts N worker JVMs per node as the ranks of a jcomm job (like torchrun).",
                "TARGET is a main class (on -cp or the tools class path), a jar (its Main-Class), a single .java "
                        + "file (compiled first), 'demo' (the pipeline demo) or 'model' (the Llama example)."})
public final class CommRun implements Callable<Integer> {

    @Option(names = {"--nproc-per-node", "--nproc_per_node"}, defaultValue = "1",
            description = "workers on this node (default ${DEFAULT-VALUE})")
    int nprocPerNode;

    @Option(names = "--nnodes", description = "nodes of the job, N or MIN:MAX (torchrun's syntax): "
            + "the job starts with MAX nodes and goes on while at least MIN are left, each node's workers recovering "
            + "without the lost ones (ParallelState.recover); below MIN every launcher stops its workers "
            + "(default: the scheduler's node count under srun, Kubeflow or LeaderWorkerSet, else 1)")
    String nnodesSpec;
    int nnodes;
    int minNodes;

    @Option(names = {"--node-rank", "--node_rank"}, description = "this node's rank (default: the scheduler's, "
            + "e.g. SLURM_NODEID, else 0)")
    Integer nodeRankOption;
    int nodeRank;

    @Option(names = {"--master-addr", "--master_addr"}, description = "address of node 0, where the store listens "
            + "(default: under a scheduler MASTER_ADDR, else the scheduler's, e.g. the first host of SLURM_STEP_NODELIST; "
            + "else "
            + DistributedConfig.MASTER_ADDR_DEFAULT + ")")
    String masterAddr;

    @Option(names = {"--master-port", "--master_port"},
            description = "store port (default: MASTER_PORT, else a free port for one node, else the scheduler's "
                    + "(Slurm: derived from the job and step ids), else 29500)")
    Integer masterPort;

    @Option(names = "--token-file", description = "job token file: the store demands it and the workers present it "
            + "(default: $JCOMM_TOKEN_FILE if set)")
    Path tokenFile;

    @Option(names = "--store-data", description = "keep the store's keys in this directory (the node that hosts the "
            + "store): a launcher restarted on it and the same port resumes with every key, and the workers' store "
            + "clients ride over the restart. Default: in memory only")
    Path storeData;

    @Option(names = {"-cp", "--classpath"}, description = "class path of the program, in front of the tools' own")
    String classPath;

    @Option(names = "--jvm-arg", description = "extra JVM argument for every worker (repeatable), e.g. --jvm-arg=-Xmx2g")
    List<String> jvmArgs = new ArrayList<>();

    @Option(names = "--grace", defaultValue = "10", description = "seconds between SIGTERM and SIGKILL when stopping workers (default ${DEFAULT-VALUE})")
    long graceSeconds;

    @Option(names = "--cpu-bind", defaultValue = "auto", description = "auto: when this node's workers fit its CPUs, "
            + "bind worker i to its own slice of them (taskset), so that two ranks never share a CPU while another is "
            + "idle; none: leave placement to the scheduler (default ${DEFAULT-VALUE})")
    String cpuBind;

    @Option(names = "--max-lost", defaultValue = "0", description = "workers of this node that may fail while the others "
            + "go on (their recovery decides, e.g. ParallelState.shrink); the job then succeeds when every other "
            + "worker exits 0 (default ${DEFAULT-VALUE}: the first failure stops the job)")
    int maxLost;

    @Option(names = "--max-restarts", defaultValue = "0", description = "times a failed worker of this node is started "
            + "again with the same rank to take its own place (the job's recovery policy is then replace: "
            + "ParallelState.recover); when they are used up, a failure stops the job (default ${DEFAULT-VALUE})")
    int maxRestarts;

    @Option(names = "--spares", defaultValue = "0", description = "extra workers started on this node that pay the JVM "
            + "start and the store connection ahead and wait to take the place of a lost rank (recovery policy "
            + "replace); they exit when the job ends (default ${DEFAULT-VALUE})")
    int spares;

    @Option(names = "--timeout", description = "stop the job after this many seconds (exit code 124); default: no limit")
    Long timeoutSeconds;

    @Option(names = "--stall-report", defaultValue = "30", description = "when no rank's operations advanced for this "
            + "many seconds, print which rank is in which operation and each rank's thread stacks, without stopping the "
            + "job (also printed when the job fails); 0: off (default ${DEFAULT-VALUE})")
    private double stallReportSeconds;

    @Option(names = "--no-prefix", description = "do not prefix output lines with [rank N]")
    boolean noPrefix;

    @Option(names = "--shm-dir", defaultValue = "/dev/shm", hidden = true)
    Path shmDir;

    @Parameters(index = "0", paramLabel = "TARGET", description = "main class, jar, .java file, 'demo' or 'model'")
    String target;

    @Parameters(index = "1..*", paramLabel = "ARGS", description = "arguments of the program")
    List<String> programArgs = new ArrayList<>();

    private final Map<String, String> parentEnv;
    /** The store port a scheduler gives a multi-node job ({@link #placeNode}). */
    private int schedulerPort;
    /** The job's id for the workers: JCOMM_JOB_ID, TORCHELASTIC_RUN_ID, or the scheduler's; null: the default. */
    private String jobId;
    /** Classes compiled from a .java TARGET, removed after the job. */
    private Path compiled;
    private final PrintStream out;
    private final PrintStream err;

    public CommRun() {
        this(System.getenv(), System.out, System.err);
    }

    /**
     * A launcher embedded in another program (tests, other tools): workers get {@code parentEnv} as the
     * base of their environment, and their prefixed output goes to {@code out} / {@code err}.
     */
    public CommRun(Map<String, String> parentEnv, PrintStream out, PrintStream err) {
        this.parentEnv = parentEnv;
        this.out = out;
        this.err = err;
    }

    /** The command line; options end at TARGET (everything after it goes to the program). */
    public static CommandLine commandLine(CommRun cmd) {
        CommandLine cl = new CommandLine(cmd);
        cl.setStopAtPositional(true);
        cl.setUnmatchedOptionsArePositionalParams(false);
        return cl;
    }

    /** The plan of this node from the parsed options (with port 0 meaning "pick one when binding"). */
    RunPlan plan() {
        String where = placeNode();
        if (where != null) {
            err.println(where);
        }
        parseNodes();
        String cp = System.getProperty("java.class.path");
        String[] resolved;
        if (target.endsWith(".java")) {
            Path src = Path.of(target);
            if (!Files.isRegularFile(src)) {
                throw new IllegalArgumentException("no such source file: " + target);
            }
            try {
                compiled = Files.createTempDirectory("commrun-classes-");
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            resolved = new String[] {SourceCompiler.compile(src, joinPath(classPath, cp), compiled), compiled.toString()};
        } else {
            resolved = RunPlan.resolveTarget(target);
        }
        String prefix = joinPath(classPath, resolved[1]);
        Path token = tokenFile;
        if (token == null) {
            String env = parentEnv.get(Settings.TOKEN_FILE.name());
            token = env == null || env.isBlank() ? null : Path.of(env.trim());
        }
        int port = masterPort != null ? masterPort : nnodes > 1 ? schedulerPort : 0;
        return RunPlan.builder().nprocPerNode(nprocPerNode).nnodes(nnodes).minNodes(minNodes).nodeRank(nodeRank).masterAddr(masterAddr)
                .masterPort(port).tokenFile(token).mainClass(resolved[0]).programArgs(programArgs)
                .classPath(prefix.isEmpty() ? cp : prefix + File.pathSeparator + cp).jvmArgs(jvmArgs)
                .grace(Duration.ofSeconds(graceSeconds)).maxLost(maxLost)
                .maxRestarts(maxRestarts).spares(spares).jobId(jobId)
                .cpuBinding(cpuBinding(), CpuBinding.findTaskset()).build();
    }

    /**
     * The node's place in the job: the options where given, else what the scheduler this launcher runs under
     * says ({@link Launchers#scheduler}: {@code srun -N 2 --ntasks-per-node 1 bin/commrun ...}, a Kubeflow or
     * LeaderWorkerSet pod), else one node on loopback. Under a scheduler, {@code MASTER_ADDR} and
     * {@code MASTER_PORT} in the environment come before the scheduler's own master. Sets {@link #nnodes}, {@link #nodeRank}, {@link #masterAddr},
     * {@link #schedulerPort} and {@link #jobId}, and returns the line that says where they came from (or null).
     */
    String placeNode() {
        LaunchInfo sched = Launchers.scheduler(parentEnv).orElse(null);
        if (sched != null) {
            // a pod's or a step's MASTER_ADDR/MASTER_PORT (PyTorchJob sets them) come before the scheduler's own
            String envAddr = blankToNull(parentEnv.get(Settings.MASTER_ADDR.name()));
            String envPort = blankToNull(parentEnv.get(Settings.MASTER_PORT.name()));
            if (masterPort == null && envPort != null) {
                try {
                    masterPort = Integer.parseInt(envPort);
                } catch (NumberFormatException e) {
                    throw new IllegalArgumentException(Settings.MASTER_PORT.name() + " is not a port: '" + envPort + "'");
                }
            }
            if (masterAddr == null) {
                masterAddr = envAddr;
            }
        }
        schedulerPort = RunPlan.MULTI_NODE_PORT_DEFAULT;
        String explicitJob = blankToNull(parentEnv.get(Settings.JOB_ID.name()));
        if (explicitJob == null) {
            explicitJob = blankToNull(parentEnv.get(Settings.TORCHELASTIC_RUN_ID.name()));
        }
        jobId = explicitJob;
        String line = null;
        if (sched != null && (nnodesSpec == null || nodeRankOption == null || masterAddr == null)) {
            if (sched.localWorldSize() > 1) {
                throw new IllegalArgumentException("commrun starts the workers of one node, but the " + sched.launcher()
                        + " step runs " + sched.localWorldSize() + " tasks on this node ("
                        + sched.source(LaunchInfo.Field.LOCAL_WORLD_SIZE) + "): run one commrun per node (srun "
                        + "--ntasks-per-node 1), or start every rank as its own task without commrun");
            }
            if (nnodesSpec == null) {
                if (sched.nodeCount() == LaunchInfo.UNKNOWN) {
                    throw new IllegalArgumentException(sched.launcher() + " does not say how many nodes the job has: "
                            + "pass --nnodes");
                }
                nnodesSpec = Integer.toString(sched.nodeCount());
            }
            if (nodeRankOption == null) {
                if (sched.nodeRank() == LaunchInfo.UNKNOWN) {
                    throw new IllegalArgumentException(sched.launcher() + " does not say which node this is: pass "
                            + "--node-rank");
                }
                nodeRankOption = sched.nodeRank();
            }
            if (masterAddr == null) {
                if (sched.masterAddr() == null) {
                    throw new IllegalArgumentException(sched.masterNote() != null ? sched.masterNote()
                            : sched.launcher() + " does not say where node 0 is: pass --master-addr");
                }
                masterAddr = sched.masterAddr();
            }
            if (sched.masterPort() != LaunchInfo.UNKNOWN) {
                schedulerPort = sched.masterPort();
            }
            if (jobId == null) {
                jobId = sched.jobId();
            }
            line = "commrun: " + sched.describe();
        }
        if (nnodesSpec == null) {
            nnodesSpec = "1";
        }
        nodeRank = nodeRankOption == null ? 0 : nodeRankOption;
        if (masterAddr == null) {
            masterAddr = DistributedConfig.MASTER_ADDR_DEFAULT;
        }
        return line;
    }

    private static String blankToNull(String v) {
        return v == null || v.isBlank() ? null : v.trim();
    }

    /** {@code --nnodes N} or {@code MIN:MAX} into {@link #nnodes} and {@link #minNodes}. */
    private void parseNodes() {
        String v = nnodesSpec.trim();
        int colon = v.indexOf(':');
        try {
            if (colon < 0) {
                nnodes = Integer.parseInt(v);
                minNodes = nnodes;
            } else {
                minNodes = Integer.parseInt(v.substring(0, colon).trim());
                nnodes = Integer.parseInt(v.substring(colon + 1).trim());
            }
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("--nnodes must be N or MIN:MAX, not '" + nnodesSpec + "'");
        }
    }

    /** The CPUs to slice among the workers: the launcher's own ones with {@code --cpu-bind auto}, none otherwise. */
    private List<Integer> cpuBinding() {
        if (cpuBind.equals("none")) {
            return List.of();
        }
        if (!cpuBind.equals("auto")) {
            throw new IllegalArgumentException("--cpu-bind must be auto or none, not " + cpuBind);
        }
        return CpuBinding.allowed();
    }

    private static String joinPath(String a, String b) {
        if (a == null || a.isEmpty()) {
            return b;
        }
        return b.isEmpty() ? a : a + File.pathSeparator + b;
    }

    @Override
    public Integer call() throws Exception {
        try {
            return runJob();
        } finally {
            SourceCompiler.deleteQuietly(compiled);
        }
    }

    private int runJob() throws Exception {
        RunPlan plan;
        try {
            plan = plan();
        } catch (IllegalArgumentException | UncheckedIOException e) {
            err.println("commrun: " + e.getMessage());
            return 2;
        }
        TcpStoreServer server = null;
        if (plan.hostsStore()) {
            TcpStoreServerConfig.Builder sb = TcpStoreServerConfig.builder().host(plan.masterAddr())
                    .port(plan.masterPort()).logConnections(false).name("commrun").expectedClients(plan.worldSize())
                    .dataDir(storeData);
            if (plan.tokenFile() != null) {
                try {
                    sb.token(JobToken.read(plan.tokenFile()));
                } catch (RuntimeException e) {
                    err.println("commrun: " + e.getMessage());
                    return 2;
                }
            } else if (!isLoopback(plan.masterAddr())) {
                err.println("commrun: warning: the store on " + plan.masterAddr() + " accepts any client; "
                        + "pass --token-file (e.g. made with: openssl rand -hex 32 > job.token)");
            }
            try {
                server = TcpStoreServer.start(sb.build());
            } catch (RuntimeException e) {
                err.println("commrun: cannot start the store on " + plan.masterAddr() + ":" + plan.masterPort() + ": "
                        + e.getMessage());
                return 2;
            }
            plan = plan.withMasterPort(server.port());
        }
        long t0 = System.nanoTime();
        LocalJob job;
        try {
            job = LocalJob.start(plan, parentEnv, out, err, !noPrefix, shmDir,
                    Duration.ofMillis((long) (Math.max(0, stallReportSeconds) * 1000)));
        } catch (IOException e) {
            err.println("commrun: cannot start workers: " + e.getMessage());
            if (server != null) {
                server.close();
            }
            return 2;
        }
        NodeWatch nodes = null;
        if (plan.minNodes() < plan.nnodes()) {
            String jobId = plan.jobId() != null ? plan.jobId() : DistributedConfig.JOB_ID_DEFAULT;
            LocalJob j = job;
            Duration stopGrace = plan.grace();
            nodes = new NodeWatch(plan, jobId, err, () -> {
                j.requestStop();
                j.stop(stopGrace);
            }).start();
        }
        CountDownLatch finished = new CountDownLatch(1);
        Duration grace = plan.grace();
        Thread hook = new Thread(() -> {
            if (finished.getCount() == 0) {
                return;
            }
            job.requestStop();
            job.stop(grace);
            try {
                finished.await(grace.toMillis() + 10_000, TimeUnit.MILLISECONDS);
            } catch (InterruptedException ignored) {
                // exiting anyway
            }
        }, "commrun-signal");
        Runtime.getRuntime().addShutdownHook(hook);
        int code;
        try {
            RunPlan p = plan;
            Runnable workersDone = server == null ? null : () -> tellSparesDone(p);
            LocalJob.Result r = job.await(timeoutSeconds == null ? null : Duration.ofSeconds(timeoutSeconds), workersDone);
            LocalJob.CleanupReport c = job.cleanUp();
            code = r.exitCode();
            summarize(plan, r, c, (System.nanoTime() - t0) / 1e9);
        } finally {
            if (nodes != null) {
                nodes.close();
            }
            if (server != null) {
                server.close();
            }
            finished.countDown();
        }
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException ignored) {
            // shutting down (signal): the hook is running and returns now that we are finished
        }
        return code;
    }

    /** Sets {@link DistributedConfig#LAUNCHER_DONE_KEY} in the job's store: waiting spares exit. */
    private void tellSparesDone(RunPlan plan) {
        try {
            // the store is this process's: connecting waits as long as the calls do
            try (io.jcomm.cpu.store.TcpStore st = io.jcomm.cpu.store.TcpStore.connect(plan.storeClient()
                    .connectTimeout(Duration.ofSeconds(5)).build())) {
                st.set(DistributedConfig.LAUNCHER_DONE_KEY, new byte[] {1});
            }
        } catch (RuntimeException e) {
            err.println("commrun: could not tell the spares that the job ended (" + e.getMessage() + "); they are stopped");
        }
    }

    private void summarize(RunPlan plan, LocalJob.Result r, LocalJob.CleanupReport c, double seconds) {
        StringBuilder sb = new StringBuilder("commrun: ");
        int n = plan.nprocPerNode();
        switch (r.outcome()) {
            case SUCCEEDED:
                if (r.lost().isEmpty()) {
                    sb.append(n).append(n == 1 ? " rank" : " ranks").append(" exited 0");
                    if (r.restarts() > 0) {
                        sb.append(" (").append(r.restarts()).append(r.restarts() == 1 ? " restart" : " restarts")
                                .append(", --max-restarts ").append(plan.maxRestarts()).append(')');
                    }
                } else {
                    sb.append(n - r.lost().size()).append(" of ").append(n).append(" ranks exited 0, ")
                            .append(r.lost().size()).append(" lost (");
                    for (int i = 0; i < r.lost().size(); i++) {
                        int idx = r.lost().get(i);
                        sb.append(i == 0 ? "" : ", ").append("rank ").append(plan.globalRank(idx)).append(" exit ")
                                .append(r.exitCodes()[idx]).append(LocalJob.describe(r.exitCodes()[idx]));
                    }
                    sb.append(plan.spares() > 0 ? "; --spares " + plan.spares() : "; --max-lost " + plan.maxLost())
                            .append(')');
                }
                break;
            case FAILED:
                sb.append("rank ").append(r.firstFailedRank()).append(" failed first (exit ").append(r.exitCode())
                        .append(LocalJob.describe(r.exitCode())).append(')');
                break;
            case STOPPED:
                sb.append("stopped on request");
                break;
            default:
                sb.append("timed out");
        }
        if (r.outcome() != LocalJob.Outcome.SUCCEEDED) {
            sb.append("; exit codes");
            for (int i = 0; i < r.exitCodes().length; i++) {
                sb.append(i == 0 ? " " : ", ").append("rank ").append(plan.globalRank(i)).append('=')
                        .append(r.exitCodes()[i]);
            }
        }
        sb.append(String.format(Locale.ROOT, " in %.1f s; ", seconds));
        if (c.clean()) {
            sb.append("no processes or ").append(shmDir).append(" files left behind");
        } else {
            List<String> parts = new ArrayList<>();
            if (c.processesKilled() > 0) {
                parts.add("killed " + c.processesKilled() + " leftover process(es) of the job");
            }
            if (!c.shmDeleted().isEmpty()) {
                parts.add("removed leftover " + shmDir + " entries " + c.shmDeleted());
            }
            if (!c.shmKept().isEmpty()) {
                parts.add("left " + shmDir + " entries not named jcomm* " + c.shmKept());
            }
            sb.append(String.join("; ", parts));
        }
        err.println(sb);
        err.flush();
    }

    private static boolean isLoopback(String host) {
        try {
            return InetAddress.getByName(host).isLoopbackAddress();
        } catch (UnknownHostException e) {
            return false;
        }
    }

    public static void main(String[] args) {
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        int code = commandLine(new CommRun()).execute(args);
        System.exit(code);
    }
}
