package io.jcomm.api.launch;

import java.util.EnumMap;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;

/**
 * What a launcher told this process about its place in a job, and from which variables: immutable.
 * {@link Launchers#resolve(Map)} makes the one a rank follows; {@link Launcher#detect(Map)} makes one per
 * launcher whose variables are present. A value the launcher does not give is {@link #UNKNOWN} (numbers)
 * or {@code null} (names).
 *
 * <p>A task of a scheduler is either one rank (one task per rank, {@code srun -n 8 java ...}) or one
 * node's agent ({@code srun -N 2 --ntasks-per-node 1 bin/commrun ...}); a rank reads the rank fields,
 * an agent the node fields ({@link #nodeRank()}, {@link #nodeCount()}).
 */
public final class LaunchInfo {

    /** A number the launcher does not give. */
    public static final int UNKNOWN = -1;

    /** The fields a launcher may give, named in {@link #source(Field)}. */
    public enum Field {
        RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, NODE_RANK, NODE_COUNT, MASTER_ADDR, MASTER_PORT, JOB_ID
    }

    private final String launcher;
    private final String flavour;
    private final int rank;
    private final int worldSize;
    private final int localRank;
    private final int localWorldSize;
    private final int nodeRank;
    private final int nodeCount;
    private final String masterAddr;
    private final int masterPort;
    private final String jobId;
    private final Map<Field, String> sources;
    private final String rankNote;
    private final String masterNote;
    private final String context;

    private LaunchInfo(Builder b) {
        this.launcher = Objects.requireNonNull(b.launcher, "launcher");
        this.flavour = b.flavour;
        this.rank = b.rank;
        this.worldSize = b.worldSize;
        this.localRank = b.localRank;
        this.localWorldSize = b.localWorldSize;
        this.nodeRank = b.nodeRank;
        this.nodeCount = b.nodeCount;
        this.masterAddr = b.masterAddr;
        this.masterPort = b.masterPort;
        this.jobId = b.jobId;
        this.sources = Map.copyOf(b.sources);
        this.rankNote = b.rankNote;
        this.masterNote = b.masterNote;
        this.context = b.context;
    }

    /** A builder for launcher {@code name} ({@link Launcher#name()}). */
    public static Builder builder(String launcher) {
        return new Builder(launcher);
    }

    /** A builder initialised with this value. */
    public Builder toBuilder() {
        Builder b = new Builder(launcher);
        b.flavour = flavour;
        b.rank = rank;
        b.worldSize = worldSize;
        b.localRank = localRank;
        b.localWorldSize = localWorldSize;
        b.nodeRank = nodeRank;
        b.nodeCount = nodeCount;
        b.masterAddr = masterAddr;
        b.masterPort = masterPort;
        b.jobId = jobId;
        b.sources.putAll(sources);
        b.rankNote = rankNote;
        b.masterNote = masterNote;
        b.context = context;
        return b;
    }

    /** The launcher's name: {@code torchrun}, {@code slurm}, {@code mpi}, {@code k8s}, {@code lws}, or {@code none}. */
    public String launcher() {
        return launcher;
    }

    /** Which variant of the launcher ({@code Open MPI}, {@code JobSet}, ...), or {@code null}. */
    public String flavour() {
        return flavour;
    }

    public int rank() {
        return rank;
    }

    public int worldSize() {
        return worldSize;
    }

    public int localRank() {
        return localRank;
    }

    public int localWorldSize() {
        return localWorldSize;
    }

    /** This task's node (host) among the job's nodes, or {@link #UNKNOWN}. */
    public int nodeRank() {
        return nodeRank;
    }

    /** How many nodes the job spans, or {@link #UNKNOWN}. */
    public int nodeCount() {
        return nodeCount;
    }

    /** Where the job's store is (rank 0's host), or {@code null}: see {@link #masterNote()}. */
    public String masterAddr() {
        return masterAddr;
    }

    public int masterPort() {
        return masterPort;
    }

    /** The job's identity as the launcher names it (e.g. {@code slurm-812.0}), or {@code null}. */
    public String jobId() {
        return jobId;
    }

    /** The variables (or the rule) field {@code f} came from, or {@code null} when it was not given. */
    public String source(Field f) {
        return sources.get(f);
    }

    /**
     * Why this launcher's task is not one rank (e.g. a Kubernetes pod that runs several), or {@code null} when
     * it is or may be.
     */
    public String rankNote() {
        return rankNote;
    }

    /** What to pass when the launcher does not say where rank 0 is ({@link #masterAddr()} null), or {@code null}. */
    public String masterNote() {
        return masterNote;
    }

    /** Other launchers seen around this one (e.g. the Slurm step a launcher runs in), or {@code null}. */
    public String context() {
        return context;
    }

    /** Whether this task is one rank: its rank and world size are known. */
    public boolean isRank() {
        return rank != UNKNOWN && worldSize != UNKNOWN;
    }

    /**
     * One line saying what was found and from which variables, e.g. {@code slurm: rank 3 of 8 (SLURM_PROCID,
     * SLURM_STEP_NUM_TASKS), local 1 of 4 (...), node 0 of 2 (...), master n1:15016 (...)}.
     */
    public String describe() {
        StringBuilder sb = new StringBuilder(launcher);
        if (flavour != null) {
            sb.append(" (").append(flavour).append(')');
        }
        sb.append(':');
        int mark = sb.length();
        pair(sb, "rank", rank, worldSize, Field.RANK, Field.WORLD_SIZE);
        pair(sb, "local", localRank, localWorldSize, Field.LOCAL_RANK, Field.LOCAL_WORLD_SIZE);
        pair(sb, "node", nodeRank, nodeCount, Field.NODE_RANK, Field.NODE_COUNT);
        if (masterAddr != null || masterPort != UNKNOWN) {
            sb.append(sb.length() == mark ? " " : ", ").append("master ").append(masterAddr == null ? "?" : masterAddr)
                    .append(':').append(masterPort == UNKNOWN ? "?" : Integer.toString(masterPort));
            String a = sources.get(Field.MASTER_ADDR);
            String p = sources.get(Field.MASTER_PORT);
            if (a != null || p != null) {
                sb.append(" (").append(a == null ? "?" : a).append("; ").append(p == null ? "?" : p).append(')');
            }
        }
        if (jobId != null) {
            sb.append(sb.length() == mark ? " " : ", ").append("job ").append(jobId);
        }
        if (sb.length() == mark) {
            sb.append(" nothing");
        }
        if (context != null) {
            sb.append("; ").append(context);
        }
        return sb.toString();
    }

    private void pair(StringBuilder sb, String name, int v, int of, Field fv, Field fof) {
        if (v == UNKNOWN && of == UNKNOWN) {
            return;
        }
        sb.append(sb.charAt(sb.length() - 1) == ':' ? " " : ", ").append(name).append(' ')
                .append(v == UNKNOWN ? "?" : Integer.toString(v)).append(" of ")
                .append(of == UNKNOWN ? "?" : Integer.toString(of));
        String a = sources.get(fv);
        String b = sources.get(fof);
        if (a != null && a.equals(b)) {
            sb.append(" (").append(a).append(')');
        } else if (a != null || b != null) {
            sb.append(" (").append(a == null ? "?" : a).append(", ").append(b == null ? "?" : b).append(')');
        }
    }

    @Override
    public String toString() {
        return "LaunchInfo{" + describe() + "}";
    }

    /** Mutable builder; {@link #build()} returns the immutable value. */
    public static final class Builder {
        private final String launcher;
        private String flavour;
        private int rank = UNKNOWN;
        private int worldSize = UNKNOWN;
        private int localRank = UNKNOWN;
        private int localWorldSize = UNKNOWN;
        private int nodeRank = UNKNOWN;
        private int nodeCount = UNKNOWN;
        private String masterAddr;
        private int masterPort = UNKNOWN;
        private String jobId;
        private final Map<Field, String> sources = new EnumMap<>(Field.class);
        private String rankNote;
        private String masterNote;
        private String context;

        private Builder(String launcher) {
            this.launcher = launcher.toLowerCase(Locale.ROOT);
        }

        public Builder flavour(String v) { this.flavour = v; return this; }
        public Builder rank(int v, String source) { this.rank = v; return source(Field.RANK, source); }
        public Builder worldSize(int v, String source) { this.worldSize = v; return source(Field.WORLD_SIZE, source); }
        public Builder localRank(int v, String source) { this.localRank = v; return source(Field.LOCAL_RANK, source); }
        public Builder localWorldSize(int v, String source) {
            this.localWorldSize = v;
            return source(Field.LOCAL_WORLD_SIZE, source);
        }
        public Builder nodeRank(int v, String source) { this.nodeRank = v; return source(Field.NODE_RANK, source); }
        public Builder nodeCount(int v, String source) { this.nodeCount = v; return source(Field.NODE_COUNT, source); }
        public Builder masterAddr(String v, String source) { this.masterAddr = v; return source(Field.MASTER_ADDR, source); }
        public Builder masterPort(int v, String source) { this.masterPort = v; return source(Field.MASTER_PORT, source); }
        public Builder jobId(String v, String source) { this.jobId = v; return source(Field.JOB_ID, source); }
        public Builder rankNote(String v) { this.rankNote = v; return this; }
        public Builder masterNote(String v) { this.masterNote = v; return this; }
        public Builder context(String v) { this.context = v; return this; }

        private Builder source(Field f, String source) {
            if (source == null) {
                sources.remove(f);
            } else {
                sources.put(f, source);
            }
            return this;
        }

        public LaunchInfo build() {
            return new LaunchInfo(this);
        }
    }
}
