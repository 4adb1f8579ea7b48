package io.jcomm.tools.bench.store;

import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import io.jcomm.cpu.store.TcpStoreDialect;
import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.URISyntaxException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * Benchmark of the rendezvous store: round-trip latency (HdrHistogram percentiles) and throughput
 * of {@code get} and {@code add}, one request in flight, for every pairing of client and server
 * that matters, in one run:
 *
 * <ul>
 *   <li>{@code jcomm@jcomm}: our client against our in-process server (pipelined WAIT+GET),</li>
 *   <li>{@code jcomm-2rtt@jcomm}: our client without the capability probe (torch's two round trips),</li>
 *   <li>{@code torch@jcomm}: torch's client (Python) against our server,</li>
 *   <li>{@code torch@torch}: torch's client against torch's server,</li>
 *   <li>{@code jcomm@torch}: our client against torch's server,</li>
 *   <li>{@code tcp-echo}: a raw blocking-socket ping-pong of the same size, the floor.</li>
 * </ul>
 *
 * The torch side runs {@code scripts/store_bench.py} with {@code /usr/bin/python3}.
 */
@Command(name = "store", mixinStandardHelpOptions = true,
        description = "Store get/add round-trip latency and ops/s: jcomm vs torch clients and servers.")
public final class StoreBenchCommand implements Callable<Integer> {

    @Option(names = "--iterations", defaultValue = "20000", description = "timed operations per row (default ${DEFAULT-VALUE})")
    int iterations;

    @Option(names = "--warmup", defaultValue = "5000", description = "untimed operations first (default ${DEFAULT-VALUE})")
    int warmup;

    @Option(names = "--value-bytes", defaultValue = "64", description = "value size of get (default ${DEFAULT-VALUE})")
    int valueBytes;

    @Option(names = "--ops", split = ",", defaultValue = "get,add", description = "operations (default ${DEFAULT-VALUE})")
    List<String> ops;

    @Option(names = "--pairs", split = ",", defaultValue = "tcp-echo,jcomm@jcomm,jcomm-2rtt@jcomm,torch@jcomm,torch@torch,jcomm@torch",
            description = "client@server rows (default ${DEFAULT-VALUE})")
    List<String> pairs;

    @Option(names = "--transport", defaultValue = "AUTO", description = "server transport: AUTO, EPOLL, NIO")
    TcpStoreServerConfig.Transport transport;

    @Option(names = "--python", defaultValue = "/usr/bin/python3", description = "Python with torch (default ${DEFAULT-VALUE})")
    String python;

    @Option(names = "--script", description = "path of store_bench.py (default: scripts/ of the jcomm checkout)")
    Path script;

    private final PrintStream out;

    public StoreBenchCommand() {
        this(System.out);
    }

    StoreBenchCommand(PrintStream out) {
        this.out = out;
    }

    public static void main(String[] args) {
        // the in-process servers' start lines would interleave with the table
        if (System.getProperty("org.slf4j.simpleLogger.log.io.jcomm.cpu.store") == null) {
            System.setProperty("org.slf4j.simpleLogger.log.io.jcomm.cpu.store", "warn");
        }
        System.exit(new CommandLine(new StoreBenchCommand()).execute(args));
    }

    /** One measured row. */
    record Row(String pair, String op, Histogram h, long elapsedNanos, int n) {
    }

    @Override
    public Integer call() throws Exception {
        Path py = script != null ? script : defaultScript();
        out.printf("# jcomm store benchmark: %d timed + %d warm-up ops per row, value %d B, one request in flight%n",
                iterations, warmup, valueBytes);
        out.printf("# host: %d CPUs, java %s; latencies in microseconds%n", Runtime.getRuntime().availableProcessors(),
                System.getProperty("java.version"));
        out.printf("%-18s %-4s %8s %8s %8s %8s %8s %8s %10s%n", "# client@server", "op", "p50", "p90", "p99",
                "p99.9", "max", "mean", "ops/s");
        List<Row> rows = new ArrayList<>();
        for (String pair : pairs) {
            for (String op : ops) {
                Row r;
                try {
                    r = run(pair.trim(), op.trim(), py);
                } catch (Exception e) {
                    out.printf("%-18s %-4s failed: %s%n", pair, op, e);
                    continue;
                }
                rows.add(r);
                print(r);
            }
        }
        return rows.isEmpty() ? 1 : 0;
    }

    private void print(Row r) {
        Histogram h = r.h();
        double opsPerSec = r.n() / (r.elapsedNanos() / 1e9);
        out.printf("%-18s %-4s %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %10.0f%n", r.pair(), r.op(),
                us(h.getValueAtPercentile(50)), us(h.getValueAtPercentile(90)), us(h.getValueAtPercentile(99)),
                us(h.getValueAtPercentile(99.9)), us(h.getMaxValue()), h.getMean() / 1000.0, opsPerSec);
    }

    private static double us(long nanos) {
        return nanos / 1000.0;
    }

    private Row run(String pair, String op, Path py) throws Exception {
        switch (pair) {
            case "tcp-echo":
                return tcpEcho(op);
            case "jcomm@jcomm":
            case "jcomm-2rtt@jcomm":
                try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().transport(transport)
                        .name("bench-store").build())) {
                    return jcommClient(pair, op, server.port(), !pair.startsWith("jcomm-2rtt"));
                }
            case "torch@jcomm":
                try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().transport(transport)
                        .name("bench-store").build())) {
                    return torchClient(pair, op, server.port(), false, py);
                }
            case "torch@torch":
                return torchClient(pair, op, freePort(), true, py);
            case "jcomm@torch":
                return jcommAgainstTorch(pair, op, py);
            default:
                throw new IllegalArgumentException("unknown pair " + pair);
        }
    }

    private static Histogram histogram() {
        return new Histogram(1, TimeUnit.SECONDS.toNanos(10), 3);
    }

    private Row jcommClient(String pair, String op, int port, boolean probe) {
        try (TcpStore store = TcpStore.connect(TcpStoreConfig.builder().port(port).dialect(TcpStoreDialect.TORCH_1_13)
                .probe(probe).timeout(Duration.ofSeconds(60)).build())) {
            String key = "bench/jcomm/" + port;
            byte[] value = new byte[valueBytes];
            Arrays.fill(value, (byte) 'v');
            Runnable body;
            if (op.equals("get")) {
                store.set(key, value);
                if (!Arrays.equals(store.get(key), value)) {
                    throw new IllegalStateException("get returned a different value");
                }
                body = () -> store.get(key);
            } else if (op.equals("add")) {
                body = () -> store.add(key, 1);
            } else {
                throw new IllegalArgumentException("unknown op " + op);
            }
            for (int i = 0; i < warmup; i++) {
                body.run();
            }
            Histogram h = histogram();
            long t0 = System.nanoTime();
            for (int i = 0; i < iterations; i++) {
                long s = System.nanoTime();
                body.run();
                h.recordValue(System.nanoTime() - s);
            }
            long elapsed = System.nanoTime() - t0;
            if (op.equals("add") && store.add(key, 0) != warmup + iterations) {
                throw new IllegalStateException("add lost updates");
            }
            return new Row(pair, op, h, elapsed, iterations);
        }
    }

    private Row torchClient(String pair, String op, int port, boolean master, Path py) throws Exception {
        Path lat = Files.createTempFile("jcomm-store-bench", ".lat");
        try {
            List<String> cmd = new ArrayList<>(List.of(python, py.toString(), "client", "--port", Integer.toString(port),
                    "--op", op, "--iters", Integer.toString(iterations), "--warmup", Integer.toString(warmup),
                    "--value-bytes", Integer.toString(valueBytes), "--out", lat.toString()));
            if (master) {
                cmd.add("--master");
            }
            Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
            p.getOutputStream().close();
            String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            if (!p.waitFor(10, TimeUnit.MINUTES)) {
                p.destroyForcibly();
                throw new IllegalStateException("python client timed out");
            }
            if (p.exitValue() != 0) {
                throw new IllegalStateException("python client failed (" + p.exitValue() + "): " + output.trim());
            }
            long elapsed = -1;
            for (String line : output.split("\n")) {
                if (line.startsWith("DONE ")) {
                    elapsed = Long.parseLong(line.replaceAll(".*elapsed_ns=(\\d+).*", "$1").trim());
                }
            }
            ByteBuffer b = ByteBuffer.wrap(Files.readAllBytes(lat)).order(ByteOrder.LITTLE_ENDIAN);
            Histogram h = histogram();
            int n = 0;
            while (b.remaining() >= 8) {
                h.recordValue(Math.max(1, b.getLong()));
                n++;
            }
            return new Row(pair, op, h, elapsed, n);
        } finally {
            Files.deleteIfExists(lat);
        }
    }

    private Row jcommAgainstTorch(String pair, String op, Path py) throws Exception {
        int port = freePort();
        Process p = new ProcessBuilder(python, py.toString(), "serve", "--port", Integer.toString(port))
                .redirectErrorStream(true).start();
        OutputStream stdin = p.getOutputStream(); // the server runs until its standard input closes
        try {
            BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8));
            String line = r.readLine();
            if (line == null || !line.startsWith("READY")) {
                throw new IllegalStateException("torch server did not start: " + line);
            }
            return jcommClient(pair, op, port, true);
        } finally {
            stdin.close();
            if (!p.waitFor(10, TimeUnit.SECONDS)) {
                p.destroyForcibly();
            }
        }
    }

    /** Raw blocking-socket ping-pong with the size of a get reply: the floor of any store round trip. */
    private Row tcpEcho(String op) throws Exception {
        int size = op.equals("get") ? 9 + valueBytes : 8;
        try (ServerSocket ss = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            Thread echo = new Thread(() -> {
                try (Socket s = ss.accept()) {
                    s.setTcpNoDelay(true);
                    InputStream in = s.getInputStream();
                    OutputStream o = s.getOutputStream();
                    byte[] buf = new byte[size];
                    while (true) {
                        int off = 0;
                        while (off < size) {
                            int k = in.read(buf, off, size - off);
                            if (k < 0) {
                                return;
                            }
                            off += k;
                        }
                        o.write(buf);
                    }
                } catch (IOException ignored) {
                    // benchmark over
                }
            }, "tcp-echo");
            echo.setDaemon(true);
            echo.start();
            try (Socket c = new Socket(InetAddress.getLoopbackAddress(), ss.getLocalPort())) {
                c.setTcpNoDelay(true);
                InputStream in = c.getInputStream();
                OutputStream o = c.getOutputStream();
                byte[] buf = new byte[size];
                Histogram h = histogram();
                long t0 = 0;
                for (int i = 0; i < warmup + iterations; i++) {
                    if (i == warmup) {
                        t0 = System.nanoTime();
                    }
                    long s = System.nanoTime();
                    o.write(buf);
                    int off = 0;
                    while (off < size) {
                        off += in.read(buf, off, size - off);
                    }
                    if (i >= warmup) {
                        h.recordValue(System.nanoTime() - s);
                    }
                }
                return new Row("tcp-echo", op, h, System.nanoTime() - t0, iterations);
            }
        }
    }

    private static int freePort() throws IOException {
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            return s.getLocalPort();
        }
    }

    /** scripts/store_bench.py of the checkout this jar was built in (bench/target/x.jar, dist/target/lib/x.jar), else ./scripts. */
    static Path defaultScript() {
        try {
            Path jar = Path.of(StoreBenchCommand.class.getProtectionDomain().getCodeSource().getLocation().toURI());
            for (Path dir = jar.getParent(); dir != null; dir = dir.getParent()) {
                Path candidate = dir.resolve("scripts").resolve("store_bench.py");
                if (Files.isRegularFile(candidate)) {
                    return candidate;
                }
            }
        } catch (URISyntaxException | RuntimeException ignored) {
            // fall back to the working directory
        }
        return Path.of("scripts", "store_bench.py");
    }
}
