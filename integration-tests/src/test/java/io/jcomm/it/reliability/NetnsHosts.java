package io.jcomm.it.reliability;

import io.jcomm.tools.bench.WorkerJvms;
import io.jcomm.tools.run.CommRun;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Assumptions;

/**
 * Two simulated hosts for a test: network namespaces {@code PREFIX-h1} and {@code PREFIX-h2} joined by
 * a veth pair ({@code scripts/netns-hosts.sh}), removed by {@link #close()} whatever happened. Needs
 * root; without it the test is skipped with the reason, except under {@code CI=true}, where a skip
 * is a failure (CI runs as root).
 */
public final class NetnsHosts implements AutoCloseable {

    static final Path ROOT = Path.of("..").toAbsolutePath().normalize();
    private static final Path SCRIPT = ROOT.resolve("scripts/netns-hosts.sh");

    /** The namespaces' name prefix. */
    public final String prefix;
    /** Host 1's address. */
    public final String addr1;
    /** Host 2's address. */
    public final String addr2;

    private NetnsHosts(String prefix, String addr1, String addr2) {
        this.prefix = prefix;
        this.addr1 = addr1;
        this.addr2 = addr2;
    }

    /** Creates the two hosts, or skips (fails under CI) when network namespaces cannot be made here. */
    public static NetnsHosts create(String prefix) throws IOException, InterruptedException {
        String why = null;
        if (!"root".equals(System.getProperty("user.name"))) {
            why = "network namespaces need root (running as " + System.getProperty("user.name") + ")";
        } else if (!Files.isExecutable(Path.of("/usr/sbin/ip")) && !Files.isExecutable(Path.of("/sbin/ip"))) {
            why = "iproute2's ip is not installed";
        }
        Result r = null;
        if (why == null) {
            run(SCRIPT.toString(), "down", prefix); // a leftover of an interrupted run
            r = run(SCRIPT.toString(), "up", prefix);
            if (r.code != 0) {
                run(SCRIPT.toString(), "down", prefix);
                why = "ip netns failed: " + r.out.trim();
            }
        }
        if (why != null) {
            if ("true".equals(System.getenv("CI"))) {
                throw new AssertionError("CI=true: the two-host test must run, but " + why);
            }
            Assumptions.abort(why);
        }
        String[] a = r.out.trim().split("\\s+");
        return new NetnsHosts(prefix, a[a.length - 2], a[a.length - 1]);
    }

    /** The name of host {@code i}'s network namespace (1 or 2). */
    public String host(int i) {
        return prefix + "-h" + i;
    }

    /** The {@code nsenter --net=...} prefix that runs a command in host {@code i}'s namespace. */
    public List<String> nsenter(int i) {
        return List.of("nsenter", "--net=/var/run/netns/" + host(i));
    }

    /** Takes the link down on both ends. */
    public void cut() throws IOException, InterruptedException {
        Result r = run(SCRIPT.toString(), "cut", prefix);
        if (r.code != 0) {
            throw new AssertionError("cannot cut the link: " + r.out);
        }
    }

    /** A process started inside host {@code i} ({@code ip netns exec}). */
    public Process start(int i, List<String> command, java.util.Map<String, String> env, Path log) throws IOException {
        List<String> cmd = new ArrayList<>(List.of("ip", "netns", "exec", host(i)));
        cmd.addAll(command);
        ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true).redirectOutput(log.toFile());
        pb.environment().remove("JCOMM_TOKEN_FILE");
        pb.environment().putAll(env);
        return pb.start();
    }

    @Override
    public void close() throws IOException {
        try {
            run(SCRIPT.toString(), "down", prefix);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while removing " + prefix + "'s namespaces", e);
        }
    }

    record Result(int code, String out) {
    }

    static Result run(String... cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        byte[] out = p.getInputStream().readAllBytes();
        if (!p.waitFor(30, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            return new Result(-1, "timed out: " + String.join(" ", cmd));
        }
        return new Result(p.exitValue(), new String(out, StandardCharsets.UTF_8));
    }

    /** The command line of a {@code commrun} JVM on the test class path (its own options and target to follow). */
    public static List<String> commrunJvm() {
        return javaCommand(CommRun.class, "256m");
    }

    /** The command line of a JVM running {@code main} on the test class path (its arguments to follow). */
    public static List<String> javaCommand(Class<?> main, String maxHeap) {
        return WorkerJvms.javaCommand(List.of("-Xmx" + maxHeap), main);
    }
}
