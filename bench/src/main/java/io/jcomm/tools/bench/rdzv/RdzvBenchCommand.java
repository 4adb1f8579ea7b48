package io.jcomm.tools.bench.rdzv;

import java.io.IOException;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.ThreadLocalRandom;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code commbench rdzv}: a rendezvous load generator. N simulated torch 1.13 TCPStore clients in this
 * process (non-blocking sockets, one or a few selector threads, a state machine and a preallocated
 * buffer per client) do torchrun's pattern against a store server started in its own process, commstore
 * or torch's own TCPStore server, or both one after the other: connect (two connections per client, as
 * a torch 1.13 client), set its key, add to a counter, wait for the last client's key, read eight peers'
 * keys, close. Prints a table: total time, connections accepted per second, p50/p99 per operation, the
 * fan-out time (the last client's set to the last waiter woken), the server's CPU seconds and resident
 * memory, failures. Connections are spread over several loopback source addresses (127.x.y.2, ...) so
 * that more than one address's ephemeral ports are available; the limits that bound the run are printed
 * first, and a descriptor limit below what the run needs stops it with a message saying what to raise.
 */
@Command(name = "rdzv", mixinStandardHelpOptions = true,
        description = "Rendezvous load: N simulated torch 1.13 store clients (set, add, wait, multi-get) against "
                + "commstore and/or torch's TCPStore server, each in its own process.")
public final class RdzvBenchCommand implements Callable<Integer> {

    /** Which servers to measure. */
    public enum Servers {
        JCOMM, TORCH, BOTH
    }

    @Option(names = "--clients", split = ",", defaultValue = "1000",
            description = "simulated clients, comma-separated sizes (default ${DEFAULT-VALUE})")
    List<Integer> clients;

    @Option(names = "--arrival", defaultValue = "burst", converter = ArrivalConverter.class,
            description = "burst (all at once), stagger (spread over --window-ms) or backoff (all at once, failed "
                    + "connects retried after a jittered doubling delay) (default ${DEFAULT-VALUE})")
    RdzvLoad.Arrival arrival;

    @Option(names = "--window-ms", defaultValue = "1000", description = "stagger window (default ${DEFAULT-VALUE})")
    long windowMs;

    @Option(names = "--server", defaultValue = "jcomm", converter = ServersConverter.class,
            description = "jcomm, torch or both (default ${DEFAULT-VALUE}); each size gets a fresh server process")
    Servers server;

    @Option(names = "--connect", paramLabel = "HOST:PORT",
            description = "use a server that is already running instead (no server CPU or memory figures)")
    String connect;

    @Option(names = "--connections-per-client", defaultValue = "2",
            description = "2 as a torch 1.13 client (the second connection silent), or 1 (default ${DEFAULT-VALUE})")
    int connectionsPerClient;

    @Option(names = "--peers", defaultValue = "8", description = "peer keys each client reads (default ${DEFAULT-VALUE})")
    int peers;

    @Option(names = "--threads", defaultValue = "1", description = "selector threads (default ${DEFAULT-VALUE})")
    int threads;

    @Option(names = "--rounds", defaultValue = "1",
            description = "measured rounds per size against the same server (memory under churn) (default ${DEFAULT-VALUE})")
    int rounds;

    @Option(names = "--warmup-clients", defaultValue = "1000",
            description = "an unmeasured round of this many clients first, 0 for none (default ${DEFAULT-VALUE})")
    int warmupClients;

    @Option(names = "--sources", defaultValue = "0",
            description = "loopback source addresses to spread connections over, 0 = enough for the ephemeral "
                    + "port range (default ${DEFAULT-VALUE})")
    int sources;

    @Option(names = "--value-bytes", defaultValue = "24", description = "bytes of each client's value (default ${DEFAULT-VALUE})")
    int valueBytes;

    @Option(names = "--timeout-s", defaultValue = "120", description = "deadline of one round (default ${DEFAULT-VALUE})")
    long timeoutSeconds;

    @Option(names = "--script", description = "path of torch_store_crowd.py (default: scripts/ of the jcomm checkout)")
    Path script;

    /** One measured round. */
    record Row(int clients, String server, int round, RdzvLoad.Result result, double serverCpuSeconds, long rssKiB,
               long peakKiB) {
    }

    @Override
    public Integer call() throws Exception {
        PrintStream out = System.out;
        if (clients.isEmpty() || clients.stream().anyMatch(n -> n < 1 || n > 1_000_000)) {
            System.err.println("commbench rdzv: --clients must be 1..1000000");
            return 2;
        }
        int largest = clients.stream().mapToInt(Integer::intValue).max().orElse(1);
        long needed = (long) largest * connectionsPerClient + 256;
        long[] nofile = Limits.openFiles();
        out.printf(Locale.ROOT, "limits: open files %s (this process, soft hard; needs %d for %d clients x %d "
                        + "connections), net.core.somaxconn %s, net.ipv4.tcp_max_syn_backlog %s, "
                        + "net.ipv4.ip_local_port_range %s%n",
                nofile[0] == Long.MAX_VALUE ? "unlimited" : nofile[0] + " " + (nofile[1] == Long.MAX_VALUE
                        ? "unlimited" : nofile[1]), needed, largest, connectionsPerClient,
                Limits.sysctl("net/core/somaxconn"), Limits.sysctl("net/ipv4/tcp_max_syn_backlog"),
                Limits.sysctl("net/ipv4/ip_local_port_range"));
        if (nofile[0] >= 0 && nofile[0] < needed) {
            System.err.printf(Locale.ROOT, "commbench rdzv: %d clients need %d descriptors in this process; the "
                    + "limit is %d (hard %d): raise it before starting (ulimit -Hn %d; ulimit -Sn %d; the hard limit needs "
                    + "root with CAP_SYS_RESOURCE), or run fewer clients or --connections-per-client 1%n", largest,
                    needed, nofile[0], nofile[1], needed, needed);
            return 2;
        }
        Path py = script != null ? script : Path.of("scripts", "torch_store_crowd.py");
        List<Row> rows = new ArrayList<>();
        boolean ok = true;
        for (int n : clients) {
            if (connect != null) {
                ok &= runAgainst(null, parse(connect), n, rows);
                continue;
            }
            for (ServerProcess.Kind kind : kinds()) {
                try (ServerProcess s = ServerProcess.start(kind, n, needed, py, 60_000)) {
                    out.printf(Locale.ROOT, "%s server: pid %d, port %d, open files %s%n", name(kind), s.pid(), s.port,
                            s.descriptorLimit());
                    ok &= runAgainst(s, new InetSocketAddress(InetAddress.getLoopbackAddress(), s.port), n, rows);
                }
            }
        }
        printTable(out, rows);
        return ok ? 0 : 1;
    }

    private List<ServerProcess.Kind> kinds() {
        return switch (server) {
            case JCOMM -> List.of(ServerProcess.Kind.JCOMM);
            case TORCH -> List.of(ServerProcess.Kind.TORCH);
            case BOTH -> List.of(ServerProcess.Kind.JCOMM, ServerProcess.Kind.TORCH);
        };
    }

    private static String name(ServerProcess.Kind k) {
        return k == null ? "external" : k.name().toLowerCase(Locale.ROOT);
    }

    private boolean runAgainst(ServerProcess s, InetSocketAddress address, int n, List<Row> rows) throws Exception {
        String tag = Long.toString(ThreadLocalRandom.current().nextLong(1L << 40), 36);
        if (warmupClients > 0) {
            RdzvLoad.Result w = new RdzvLoad(config(address, Math.min(warmupClients, Math.max(n, 2)), "w" + tag)).run();
            System.out.printf(Locale.ROOT, "  warm-up: %d clients, %.3f s, %d failures%n", w.clients(),
                    w.totalNanos() / 1e9, w.failures());
        }
        boolean ok = true;
        for (int r = 1; r <= rounds; r++) {
            double cpu0 = s == null ? 0 : s.cpuSeconds();
            RdzvLoad.Result res = new RdzvLoad(config(address, n, "r" + r + tag)).run();
            double cpu = s == null ? -1 : s.cpuSeconds() - cpu0;
            long[] mem = s == null ? new long[] {-1, -1} : s.residentKiB();
            Row row = new Row(n, s == null ? "external" : name(s.kind), r, res, cpu, mem[0], mem[1]);
            rows.add(row);
            System.out.println("  " + line(row));
            for (String m : res.failureMessages()) {
                System.out.println("    failure: " + m);
            }
            ok &= res.failures() == 0;
        }
        return ok;
    }

    private RdzvLoad.Config config(InetSocketAddress address, int n, String prefix) {
        return new RdzvLoad.Config(address, n, arrival, connectionsPerClient, peers,
                sourceAddresses(address, n * connectionsPerClient), threads, Duration.ofSeconds(timeoutSeconds),
                Duration.ofMillis(windowMs), prefix, valueBytes);
    }

    /**
     * Loopback source addresses for {@code connections}: enough that each takes at most three quarters of
     * the ephemeral port range, on a random 127.x.y.0/24 per round (so that a round does not meet the ports
     * an earlier round left in TIME_WAIT). None when the server is not on loopback.
     */
    private List<InetAddress> sourceAddresses(InetSocketAddress server, int connections) {
        if (!server.getAddress().isLoopbackAddress() || !(server.getAddress() instanceof java.net.Inet4Address)) {
            return List.of();
        }
        int perSource = Math.max(1, Limits.ephemeralPorts() * 3 / 4);
        int k = sources > 0 ? sources : Math.max(1, (connections + perSource - 1) / perSource);
        k = Math.min(k, 250);
        ThreadLocalRandom rnd = ThreadLocalRandom.current();
        int x = 16 + rnd.nextInt(230);
        int y = rnd.nextInt(256);
        List<InetAddress> list = new ArrayList<>(k);
        for (int i = 0; i < k; i++) {
            try {
                list.add(InetAddress.getByAddress(new byte[] {127, (byte) x, (byte) y, (byte) (2 + i)}));
            } catch (IOException e) {
                throw new IllegalStateException(e);
            }
        }
        return list;
    }

    private static InetSocketAddress parse(String hostPort) {
        int c = hostPort.lastIndexOf(':');
        if (c <= 0) {
            throw new IllegalArgumentException("--connect wants HOST:PORT: " + hostPort);
        }
        return new InetSocketAddress(hostPort.substring(0, c), Integer.parseInt(hostPort.substring(c + 1)));
    }

    private static String line(Row r) {
        RdzvLoad.Result x = r.result();
        return String.format(Locale.ROOT, "%s n=%d round=%d: %.3f s, %.0f accepts/s, fan-out %s ms, server cpu %s s, "
                        + "rss %s MiB, failures %d", r.server(), r.clients(), r.round(), x.totalNanos() / 1e9,
                x.acceptsPerSecond(), x.fanoutNanos() < 0 ? "-" : String.format(Locale.ROOT, "%.1f", x.fanoutNanos() / 1e6),
                r.serverCpuSeconds() < 0 ? "-" : String.format(Locale.ROOT, "%.2f", r.serverCpuSeconds()),
                mib(r.rssKiB()), x.failures());
    }

    private static String mib(long kib) {
        return kib < 0 ? "-" : String.format(Locale.ROOT, "%.0f", kib / 1024.0);
    }

    private static String ms(long micros) {
        return micros < 0 ? "-" : micros < 10_000 ? String.format(Locale.ROOT, "%.2f", micros / 1000.0)
                : String.format(Locale.ROOT, "%.0f", micros / 1000.0);
    }

    static void printTable(PrintStream out, List<Row> rows) {
        out.println();
        out.println("| N | server | round | total s | accepts/s | connect p50/p99 ms | set p50/p99 ms | add p50/p99 ms "
                + "| wait p50/p99 ms | get p50/p99 ms | fan-out ms | server CPU s | RSS MiB (peak) | failures |");
        out.println("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (Row r : rows) {
            RdzvLoad.Result x = r.result();
            StringBuilder sb = new StringBuilder();
            sb.append(String.format(Locale.ROOT, "| %,d | %s | %d | %.3f | %,.0f |", r.clients(), r.server(), r.round(),
                    x.totalNanos() / 1e9, x.acceptsPerSecond()));
            for (int op = 0; op < RdzvLoad.OP_NAMES.size(); op++) {
                sb.append(' ').append(ms(x.p50Micros()[op])).append(" / ").append(ms(x.p99Micros()[op])).append(" |");
            }
            sb.append(String.format(Locale.ROOT, " %s | %s | %s (%s) | %d |",
                    x.fanoutNanos() < 0 ? "-" : String.format(Locale.ROOT, "%.1f", x.fanoutNanos() / 1e6),
                    r.serverCpuSeconds() < 0 ? "-" : String.format(Locale.ROOT, "%.2f", r.serverCpuSeconds()),
                    mib(r.rssKiB()), mib(r.peakKiB()), x.failures()));
            out.println(sb);
        }
        // side by side: the jcomm/torch ratio of total time for each size both completed without failures
        for (Row j : rows) {
            if (!j.server().equals("jcomm") || j.result().failures() > 0) {
                continue;
            }
            for (Row t : rows) {
                if (t.server().equals("torch") && t.clients() == j.clients() && t.round() == j.round()
                        && t.result().failures() == 0) {
                    out.printf(Locale.ROOT, "N=%,d round %d: jcomm %.3f s, torch %.3f s: %.1fx%n", j.clients(), j.round(),
                            j.result().totalNanos() / 1e9, t.result().totalNanos() / 1e9,
                            (double) t.result().totalNanos() / j.result().totalNanos());
                }
            }
        }
    }

    /** Case-insensitive arrival names. */
    public static final class ArrivalConverter implements picocli.CommandLine.ITypeConverter<RdzvLoad.Arrival> {
        @Override
        public RdzvLoad.Arrival convert(String value) {
            return RdzvLoad.Arrival.valueOf(value.toUpperCase(Locale.ROOT));
        }
    }

    /** Case-insensitive server names. */
    public static final class ServersConverter implements picocli.CommandLine.ITypeConverter<Servers> {
        @Override
        public Servers convert(String value) {
            return Servers.valueOf(value.toUpperCase(Locale.ROOT));
        }
    }
}
