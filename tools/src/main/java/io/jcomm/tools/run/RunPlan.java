package io.jcomm.tools.run;

import io.jcomm.api.config.Settings;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.JvmFlags;
import io.jcomm.cpu.store.JobToken;
import io.jcomm.cpu.store.TcpStoreConfig;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.jar.Attributes;
import java.util.jar.JarFile;
import java.util.jar.Manifest;

/**
 * What {@code commrun} starts on this node: the immutable, fully resolved description of the
 * worker JVMs (their command lines and torchrun-style environments). Built from the command line by
 * {@link CommRun}; pure (no processes, no sockets), so that every rank's environment can be checked in
 * a unit test.
 *
 * <p>Rank numbering follows torchrun: {@code RANK = nodeRank * nprocPerNode + LOCAL_RANK},
 * {@code WORLD_SIZE = nnodes * nprocPerNode}.
 */
public final class RunPlan {

    /** Alias of the built-in pipeline demo's main class (module jcomm-demos, on the class path of jcomm-dist, which bin/ runs). */
    public static final String DEMO_ALIAS = "demo";
    /** The class {@value #DEMO_ALIAS} stands for. */
    public static final String DEMO_MAIN = "io.jcomm.tools.demo.PipelineDemo";
    /** Alias of the Llama example's main class (module jcomm-example-llama, on the class path of jcomm-dist, which bin/ runs). */
    public static final String MODEL_ALIAS = "model";
    /** The class {@value #MODEL_ALIAS} stands for. */
    public static final String MODEL_MAIN = "io.jcomm.examples.llama.LlamaDemo";
    /** Default port of a multi-node job's store (torchrun's). */
    public static final int MULTI_NODE_PORT_DEFAULT = DistributedConfig.MASTER_PORT_DEFAULT;

    private final int nprocPerNode;
    private final int nnodes;
    private final int minNodes;
    private final int nodeRank;
    private final String masterAddr;
    private final int masterPort;
    private final Path tokenFile;
    private final String mainClass;
    private final List<String> programArgs;
    private final String classPath;
    private final List<String> jvmArgs;
    private final Path javaBinary;
    private final Duration grace;
    private final int maxLost;
    private final int maxRestarts;
    private final int spares;
    /** CPUs the workers are bound to, sliced per worker ({@link CpuBinding}); empty: no binding. */
    private final List<Integer> cpus;
    private final String taskset;
    private final String jobId;

    private RunPlan(Builder b) {
        this.nprocPerNode = b.nprocPerNode;
        this.nnodes = b.nnodes;
        this.minNodes = b.minNodes < 0 ? b.nnodes : b.minNodes;
        this.nodeRank = b.nodeRank;
        this.masterAddr = Objects.requireNonNull(b.masterAddr, "masterAddr");
        this.masterPort = b.masterPort;
        this.tokenFile = b.tokenFile;
        this.mainClass = Objects.requireNonNull(b.mainClass, "mainClass");
        this.programArgs = List.copyOf(b.programArgs);
        this.classPath = Objects.requireNonNull(b.classPath, "classPath");
        this.jvmArgs = List.copyOf(b.jvmArgs);
        this.javaBinary = Objects.requireNonNull(b.javaBinary, "javaBinary");
        this.grace = Objects.requireNonNull(b.grace, "grace");
        this.maxLost = b.maxLost;
        this.maxRestarts = b.maxRestarts;
        this.spares = b.spares;
        this.cpus = List.copyOf(b.cpus);
        this.taskset = b.taskset;
        this.jobId = b.jobId;
        if (maxLost < 0) {
            throw new IllegalArgumentException("--max-lost must be >= 0, got " + maxLost);
        }
        if (maxRestarts < 0 || spares < 0) {
            throw new IllegalArgumentException("--max-restarts and --spares must be >= 0, got " + maxRestarts + " and "
                    + spares);
        }
        if (maxRestarts > 0 && spares > 0) {
            throw new IllegalArgumentException("--max-restarts and --spares are two ways to replace a lost rank; "
                    + "choose one");
        }
        if (nprocPerNode < 1) {
            throw new IllegalArgumentException("--nproc-per-node must be >= 1, got " + nprocPerNode);
        }
        if (nnodes < 1) {
            throw new IllegalArgumentException("--nnodes must be >= 1, got " + nnodes);
        }
        if (minNodes < 1 || minNodes > nnodes) {
            throw new IllegalArgumentException("--nnodes MIN:MAX needs 1 <= MIN <= MAX, got " + minNodes + ":" + nnodes);
        }
        if (nodeRank < 0 || nodeRank >= nnodes) {
            throw new IllegalArgumentException("--node-rank " + nodeRank + " not in [0, " + nnodes + ")");
        }
        if (masterPort < 0 || masterPort > 65535) {
            throw new IllegalArgumentException("--master-port out of range: " + masterPort);
        }
        if (masterPort == 0 && nnodes > 1) {
            throw new IllegalArgumentException("a multi-node job needs a fixed --master-port");
        }
        if (grace.isNegative()) {
            throw new IllegalArgumentException("grace period must not be negative");
        }
    }

    public static Builder builder() {
        return new Builder();
    }

    public int nprocPerNode() {
        return nprocPerNode;
    }

    public int nnodes() {
        return nnodes;
    }

    /**
     * The fewest nodes the job goes on with ({@code --nnodes MIN:MAX}): below it every launcher stops its workers
     * ({@link NodeWatch}); {@link #nnodes()} when the job is not elastic.
     */
    public int minNodes() {
        return minNodes;
    }

    public int nodeRank() {
        return nodeRank;
    }

    public int worldSize() {
        return nnodes * nprocPerNode;
    }

    /** Whether this node's launcher hosts the store (node rank 0). */
    public boolean hostsStore() {
        return nodeRank == 0;
    }

    public String masterAddr() {
        return masterAddr;
    }

    /** The store port; 0 until the launcher has bound an ephemeral one (see {@link #withMasterPort}). */
    public int masterPort() {
        return masterPort;
    }

    public Path tokenFile() {
        return tokenFile;
    }

    /**
     * How a launcher connects to the job's store as a plain client (no member declaration unless the caller
     * adds one): its address, the job token when there is one, a 5 s timeout and a 1 s connect timeout.
     *
     * @throws io.jcomm.api.StoreException when the token file cannot be read
     */
    TcpStoreConfig.Builder storeClient() {
        TcpStoreConfig.Builder b = TcpStoreConfig.builder().host(masterAddr).port(masterPort)
                .timeout(Duration.ofSeconds(5)).connectTimeout(Duration.ofSeconds(1));
        if (tokenFile != null) {
            b.token(JobToken.read(tokenFile));
        }
        return b;
    }

    public String mainClass() {
        return mainClass;
    }

    public List<String> programArgs() {
        return programArgs;
    }

    public String classPath() {
        return classPath;
    }

    public List<String> jvmArgs() {
        return jvmArgs;
    }

    /** How long stopped workers get between SIGTERM and SIGKILL. */
    public Duration grace() {
        return grace;
    }

    /**
     * How many workers of this node may fail while the others go on (their recovery, e.g.
     * {@code ParallelState.shrink}, decides what the job does without them); 0: the first failure stops
     * the job.
     */
    public int maxLost() {
        return maxLost;
    }

    /**
     * How many times a failed worker of this node is started again, with the same rank, to take its own
     * place ({@code ParallelState.replace}); 0: never.
     */
    public int maxRestarts() {
        return maxRestarts;
    }

    /** Extra workers started on this node that wait to take the place of a lost rank; 0: none. */
    public int spares() {
        return spares;
    }

    /**
     * The job's id the workers get as {@code JCOMM_JOB_ID} when their environment has none (a
     * scheduler's job id, e.g. {@code slurm-812.0}, so that every node's workers and launcher agree on it), or
     * {@code null}: the workers' own default.
     */
    public String jobId() {
        return jobId;
    }

    /** Whether lost ranks are replaced (restarts or spares): the workers' recovery policy is then replace. */
    public boolean replaces() {
        return maxRestarts > 0 || spares > 0;
    }

    /** This plan with the port the store actually listens on. */
    public RunPlan withMasterPort(int port) {
        return toBuilder().masterPort(port).build();
    }

    /** Global rank of this node's {@code localRank}. */
    public int globalRank(int localRank) {
        return nodeRank * nprocPerNode + localRank;
    }

    /**
     * The environment of worker {@code localRank}: {@code parentEnv} (the launcher's, which carries the
     * user's {@code JCOMM_*} settings) with torchrun's variables set, the store marked as hosted by the
     * launcher, the token file when there is one, and {@link JvmFlags#workerEnvironment}'s
     * malloc tunable.
     */
    public Map<String, String> workerEnv(Map<String, String> parentEnv, int localRank) {
        if (localRank < 0 || localRank >= nprocPerNode) {
            throw new IllegalArgumentException("local rank " + localRank + " not in [0, " + nprocPerNode + ")");
        }
        Map<String, String> env = new LinkedHashMap<>(JvmFlags.workerEnvironment(parentEnv));
        env.put(Settings.MASTER_ADDR.name(), masterAddr);
        env.put(Settings.MASTER_PORT.name(), Integer.toString(masterPort));
        env.put(Settings.RANK.name(), Integer.toString(globalRank(localRank)));
        env.put(Settings.WORLD_SIZE.name(), Integer.toString(worldSize()));
        env.put(Settings.LOCAL_RANK.name(), Integer.toString(localRank));
        env.put(Settings.LOCAL_WORLD_SIZE.name(), Integer.toString(nprocPerNode));
        env.put("GROUP_RANK", Integer.toString(nodeRank));
        env.put("GROUP_WORLD_SIZE", Integer.toString(nnodes));
        env.put(Settings.LAUNCHER_STORE.name(), "1");
        if (tokenFile != null) {
            env.put(Settings.TOKEN_FILE.name(), tokenFile.toAbsolutePath().toString());
        }
        if (jobId != null && !parentEnv.containsKey(Settings.JOB_ID.name())) {
            env.put(Settings.JOB_ID.name(), jobId);
        }
        if (replaces() && !parentEnv.containsKey(Settings.RECOVERY.name())) {
            env.put(Settings.RECOVERY.name(), "replace");
        }
        return Collections.unmodifiableMap(env);
    }

    /**
     * The environment of worker {@code localRank} started again after a failure ({@code restart} counts from 1):
     * its own, with {@code JCOMM_ROLE} {@code restarted} and torchrun's restart count.
     */
    public Map<String, String> restartEnv(Map<String, String> parentEnv, int localRank, int restart) {
        Map<String, String> env = new LinkedHashMap<>(workerEnv(parentEnv, localRank));
        env.put(Settings.ROLE.name(), "restarted");
        env.put("TORCHELASTIC_RESTART_COUNT", Integer.toString(restart));
        return Collections.unmodifiableMap(env);
    }

    /**
     * The environment of spare {@code index} of this node: a worker's with {@code JCOMM_ROLE}
     * {@code spare}; its rank variables are placeholders (the node's first rank) until it takes a lost rank's place.
     */
    public Map<String, String> spareEnv(Map<String, String> parentEnv, int index) {
        if (index < 0 || index >= spares) {
            throw new IllegalArgumentException("spare " + index + " not in [0, " + spares + ")");
        }
        Map<String, String> env = new LinkedHashMap<>(workerEnv(parentEnv, 0));
        env.put(Settings.ROLE.name(), "spare");
        env.put(Settings.SPARE_INDEX.name(), Integer.toString(index));
        return Collections.unmodifiableMap(env);
    }

    /** {@code taskset -c <cpus>} for worker {@code localRank} when the workers are bound to CPUs, else nothing. */
    public List<String> cpuPrefix(int localRank) {
        return CpuBinding.prefix(localRank, nprocPerNode, cpus, taskset);
    }

    /** The workers' {@code java}. */
    public Path javaBinary() {
        return javaBinary;
    }

    /** The command line of worker {@code localRank} (the same for every rank; ranks differ by environment). */
    public List<String> workerCommand(int localRank) {
        return workerCommand(localRank, List.of());
    }

    /**
     * The command line of worker {@code localRank} with {@code launchArgs} (the launch's class-data
     * archive arguments) between the required flags and the user's {@code --jvm-arg}s, so that the
     * user's own flags come last and win.
     */
    public List<String> workerCommand(int localRank, List<String> launchArgs) {
        return workerCommand(localRank, launchArgs, null);
    }

    /**
     * The command line of worker {@code localRank} as {@link #workerCommand(int, List)}; with a
     * {@code workerJar} ({@link WorkerJar}) the JVM starts from that jar, whose manifest carries the
     * module flags and the class path, instead of {@code -cp} and {@link RunWorker}.
     */
    List<String> workerCommand(int localRank, List<String> launchArgs, Path workerJar) {
        if (localRank < 0 || localRank >= nprocPerNode + spares) {
            throw new IllegalArgumentException("local rank " + localRank + " not in [0, " + (nprocPerNode + spares) + ")");
        }
        // spares (local ranks from nprocPerNode on) are not bound: the slices are the workers'
        List<String> cmd = new ArrayList<>(localRank < nprocPerNode ? cpuPrefix(localRank) : List.of());
        cmd.add(javaBinary.toString());
        cmd.addAll(workerJar == null ? JvmFlags.REQUIRED : WorkerJar.commandLineFlags(JvmFlags.REQUIRED));
        cmd.addAll(launchArgs);
        if (workerJar != null) {
            cmd.add("-D" + Settings.WORKER_CLASS_PATH.name() + "=" + classPath);
        }
        cmd.addAll(jvmArgs);
        if (workerJar == null) {
            cmd.add("-cp");
            cmd.add(classPath);
            cmd.add(RunWorker.class.getName());
        } else {
            cmd.add("-jar");
            cmd.add(workerJar.toString());
        }
        cmd.add(mainClass);
        cmd.addAll(programArgs);
        return List.copyOf(cmd);
    }

    public Builder toBuilder() {
        return builder().nprocPerNode(nprocPerNode).nnodes(nnodes).minNodes(minNodes).nodeRank(nodeRank).masterAddr(masterAddr)
                .masterPort(masterPort).tokenFile(tokenFile).mainClass(mainClass).programArgs(programArgs)
                .classPath(classPath).jvmArgs(jvmArgs).javaBinary(javaBinary).grace(grace).maxLost(maxLost)
                .maxRestarts(maxRestarts).spares(spares).cpuBinding(cpus, taskset).jobId(jobId);
    }

    @Override
    public String toString() {
        return "RunPlan{" + nnodes + " node(s) x " + nprocPerNode + ", node " + nodeRank + ", store " + masterAddr + ":"
                + masterPort + (tokenFile != null ? " (token)" : "") + ", main " + mainClass + " " + programArgs + "}";
    }

    /**
     * Resolves what the user named: {@value #DEMO_ALIAS}, {@value #MODEL_ALIAS}, a jar file (its {@code Main-Class}, with the
     * jar and its manifest {@code Class-Path} in front of the class path, as {@code java -jar} does)
     * or a main class name.
     *
     * @return {main class, class path prefix (possibly empty)}
     * @throws IllegalArgumentException when a jar has no Main-Class or cannot be read
     */
    public static String[] resolveTarget(String target) {
        if (DEMO_ALIAS.equals(target)) {
            return new String[] {DEMO_MAIN, ""};
        }
        if (MODEL_ALIAS.equals(target)) {
            return new String[] {MODEL_MAIN, ""};
        }
        if (target.endsWith(".jar")) {
            Path jar = Path.of(target).toAbsolutePath();
            if (!Files.isRegularFile(jar)) {
                throw new IllegalArgumentException("no such jar: " + target);
            }
            try (JarFile jf = new JarFile(jar.toFile())) {
                Manifest m = jf.getManifest();
                String main = m == null ? null : m.getMainAttributes().getValue(Attributes.Name.MAIN_CLASS);
                if (main == null || main.isBlank()) {
                    throw new IllegalArgumentException(target + " has no Main-Class in its manifest");
                }
                StringBuilder cp = new StringBuilder(jar.toString());
                String extra = m.getMainAttributes().getValue(Attributes.Name.CLASS_PATH);
                if (extra != null) {
                    for (String e : extra.trim().split("\\s+")) {
                        if (!e.isEmpty()) {
                            cp.append(File.pathSeparator).append(jar.getParent().resolve(e).normalize());
                        }
                    }
                }
                return new String[] {main.trim(), cp.toString()};
            } catch (IOException e) {
                throw new UncheckedIOException("cannot read " + target + ": " + e.getMessage(), e);
            }
        }
        return new String[] {target, ""};
    }

    /** Mutable builder; {@link #build()} validates. */
    public static final class Builder {
        private int nprocPerNode = 1;
        private int nnodes = 1;
        private int minNodes = -1;
        private int nodeRank;
        private String masterAddr = DistributedConfig.MASTER_ADDR_DEFAULT;
        private int masterPort;
        private Path tokenFile;
        private String mainClass;
        private List<String> programArgs = List.of();
        private String classPath = System.getProperty("java.class.path");
        private List<String> jvmArgs = List.of();
        private Path javaBinary = Path.of(System.getProperty("java.home"), "bin", "java");
        private Duration grace = Duration.ofSeconds(10);
        private int maxLost;
        private int maxRestarts;
        private int spares;
        private List<Integer> cpus = List.of();
        private String taskset;
        private String jobId;

        private Builder() {
        }

        public Builder nprocPerNode(int v) { this.nprocPerNode = v; return this; }
        public Builder nnodes(int v) { this.nnodes = v; return this; }
        /** The fewest nodes the job goes on with; -1 (default): all of them. */
        public Builder minNodes(int v) { this.minNodes = v; return this; }
        public Builder nodeRank(int v) { this.nodeRank = v; return this; }
        public Builder masterAddr(String v) { this.masterAddr = v; return this; }
        /** 0: an ephemeral port chosen when the store binds (single node only). */
        public Builder masterPort(int v) { this.masterPort = v; return this; }
        public Builder tokenFile(Path v) { this.tokenFile = v; return this; }
        public Builder mainClass(String v) { this.mainClass = v; return this; }
        public Builder programArgs(List<String> v) { this.programArgs = List.copyOf(v); return this; }
        public Builder classPath(String v) { this.classPath = v; return this; }
        public Builder jvmArgs(List<String> v) { this.jvmArgs = List.copyOf(v); return this; }
        public Builder javaBinary(Path v) { this.javaBinary = v; return this; }
        public Builder grace(Duration v) { this.grace = v; return this; }
        public Builder maxLost(int v) { this.maxLost = v; return this; }
        public Builder maxRestarts(int v) { this.maxRestarts = v; return this; }
        public Builder spares(int v) { this.spares = v; return this; }
        /** Binds worker i to slice i of {@code cpus} with {@code taskset} ({@link CpuBinding}); empty: no binding. */
        public Builder cpuBinding(List<Integer> cpus, String taskset) {
            this.cpus = List.copyOf(cpus);
            this.taskset = taskset;
            return this;
        }

        /** The job id the workers get when their environment has none; {@code null}: theirs. */
        public Builder jobId(String v) { this.jobId = v; return this; }

        public RunPlan build() {
            return new RunPlan(this);
        }
    }
}
