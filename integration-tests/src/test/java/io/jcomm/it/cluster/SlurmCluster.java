package io.jcomm.it.cluster;

import io.jcomm.it.reliability.NetnsHosts;
import io.jcomm.testkit.Requirements;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A real two-node Slurm cluster for a test: Debian's {@code slurmctld} and two {@code slurmd}s, nodes
 * {@code n1} and {@code n2}, each in its own network namespace ({@link NetnsHosts}: nothing but a veth pair
 * between them), {@code auth/none}, state, spool and logs under a temporary directory. The controller runs
 * beside {@code n1}; {@code srun} and {@code sbatch} run there too.
 *
 * <p>What the machine's DNS would give a real cluster is given to the JVMs the cluster starts: node names
 * resolve through a hosts file ({@link #hostsFileFlag()}, a JVM flag), and each node's tasks get
 * {@code JCOMM_HOST_ID} = their node's name through a task prolog, as two machines would differ.
 *
 * <p>Daemons run in the foreground as children of the test; {@link #close()} cancels every job, stops
 * them, kills any step daemon or task left, and removes the namespaces, pass or fail. Needs root and
 * {@code slurm-wlm}'s binaries: the test is skipped with the reason, or fails under {@code JCOMM_REQUIRE=slurm}
 * ({@code .ci/run} installs them).
 */
public final class SlurmCluster implements AutoCloseable {

    private static final Path SLURMCTLD = Path.of("/usr/sbin/slurmctld");
    private static final Path SLURMD = Path.of("/usr/sbin/slurmd");

    public final NetnsHosts hosts;
    public final Path dir;
    private final Path conf;
    private final List<Process> daemons = new ArrayList<>();

    private SlurmCluster(NetnsHosts hosts, Path dir) {
        this.hosts = hosts;
        this.dir = dir;
        this.conf = dir.resolve("slurm.conf");
    }

    /** Starts the cluster and waits until both nodes are idle. */
    public static SlurmCluster start(String prefix) throws Exception {
        boolean binaries = Files.isExecutable(SLURMCTLD) && Files.isExecutable(SLURMD)
                && Files.isExecutable(Path.of("/usr/bin/srun"));
        Requirements.assume("slurm", binaries, "slurmctld, slurmd or srun missing (apt-get install slurmctld slurmd "
                + "slurm-client)");
        NetnsHosts h = NetnsHosts.create(prefix);
        Path dir = Files.createTempDirectory("jcomm-slurm-");
        SlurmCluster c = new SlurmCluster(h, dir);
        try {
            c.configure();
            c.daemons.add(c.daemon(1, List.of(SLURMCTLD.toString(), "-D", "-c", "-f", c.conf.toString()), "slurmctld"));
            for (int n = 1; n <= 2; n++) {
                c.daemons.add(c.daemon(n, List.of(SLURMD.toString(), "-D", "-f", c.conf.toString(), "-N", "n" + n),
                        "slurmd-n" + n));
            }
            c.awaitIdle(60);
            return c;
        } catch (Exception | Error e) {
            c.close();
            throw e;
        }
    }

    private void configure() throws IOException, InterruptedException {
        String host = hostName();
        for (String d : List.of("state", "spool-n1", "spool-n2", "log", "jobs")) {
            Files.createDirectories(dir.resolve(d));
        }
        Path prolog = dir.resolve("task-prolog.sh");
        Files.writeString(prolog, "#!/bin/sh\n# each node's tasks see their own host identity, as two machines would\n"
                + "echo \"export JCOMM_HOST_ID=$SLURMD_NODENAME\"\n");
        Files.setPosixFilePermissions(prolog, PosixFilePermissions.fromString("rwxr-xr-x"));
        String d = dir.toString();
        String text = String.join("\n",
                "ClusterName=jcommit",
                "SlurmctldHost=" + host + "(" + hosts.addr1 + ")",
                "SlurmUser=root",
                "SlurmdUser=root",
                "AuthType=auth/none",
                "CredType=cred/none",
                "ProctrackType=proctrack/pgid",
                "TaskPlugin=task/none",
                "TaskProlog=" + prolog,
                "MpiDefault=none",
                "SelectType=select/cons_tres",
                "SlurmdParameters=config_overrides",
                "ReturnToService=2",
                "KillWait=5",
                "StateSaveLocation=" + d + "/state",
                "SlurmdSpoolDir=" + d + "/spool-%n",
                "SlurmctldPidFile=" + d + "/slurmctld.pid",
                "SlurmdPidFile=" + d + "/slurmd-%n.pid",
                "SlurmctldLogFile=" + d + "/log/slurmctld.log",
                "SlurmdLogFile=" + d + "/log/slurmd-%n.log",
                "AccountingStorageType=accounting_storage/none",
                "JobAcctGatherType=jobacct_gather/none",
                "MailProg=/bin/true",
                "NodeName=n1 NodeHostname=" + host + " NodeAddr=" + hosts.addr1 + " CPUs=4",
                "NodeName=n2 NodeHostname=" + host + " NodeAddr=" + hosts.addr2 + " CPUs=4",
                "PartitionName=main Nodes=ALL Default=YES OverSubscribe=YES MaxTime=INFINITE State=UP", "");
        Files.writeString(conf, text);
        Files.writeString(dir.resolve("hosts"), "127.0.0.1 localhost\n127.0.0.1 " + host + "\n" + hosts.addr1 + " n1\n"
                + hosts.addr2 + " n2\n");
    }

    /** {@code -Djdk.net.hosts.file=...}: the JVM resolves {@code n1} and {@code n2} as the cluster's DNS would. */
    public String hostsFileFlag() {
        return "-Djdk.net.hosts.file=" + dir.resolve("hosts");
    }

    /** The environment every Slurm command of this cluster needs. */
    public Map<String, String> env() {
        return Map.of("SLURM_CONF", conf.toString());
    }

    private Process daemon(int node, List<String> command, String name) throws IOException {
        List<String> cmd = new ArrayList<>(hosts.nsenter(node));
        cmd.addAll(command);
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true)
                .redirectOutput(dir.resolve("log").resolve(name + ".out").toFile());
        pb.environment().putAll(env());
        return pb.start();
    }

    private void awaitIdle(int seconds) throws Exception {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        String last = "";
        while (System.nanoTime() - end < 0) {
            for (Process d : daemons) {
                if (!d.isAlive()) {
                    throw new AssertionError("a Slurm daemon exited " + d.exitValue() + ":\n" + logs());
                }
            }
            Result r = command(List.of("sinfo", "-h", "-o", "%t %D"), 10);
            last = r.out.trim();
            if (r.code == 0 && last.equals("idle 2")) {
                return;
            }
            Thread.sleep(200);
        }
        throw new AssertionError("the Slurm nodes were not idle within " + seconds + " s (sinfo: " + last + "):\n" + logs());
    }

    /** A Slurm client command ({@code srun}, {@code sbatch}, {@code squeue}, ...) started beside node 1. */
    public Process start(List<String> command, Map<String, String> extraEnv, Path log) throws IOException {
        List<String> cmd = new ArrayList<>(hosts.nsenter(1));
        cmd.addAll(command);
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile())
                .directory(dir.resolve("jobs").toFile());
        pb.environment().remove("JCOMM_TOKEN_FILE");
        pb.environment().putAll(env());
        pb.environment().putAll(extraEnv);
        return pb.start();
    }

    /** Runs a Slurm client command to its end (at most {@code seconds}). */
    public Result command(List<String> command, int seconds) throws IOException, InterruptedException {
        Path out = Files.createTempFile(dir, "cmd", ".out");
        Process p = start(command, Map.of(), out);
        if (!p.waitFor(seconds, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            return new Result(-1, "timed out: " + command);
        }
        return new Result(p.exitValue(), Files.readString(out));
    }

    /** The pids of this cluster's tasks whose environment says {@code SLURM_PROCID=procId}. */
    public List<Long> tasks(int procId) {
        List<Long> out = new ArrayList<>();
        String confVar = "SLURM_CONF=" + conf;
        String rankVar = "SLURM_PROCID=" + procId;
        ProcessHandle.allProcesses().forEach(p -> {
            String env = environ(p.pid());
            if (env.contains("\0" + confVar + "\0") && env.contains("\0" + rankVar + "\0")
                    && p.info().command().map(c -> c.endsWith("/java")).orElse(false)) {
                out.add(p.pid());
            }
        });
        return out;
    }

    /**
     * The processes started under this cluster's configuration that are still alive (tasks, step daemons), other
     * than the daemons and their own children (slurmctld's script daemon).
     */
    public List<ProcessHandle> leftovers() {
        String confVar = "SLURM_CONF=" + conf;
        java.util.Set<Long> daemonPids = new java.util.HashSet<>();
        for (Process d : daemons) {
            daemonPids.add(d.pid());
            d.toHandle().descendants().forEach(c -> daemonPids.add(c.pid()));
        }
        List<ProcessHandle> out = new ArrayList<>();
        ProcessHandle.allProcesses().forEach(p -> {
            if (p.pid() != ProcessHandle.current().pid() && !daemonPids.contains(p.pid())
                    && environ(p.pid()).contains("\0" + confVar + "\0")) {
                out.add(p);
            }
        });
        return out;
    }

    static String environ(long pid) {
        try {
            return "\0" + new String(Files.readAllBytes(Path.of("/proc", Long.toString(pid), "environ")),
                    StandardCharsets.ISO_8859_1);
        } catch (IOException | RuntimeException e) {
            return "";
        }
    }

    /** The daemons' logs, for a failure message. */
    public String logs() {
        StringBuilder sb = new StringBuilder();
        try (Stream<Path> s = Files.list(dir.resolve("log"))) {
            for (Path p : s.sorted().toList()) {
                String t = Files.readString(p);
                sb.append("== ").append(p.getFileName()).append('\n')
                        .append(t.length() > 4000 ? t.substring(t.length() - 4000) : t).append('\n');
            }
        } catch (IOException e) {
            sb.append("(logs unreadable: ").append(e).append(")");
        }
        return sb.toString();
    }

    @Override
    public void close() throws IOException {
        try {
            if (daemons.stream().anyMatch(Process::isAlive)) {
                command(List.of("scancel", "--full", "--partition=main"), 10);
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
                while (System.nanoTime() - end < 0) {
                    Result q = command(List.of("squeue", "-h"), 10);
                    if (q.code != 0 || q.out.isBlank()) {
                        break;
                    }
                    Thread.sleep(200);
                }
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } finally {
            for (Process d : daemons) {
                d.destroy();
            }
            for (Process d : daemons) {
                try {
                    if (!d.waitFor(10, TimeUnit.SECONDS)) {
                        d.destroyForcibly();
                        d.waitFor(5, TimeUnit.SECONDS);
                    }
                } catch (InterruptedException e) {
                    d.destroyForcibly();
                    Thread.currentThread().interrupt();
                }
            }
            // step daemons and tasks of a job that did not end cleanly (they inherit the daemons' SLURM_CONF)
            for (ProcessHandle p : leftovers()) {
                p.destroyForcibly();
            }
            hosts.close();
            try (Stream<Path> s = Files.walk(dir)) {
                s.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    private static String hostName() throws IOException, InterruptedException {
        Process p = new ProcessBuilder("hostname", "-s").redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).trim();
        p.waitFor(10, TimeUnit.SECONDS);
        return out;
    }

    /** A finished command's exit code and output. */
    public record Result(int code, String out) {
    }
}
