package io.jcomm.api.config;

import io.jcomm.api.config.Setting.Source;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Optional;

/**
 * Every setting jcomm reads from outside the program, declared once: the {@code JCOMM_*} environment
 * variables, the launch variables shared with torchrun, the {@code jcomm.*} system properties and the
 * variables of the shell launchers. Each module reads a setting through its constant here; the
 * environment table of {@code docs/CONFIGURATION.md} is generated from {@link #all()}
 * ({@link #markdownTable()}), and a test fails when the two differ or when any source spells a setting's
 * name instead of using its constant.
 *
 * <p>Launchers' own variables ({@code SLURM_*}, {@code OMPI_*}, {@code PET_*}, ...) are not settings of
 * jcomm: they are listed with their meaning in {@code docs/CLUSTERS.md} and read by
 * {@code io.jcomm.api.launch}.
 */
public final class Settings {

    private static final List<Setting> ALL = new ArrayList<>();

    private static final String FROM_ENV = "`DistributedConfig.fromEnvironment()`, once";

    // ---- where the job is: torchrun's variables, read through the launchers ----

    public static final Setting MASTER_ADDR = env("MASTER_ADDR", "host name or address",
            "the launcher's (Slurm: the step's first host; LWS: the leader), else `127.0.0.1`",
            "where the store listens", "`io.jcomm.api.launch` (torchrun's variables)");
    public static final Setting MASTER_PORT = env("MASTER_PORT", "port",
            "the launcher's (Slurm: derived from the job and step ids), else `29500`",
            "the store's port", "`io.jcomm.api.launch` (torchrun's variables)");
    public static final Setting RANK = env("RANK", "integer",
            "the launcher's (`SLURM_PROCID`, `OMPI_COMM_WORLD_RANK`, `JOB_COMPLETION_INDEX`, ...), else `0`",
            "this process's global rank", "`io.jcomm.api.launch` (torchrun's variables)");
    public static final Setting WORLD_SIZE = env("WORLD_SIZE", "integer", "the launcher's, else `1`",
            "the number of processes of the job", "`io.jcomm.api.launch` (torchrun's variables)");
    public static final Setting LOCAL_RANK = env("LOCAL_RANK", "integer", "the launcher's, else `RANK`",
            "this process's rank among the processes of its host", "`io.jcomm.api.launch` (torchrun's variables)");
    public static final Setting LOCAL_WORLD_SIZE = env("LOCAL_WORLD_SIZE", "integer",
            "the launcher's, else `WORLD_SIZE`", "the number of processes on this host",
            "`io.jcomm.api.launch` (torchrun's variables)");
    public static final Setting TORCHELASTIC_RUN_ID = env("TORCHELASTIC_RUN_ID", "text", "none",
            "torchrun's run id: the job's identity when `JCOMM_JOB_ID` is not set",
            "`io.jcomm.api.launch` (torchrun's variables)");

    // ---- the job ----

    public static final Setting LAUNCHER = env("JCOMM_LAUNCHER", "`auto`, `torchrun`, `slurm`, `mpi`, `k8s`, `lws`",
            "`auto`",
            "`auto`: read whichever launcher's variables are present (torchrun's, Slurm's, Open MPI's/PMIx/Hydra's, "
                    + "Kubeflow's `PET_*`, an Indexed Job's or JobSet's, LeaderWorkerSet's; the order, the precedence "
                    + "and the contradictions: [CLUSTERS.md](CLUSTERS.md)); a launcher's name: follow that one only",
            FROM_ENV);
    public static final Setting K8S_JOB_INDEX = env("JCOMM_K8S_JOB_INDEX", "integer", "none",
            "in a JobSet's pods: the job's global index (from the annotation `jobset.sigs.k8s.io/job-global-index`, "
                    + "through the downward API); rank = index x `JCOMM_K8S_PODS_PER_JOB` + `JOB_COMPLETION_INDEX` "
                    + "(`deploy/jobset.yaml`)",
            "`io.jcomm.api.launch` (Kubernetes)");
    public static final Setting K8S_PODS_PER_JOB = env("JCOMM_K8S_PODS_PER_JOB", "integer", "none",
            "in a JobSet's pods: the pods of each job (its parallelism)", "`io.jcomm.api.launch` (Kubernetes)");
    public static final Setting JOB_ID = env("JCOMM_JOB_ID", "text (at most 256 bytes)",
            "`TORCHELASTIC_RUN_ID`, else the launcher's (`slurm-<job>.<step>`, `mpi-<job>`, `lws-<leader>`), "
                    + "else `jcomm-job`",
            "the job's identity, under which each rank declares itself to the store and the host's job registry",
            FROM_ENV);
    public static final Setting TIMEOUT_MS = env("JCOMM_TIMEOUT_MS", "milliseconds", "`60000`",
            "the default deadline of every blocking call", FROM_ENV);
    public static final Setting HOST_ID = env("JCOMM_HOST_ID", "text",
            "kernel boot id `@` host name",
            "this host's identity: ranks with equal ids use shared memory and one media driver "
                    + "(`io.jcomm.api.HostIdentity`, the one definition for every module)",
            "`HostIdentity`, `DistributedConfig.fromEnvironment()`");
    public static final Setting HOSTNAME = env("JCOMM_HOSTNAME", "host name or address",
            "`127.0.0.1` for a loopback `MASTER_ADDR`, else this host's address on the route to `MASTER_ADDR`",
            "the address other ranks use to reach this process (CPU-group listeners bind to it)", FROM_ENV);
    public static final Setting CPU_BACKEND = env("JCOMM_CPU_BACKEND", "`auto`, `tcp`, `gloo`",
            "`auto` (the available backend with the highest priority: `tcp`)", "the CPU groups' backend", FROM_ENV);
    public static final Setting DEVICE_COMM = env("JCOMM_DEVICE_COMM", "`auto`, or a provider name",
            "`auto`", "the device communicator provider (`cuda:nccl`, `cpu`, a vendor's)", FROM_ENV);
    public static final Setting ALL2ALL_BACKEND = env("JCOMM_ALL2ALL_BACKEND", "provider name",
            "the available all-to-all manager with the highest priority",
            "the all-to-all manager of expert-parallel groups (MoE dispatch and combine), unless "
                    + "`ParallelStateOptions.all2allBackend` names one",
            "`ParallelState.initialize`");
    public static final Setting TOKEN_FILE = env("JCOMM_TOKEN_FILE", "path", "none",
            "the job token file: the store and every client prove they hold it (challenge-response) before "
                    + "anything else", FROM_ENV);
    public static final Setting LAUNCHER_STORE = env("JCOMM_LAUNCHER_STORE", "`0`, `1`", "`0`",
            "`1`: a launcher hosts the store, no rank does (`commrun` sets it)", FROM_ENV);
    public static final Setting DEBUG = env("JCOMM_DEBUG", "`off`, `detail`", "`off`",
            "`detail`: before each device collective (all-reduce, all-gather, reduce-scatter, gather, broadcast of "
                    + "a device tensor) and `broadcastTensorDict` the group's ranks compare a fingerprint (operation, "
                    + "dtype, shape, reduce op, root, sequence number) over the CPU group, so a mismatch is a "
                    + "`CollectiveMismatchException` naming both calls on every rank instead of an NCCL hang; a device "
                    + "send first sends its fingerprint to the receiver; gloo's argument check is on even with "
                    + "`gloo.checkArgs=false`. Costs one small CPU-group all-gather per device collective; in code "
                    + "`DistributedConfig.builder().debug(DebugLevel.DETAIL)` or "
                    + "`ParallelStateOptions.builder().debugChecks(true)`",
            FROM_ENV);
    public static final Setting FAULT = env("JCOMM_FAULT", "`action@key=value,...` separated by `;`", "none (off)",
            "fault injection for tests of recovery ([RELIABILITY.md](RELIABILITY.md), \"Fault injection\"): actions "
                    + "`kill`, `stall:DURATION` (`500ms`, `5s`, `1m`), `cut`; keys `rank` (global rank, required), "
                    + "`group` (name or glob, `tp:*`), `op` (`allReduce`, ...), `seq` (the group's operation number, "
                    + "from 1), `phase` (`before`/`after`). E.g. `kill@rank=1,group=tp:*,op=allReduce,seq=200`. "
                    + "`-Djcomm.fault` wins over it; a malformed value fails the first group creation naming the bad part",
            "the CPU groups, once per process");
    public static final Setting RECOVERY = env("JCOMM_RECOVERY", "`shrink`, `replace`", "`shrink`",
            "what `ParallelState.recover()` does after a rank loss: `shrink` (the data-parallel replicas that lost "
                    + "a rank leave, the others go on) or `replace` (a restarted or spare process takes the lost rank's "
                    + "place); `commrun --spares`/`--max-restarts` set `replace`",
            FROM_ENV);
    public static final Setting ROLE = env("JCOMM_ROLE", "`worker`, `restarted`, `spare`", "`worker`",
            "set by a launcher: `restarted` (started again to take its own rank's place) or `spare` (takes the "
                    + "place of the first rank lost; `RANK` is a placeholder). A `restarted` or `spare` process's "
                    + "`ParallelState.initialize` joins the running job instead of starting one",
            FROM_ENV);
    public static final Setting SPARE_INDEX = env("JCOMM_SPARE_INDEX", "integer", "none",
            "set by `commrun` in a spare's environment: which of the node's spares it is (logs, tests)",
            "`commrun` (writes it)");
    public static final Setting LAUNCH_EPOCH_MS = env("JCOMM_LAUNCH_EPOCH_MS", "milliseconds since the epoch",
            "set by `commrun` (an outer launcher's value is kept)",
            "when the job was launched: the demo and the launch benchmarks report launch-to-ready from it",
            "`commrun`, the demo");

    // ---- observability ----

    public static final Setting REGISTRY = env("JCOMM_REGISTRY", "path, or `off`", "`/dev/shm/jcomm-registry`",
            "the host-wide job registry (a directory of small files) where each `ParallelState` enters its job, read by "
                    + "`commtop`; `off`, `0` or `false`: no registry",
            "`ParallelState.initialize`, `commtop`");
    public static final Setting RECORDER = env("JCOMM_RECORDER", "`on`, `off`", "on",
            "the flight recorder (the last operations of every group, in a file under `JCOMM_RECORDER_DIR`, "
                    + "read by stall reports and `commtop`); `off`, `0` or `false`: none",
            "the first group of the process");
    public static final Setting RECORDER_DIR = env("JCOMM_RECORDER_DIR", "directory", "`/dev/shm`",
            "where flight recorder files go (and where `commtop` and stall reports look for them)",
            "the flight recorder, `commtop`");
    public static final Setting RUN_ID = env("JCOMM_RUN_ID", "text", "`job`",
            "the tag in the flight recorder's file name (`jcomm-rec-<tag>-<pid>-...`)", "the flight recorder");

    // ---- the KV-cache block index ----

    public static final Setting KV_INDEX = env("JCOMM_KV_INDEX", "path, or `off`",
            "`/dev/shm/jcomm-kv-index-<digest of the host id>.cmap`",
            "the host-wide KV-block index (Chronicle Map) shared by every process of the host that offers or reuses "
                    + "KV blocks ([KV-CACHE.md](KV-CACHE.md)); `off`, `0` or `false`: none (no reuse through the host)",
            "`io.jcomm.kvcache.IndexOptions.fromEnvironment()`, when a process first opens the index");
    public static final Setting KV_INDEX_ENTRIES = env("JCOMM_KV_INDEX_ENTRIES", "integer", "`1048576`",
            "the index's bound in entries when a process creates its file (an existing file keeps the bound it was "
                    + "made with); beyond it each segment evicts its least recently used entries",
            "`io.jcomm.kvcache.IndexOptions.fromEnvironment()`");

    // ---- launchers' JVMs ----

    public static final Setting CDS = env("JCOMM_CDS", "`on`, `off`", "on",
            "class-data sharing archives for the launchers' JVMs and `commrun`'s workers (faster starts); "
                    + "`off`: none",
            "`commrun`, `bin/*`");
    public static final Setting CACHE_DIR = env("JCOMM_CACHE_DIR", "directory",
            "`${XDG_CACHE_HOME:-$HOME/.cache}/jcomm`", "jcomm's cache (class-data sharing archives under `cds/`)",
            "`commrun`, `bin/*`");
    public static final Setting JAVA_OPTS = script("JCOMM_JAVA_OPTS", "JVM arguments", "none",
            "extra JVM arguments of the launchers' own JVMs (`bin/commrun`, `bin/commbench`, ...)", "`bin/_launch`");
    public static final Setting NO_BUILD = script("JCOMM_NO_BUILD", "`1`", "unset",
            "set: the launchers do not rebuild the tools when sources are newer than the jar", "`bin/_launch`");
    public static final Setting LAUNCH_EXTRA = script("JCOMM_LAUNCH_EXTRA", "file-name globs", "none",
            "set by a launcher script: more jars of the tools' `lib/` on the class path (commbench's charts)",
            "`bin/_launch`");
    public static final Setting LAUNCH_LIBS = script("JCOMM_LAUNCH_LIBS", "file-name globs", "every jar",
            "set by a launcher script: only these jars of the tools' `lib/` (commstore runs on the store's "
                    + "artifacts alone)",
            "`bin/_launch`");
    public static final Setting GPU_CHECK_CP = script("JCOMM_GPU_CHECK_CP", "class path", "built by the script",
            "the class path `scripts/gpu-check.sh` runs its device checks on", "`scripts/gpu-check.sh`");
    public static final Setting GPU_COUNT = script("JCOMM_GPU_COUNT", "integer", "`nvidia-smi`'s count",
            "how many GPUs `scripts/gpu-check.sh` uses", "`scripts/gpu-check.sh`");
    public static final Setting LLAMA_MODEL = script("JCOMM_LLAMA_MODEL", "directory",
            "`${TMPDIR:-/tmp}/jcomm-llama-demo-f32-seed16`",
            "the model directory `scripts/llama_figures.sh` runs the Llama example and torch on",
            "`scripts/llama_figures.sh`");
    public static final Setting REQUIRE = env("JCOMM_REQUIRE", "comma-separated names (`gloo,torch,slurm,...`)",
            "none",
            "tests whose precondition is named fail instead of skipping when it is missing (`.ci/run` names "
                    + "everything it installs)",
            "the test suite");

    // ---- system properties ----

    public static final Setting RECEIVE_POOL_MIB = property("jcomm.receivePool.mib", "MiB", "`128` (`64` where the pool asks for young collections: serial or parallel collector)",
            "the receive pool's budget: host tensors handed out by receives come from recycled memory, and past "
                    + "this many MiB outstanding the pool asks for a collection",
            "the first receive of the process");
    public static final Setting FAULT_PROPERTY = property("jcomm.fault", "as `JCOMM_FAULT`", "none",
            "faults to inject, as `JCOMM_FAULT` (wins over it)", "the CPU groups, once per process");
    public static final Setting COPY_LIBRARY = property("jcomm.copy.library", "path", "the bundled `libjcommcopy.so`",
            "the native copy library of the tcp backend's shared-memory path (string copy, `process_vm_readv`)",
            "the tcp backend, once");
    public static final Setting GLOO_LIBRARY = property("jcomm.gloo.library", "path", "the bundled `libjcommgloo.so`",
            "the JNI library binding libgloo", "the gloo backend, once");
    public static final Setting NCCL_LIBDIR = property("jcomm.nccl.libdir", "directories (`:`-separated)",
            "none: `LD_LIBRARY_PATH`, then the dynamic linker's directories",
            "where to look first for `libnccl.so.2` (e.g. a pip wheel's `nvidia/nccl/lib`)", "the NCCL provider's probe");
    public static final Setting CUDA_LIBDIR = property("jcomm.cuda.libdir", "directories (`:`-separated)",
            "none: `LD_LIBRARY_PATH`, then the dynamic linker's directories",
            "where to look first for `libcudart.so.13` (and `libcuda.so.1`)", "the NCCL provider's probe");
    public static final Setting WORKER_CLASS_PATH = property("jcomm.worker.class.path", "class path",
            "none", "set by `commrun` on a worker started through its manifest jar: the user's class path",
            "`commrun`'s worker main");

    private static final List<Setting> VIEW = Collections.unmodifiableList(ALL);

    private Settings() {
    }

    /** Every setting, in the order of the documentation's table. */
    public static List<Setting> all() {
        return VIEW;
    }

    /** The setting called {@code name}, if jcomm has one. */
    public static Optional<Setting> named(String name) {
        for (Setting s : ALL) {
            if (s.name().equals(name)) {
                return Optional.of(s);
            }
        }
        return Optional.empty();
    }

    /** The table of {@code docs/CONFIGURATION.md}: one row per setting (Markdown). */
    public static String markdownTable() {
        StringBuilder sb = new StringBuilder();
        sb.append("| setting | values | default | meaning | read by |\n");
        sb.append("|---|---|---|---|---|\n");
        for (Setting s : ALL) {
            String name = s.source() == Source.PROPERTY ? "`-D" + s.name() + "`" : "`" + s.name() + "`";
            sb.append("| ").append(name).append(" | ").append(s.type()).append(" | ").append(s.defaultText())
                    .append(" | ").append(s.meaning()).append(" | ").append(s.readBy()).append(" |\n");
        }
        return sb.toString();
    }

    private static Setting env(String name, String type, String def, String meaning, String readBy) {
        return add(new Setting(name, Source.ENVIRONMENT, type, def, meaning, readBy));
    }

    private static Setting script(String name, String type, String def, String meaning, String readBy) {
        return add(new Setting(name, Source.SCRIPT, type, def, meaning, readBy));
    }

    private static Setting property(String name, String type, String def, String meaning, String readBy) {
        return add(new Setting(name, Source.PROPERTY, type, def, meaning, readBy));
    }

    private static Setting add(Setting s) {
        for (Setting other : ALL) {
            if (other.name().equals(s.name())) {
                throw new IllegalStateException("setting declared twice: " + s.name());
            }
        }
        ALL.add(s);
        return s;
    }
}
