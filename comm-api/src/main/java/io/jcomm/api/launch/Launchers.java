package io.jcomm.api.launch;

import io.jcomm.api.config.Settings;
import io.jcomm.api.launch.LaunchInfo.Field;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;

/**
 * The one place that knows launchers: reads a process's environment and says which rank of which job it
 * is, whatever started it. {@code DistributedConfig.fromEnvironment()} and {@code bin/commrun} both ask
 * here; adding a launcher is one {@link Launcher} class and one entry in {@link #SCHEDULERS}.
 *
 * <h2>Order and precedence</h2>
 *
 * <ol>
 *   <li>{@code JCOMM_LAUNCHER} ({@code auto}, {@code torchrun}, {@code slurm}, {@code mpi}, {@code k8s}, {@code lws})
 *       forces one: {@code torchrun} reads torchrun's variables only; a scheduler's name reads that scheduler
 *       (an error when its variables are absent), torchrun's variables filling only what it does not say.</li>
 *   <li>{@code auto} (the default) looks, in this order, at explicit torchrun variables ({@code RANK} and
 *       friends: {@code torchrun}, {@code bin/commrun}, PyTorchJob, or by hand); Slurm ({@code srun}); Open MPI,
 *       PMIx and MPICH/Hydra; Kubeflow ({@code PET_*}), then an Indexed Job or JobSet
 *       ({@code JOB_COMPLETION_INDEX}); LeaderWorkerSet ({@code LWS_*}).</li>
 *   <li>Of those present, the one with the most tasks describes this process: a launcher started inside
 *       another's task (commrun or torchrun in a Slurm step, mpirun's daemons started by Slurm) has more.
 *       Where two describe the same tasks (equal world sizes), every value both give must agree: a
 *       contradiction is an error naming both variables, never a guess. Where the outer one runs one task
 *       per node, its node must be the inner one's {@code GROUP_RANK}.</li>
 *   <li>{@code MASTER_ADDR} and {@code MASTER_PORT} always win when set. Otherwise the chosen launcher's
 *       master (Slurm: the first host of the step's node list; LWS: the leader) or the one it runs in;
 *       otherwise {@code 127.0.0.1}, except where the launcher cannot know it (MPI across hosts, a
 *       Kubernetes Job): then an error saying what to pass.</li>
 *   <li>The port: {@code MASTER_PORT}, else the launcher's (Slurm and Open MPI: {@link #derivedPort} of
 *       their job ids), else torchrun's 29500.</li>
 * </ol>
 */
public final class Launchers {

    /** The variable that forces a launcher. */
    /** {@code JCOMM_LAUNCHER}'s default: detect. */
    public static final String AUTO = "auto";
    /** torchrun's default store port. */
    public static final int DEFAULT_PORT = 29500;
    /** The lowest port {@link #derivedPort} gives (below Linux's ephemeral range, which starts at 32768). */
    public static final int DERIVED_PORT_BASE = 15000;

    private static final Launcher TORCHRUN = new TorchrunLauncher();
    /** The schedulers, in the order {@code auto} looks at them. */
    private static final List<Launcher> SCHEDULERS = List.of(new SlurmLauncher(), new MpiLauncher(),
            new KubernetesLauncher(), new LwsLauncher());

    private Launchers() {
    }

    /** The values {@code JCOMM_LAUNCHER} accepts. */
    public static List<String> names() {
        List<String> n = new ArrayList<>(List.of(AUTO, TORCHRUN.name()));
        for (Launcher l : SCHEDULERS) {
            n.add(l.name());
        }
        return List.copyOf(n);
    }

    /**
     * A store port from a scheduler's job and step ids: {@code 15000 + (job mod 1000) x 16 + (step mod 16)},
     * in [15000, 31000). Two steps (below 16) of one job never share it, nor do two jobs whose ids differ by
     * less than 1000; it stays below the ephemeral range, where an outgoing connection could hold it.
     */
    public static int derivedPort(long job, long step) {
        return DERIVED_PORT_BASE + (int) Math.floorMod(job, 1000L) * 16 + (int) Math.floorMod(step, 16L);
    }

    /**
     * What this process is in its job: rank, world, local rank and world, master address and port (each
     * known: defaults filled in) and the job id when a launcher names one.
     *
     * @throws IllegalArgumentException naming the variables when values are malformed or contradict each
     *                                  other, or when what a rank needs is not in the environment (with what to
     *                                  set)
     */
    public static LaunchInfo resolve(Map<String, String> env) {
        String forced = forced(env);
        LaunchInfo torchrun = TORCHRUN.detect(env).orElse(null);
        if (forced.equals(TORCHRUN.name())) {
            return finish(torchrun != null ? torchrun : LaunchInfo.builder(TORCHRUN.name()).build(), env);
        }
        if (!forced.equals(AUTO)) {
            Launcher l = byName(forced);
            LaunchInfo info = l.detect(env).orElseThrow(() -> new IllegalArgumentException(Settings.LAUNCHER.name() + "=" + forced
                    + " but this process has none of " + forced + "'s variables"));
            LaunchInfo.Builder b = info.toBuilder();
            if (torchrun != null) {
                fill(b, torchrun, Field.RANK, Field.WORLD_SIZE, Field.LOCAL_RANK, Field.LOCAL_WORLD_SIZE, Field.JOB_ID);
                override(b, torchrun);
            }
            return finish(b.build(), env);
        }
        List<LaunchInfo> candidates = new ArrayList<>();
        if (torchrun != null && torchrun.rank() != LaunchInfo.UNKNOWN) {
            candidates.add(torchrun);
        }
        for (Launcher l : SCHEDULERS) {
            l.detect(env).ifPresent(candidates::add);
        }
        if (candidates.isEmpty()) {
            LaunchInfo base = torchrun != null ? torchrun : LaunchInfo.builder("none").context(outsideStep(env)).build();
            return finish(base, env);
        }
        LaunchInfo primary = candidates.get(0);
        for (LaunchInfo c : candidates) {
            if (c.worldSize() > primary.worldSize()) {
                primary = c;
            }
        }
        LaunchInfo.Builder b = primary.toBuilder();
        List<String> outer = new ArrayList<>();
        for (LaunchInfo c : candidates) {
            if (c == primary) {
                continue;
            }
            boolean sameTasks = c.worldSize() == LaunchInfo.UNKNOWN || primary.worldSize() == LaunchInfo.UNKNOWN
                    || c.worldSize() == primary.worldSize();
            if (sameTasks) {
                agree(primary, c, Field.RANK, Field.WORLD_SIZE, Field.LOCAL_RANK, Field.LOCAL_WORLD_SIZE);
                if (c.rank() == LaunchInfo.UNKNOWN && c.rankNote() != null && primary.localRank() == LaunchInfo.UNKNOWN) {
                    // e.g. a PyTorchJob pod asked to run several processes, started as one rank
                    throw new IllegalArgumentException(c.rankNote());
                }
                fill(b, c, Field.RANK, Field.WORLD_SIZE, Field.LOCAL_RANK, Field.LOCAL_WORLD_SIZE, Field.NODE_RANK,
                        Field.NODE_COUNT, Field.MASTER_ADDR, Field.MASTER_PORT, Field.JOB_ID);
            } else {
                // an outer launcher (its tasks are nodes, or daemons that started this one): its node and job id
                // fill in; its master does not (mpirun's daemons may run on other hosts than rank 0)
                if (c.localWorldSize() == 1) {
                    agree(primary, c, Field.NODE_RANK);
                    fill(b, c, Field.NODE_RANK, Field.NODE_COUNT);
                }
                fill(b, c, Field.JOB_ID);
                outer.add(c.launcher() + " task " + (c.rank() == LaunchInfo.UNKNOWN ? "?" : c.rank()) + " of "
                        + c.worldSize());
            }
        }
        if (primary != torchrun && torchrun != null) {
            // RANK is not set: torchrun's other variables are settings that must agree with the launcher or fill in
            agree(b.build(), torchrun, Field.WORLD_SIZE, Field.LOCAL_RANK, Field.LOCAL_WORLD_SIZE);
            fill(b, torchrun, Field.WORLD_SIZE, Field.LOCAL_RANK, Field.LOCAL_WORLD_SIZE, Field.JOB_ID);
        }
        if (torchrun != null) {
            override(b, torchrun);
        }
        if (!outer.isEmpty()) {
            b.context("inside " + String.join(", ", outer));
        }
        return finish(b.build(), env);
    }

    /**
     * What the scheduler around a per-node launcher ({@code bin/commrun}) says: its task's node and the
     * job's nodes and master, or empty when no scheduler's variables are present (or {@code JCOMM_LAUNCHER} is
     * {@code torchrun}). The first scheduler found, in {@code auto}'s order, unless {@code JCOMM_LAUNCHER} names one.
     *
     * @throws IllegalArgumentException when a variable is malformed, or a forced scheduler is absent
     */
    public static Optional<LaunchInfo> scheduler(Map<String, String> env) {
        String forced = forced(env);
        if (forced.equals(TORCHRUN.name())) {
            return Optional.empty();
        }
        if (!forced.equals(AUTO)) {
            return Optional.of(byName(forced).detect(env).orElseThrow(() -> new IllegalArgumentException(Settings.LAUNCHER.name() + "="
                    + forced + " but this process has none of " + forced + "'s variables")));
        }
        for (Launcher l : SCHEDULERS) {
            Optional<LaunchInfo> i = l.detect(env);
            if (i.isPresent()) {
                return i;
            }
        }
        return Optional.empty();
    }

    private static String forced(Map<String, String> env) {
        String v = env.get(Settings.LAUNCHER.name());
        String forced = Settings.LAUNCHER.value(env).map(f -> f.toLowerCase(Locale.ROOT)).orElse(AUTO);
        if (!names().contains(forced)) {
            throw new IllegalArgumentException(Settings.LAUNCHER.name() + " is not one of " + String.join(", ", names()) + ": '" + v + "'");
        }
        return forced;
    }

    private static Launcher byName(String name) {
        for (Launcher l : SCHEDULERS) {
            if (l.name().equals(name)) {
                return l;
            }
        }
        throw new IllegalArgumentException("no launcher named " + name);
    }

    /** A hint when a process runs in a Slurm job but outside an srun step (a batch script's own shell). */
    private static String outsideStep(Map<String, String> env) {
        Env e = new Env(env);
        String job = e.get(SlurmLauncher.JOB_ID);
        if (job == null || e.has(SlurmLauncher.STEP_ID) || e.has(SlurmLauncher.STEPID_OLD)) {
            return null;
        }
        return "inside Slurm job " + job + " but not in an srun step: this process is a world of one; start the ranks "
                + "with srun";
    }

    /** Fields both give must be equal. */
    private static void agree(LaunchInfo a, LaunchInfo b, Field... fields) {
        for (Field f : fields) {
            Object va = value(a, f);
            Object vb = value(b, f);
            if (isKnown(va) && isKnown(vb) && !va.equals(vb)) {
                throw new IllegalArgumentException(name(a, f) + "=" + va + " (" + a.launcher() + ") and " + name(b, f) + "="
                        + vb + " (" + b.launcher() + ") disagree; unset the wrong one, or set " + Settings.LAUNCHER.name()
                        + " to the launcher to follow");
            }
        }
    }

    private static String name(LaunchInfo i, Field f) {
        String s = i.source(f);
        return s != null ? s : f.name();
    }

    /** Copies the fields {@code from} knows that {@code b} does not. */
    private static void fill(LaunchInfo.Builder b, LaunchInfo from, Field... fields) {
        LaunchInfo cur = b.build();
        for (Field f : fields) {
            Object v = value(from, f);
            if (!isKnown(value(cur, f)) && isKnown(v)) {
                set(b, f, v, from.source(f));
            }
        }
    }

    /** {@code MASTER_ADDR} and {@code MASTER_PORT}, when set, win over any launcher's. */
    private static void override(LaunchInfo.Builder b, LaunchInfo torchrun) {
        if (torchrun.masterAddr() != null) {
            b.masterAddr(torchrun.masterAddr(), torchrun.source(Field.MASTER_ADDR));
        }
        if (torchrun.masterPort() != LaunchInfo.UNKNOWN) {
            b.masterPort(torchrun.masterPort(), torchrun.source(Field.MASTER_PORT));
        }
    }

    private static LaunchInfo finish(LaunchInfo info, Map<String, String> env) {
        LaunchInfo.Builder b = info.toBuilder();
        boolean none = info.launcher().equals("none") || info.launcher().equals(TORCHRUN.name());
        if (info.rank() == LaunchInfo.UNKNOWN || info.worldSize() == LaunchInfo.UNKNOWN) {
            if (!none) {
                throw new IllegalArgumentException(info.rankNote() != null ? info.rankNote() : info.launcher()
                        + " does not say this process's " + (info.rank() == LaunchInfo.UNKNOWN ? "rank" : "world size"));
            }
            if (info.rank() == LaunchInfo.UNKNOWN) {
                b.rank(0, "default");
            }
            if (info.worldSize() == LaunchInfo.UNKNOWN) {
                b.worldSize(1, "default");
            }
        }
        LaunchInfo cur = b.build();
        if (cur.rank() >= cur.worldSize()) {
            throw new IllegalArgumentException(name(cur, Field.RANK) + "=" + cur.rank() + " is not below "
                    + name(cur, Field.WORLD_SIZE) + "=" + cur.worldSize());
        }
        if (cur.localWorldSize() == 1 && cur.nodeRank() != LaunchInfo.UNKNOWN && cur.nodeCount() == LaunchInfo.UNKNOWN) {
            b.nodeCount(cur.worldSize(), "one rank per node");
        }
        if (cur.masterAddr() == null) {
            if (cur.masterNote() != null) {
                throw new IllegalArgumentException(cur.masterNote());
            }
            b.masterAddr("127.0.0.1", "default");
        }
        if (cur.masterPort() == LaunchInfo.UNKNOWN) {
            b.masterPort(DEFAULT_PORT, "default");
        }
        return b.build();
    }

    private static boolean isKnown(Object v) {
        return v != null && !(v instanceof Integer && (Integer) v == LaunchInfo.UNKNOWN);
    }

    private static Object value(LaunchInfo i, Field f) {
        switch (f) {
            case RANK: return i.rank();
            case WORLD_SIZE: return i.worldSize();
            case LOCAL_RANK: return i.localRank();
            case LOCAL_WORLD_SIZE: return i.localWorldSize();
            case NODE_RANK: return i.nodeRank();
            case NODE_COUNT: return i.nodeCount();
            case MASTER_ADDR: return i.masterAddr();
            case MASTER_PORT: return i.masterPort();
            default: return i.jobId();
        }
    }

    private static void set(LaunchInfo.Builder b, Field f, Object v, String source) {
        switch (f) {
            case RANK: b.rank((Integer) v, source); break;
            case WORLD_SIZE: b.worldSize((Integer) v, source); break;
            case LOCAL_RANK: b.localRank((Integer) v, source); break;
            case LOCAL_WORLD_SIZE: b.localWorldSize((Integer) v, source); break;
            case NODE_RANK: b.nodeRank((Integer) v, source); break;
            case NODE_COUNT: b.nodeCount((Integer) v, source); break;
            case MASTER_ADDR: b.masterAddr((String) v, source); break;
            case MASTER_PORT: b.masterPort((Integer) v, source); break;
            default: b.jobId((String) v, source);
        }
    }
}
