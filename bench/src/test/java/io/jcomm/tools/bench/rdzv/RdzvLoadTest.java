package io.jcomm.tools.bench.rdzv;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import io.jcomm.tools.bench.CommBench;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

class RdzvLoadTest {

    private static RdzvLoad.Config config(InetSocketAddress server, int n, RdzvLoad.Arrival arrival, int cpc, int threads,
                                          List<InetAddress> sources, Duration timeout) {
        return new RdzvLoad.Config(server, n, arrival, cpc, 8, sources, threads, timeout, Duration.ofMillis(200),
                "t" + n + "-" + arrival.ordinal() + cpc + threads, 24);
    }

    @ParameterizedTest
    @EnumSource(RdzvLoad.Arrival.class)
    @Timeout(value = 60, unit = TimeUnit.SECONDS)
    void everyClientRendezvousesAgainstTheStoreServer(RdzvLoad.Arrival arrival) throws Exception {
        int n = 300;
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().port(0).build())) {
            List<InetAddress> sources = List.of(InetAddress.getByName("127.0.0.2"), InetAddress.getByName("127.0.0.3"));
            RdzvLoad.Result r = new RdzvLoad(config(server.address(), n, arrival, 2, 2, sources,
                    Duration.ofSeconds(30))).run();
            assertEquals(0, r.failures(), () -> "failures: " + r.failureMessages());
            assertEquals(n, r.completed());
            assertEquals(2 * n, r.connections());
            assertTrue(r.fanoutNanos() >= 0, "fan-out measured");
            assertTrue(r.acceptsPerSecond() > 0);
            for (int op = 0; op < RdzvLoad.OP_NAMES.size(); op++) {
                assertTrue(r.p50Micros()[op] >= 0 && r.p99Micros()[op] >= r.p50Micros()[op], RdzvLoad.OP_NAMES.get(op));
            }
            TcpStoreServer.Stats s = server.stats();
            assertEquals(n + 2, s.keys(), "one key per client, the counter and the release key");
            assertEquals(0, s.pendingWaits());
            assertEquals(0, s.connectionsFaulted());
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void oneConnectionPerClientAndOneClient() throws Exception {
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().port(0).build())) {
            RdzvLoad.Result one = new RdzvLoad(config(server.address(), 1, RdzvLoad.Arrival.BURST, 1, 1, List.of(),
                    Duration.ofSeconds(10))).run();
            assertEquals(1, one.completed(), () -> one.failureMessages().toString());
            RdzvLoad.Result r = new RdzvLoad(config(server.address(), 200, RdzvLoad.Arrival.BURST, 1, 1, List.of(),
                    Duration.ofSeconds(20))).run();
            assertEquals(200, r.completed(), () -> r.failureMessages().toString());
            assertEquals(200, r.connections());
        }
    }

    @Test
    @Timeout(value = 30, unit = TimeUnit.SECONDS)
    void refusedConnectsAreFailuresAndBackoffGivesUpAtTheDeadline() throws Exception {
        InetSocketAddress nobody;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            nobody = new InetSocketAddress(InetAddress.getLoopbackAddress(), s.getLocalPort());
        }
        RdzvLoad.Result burst = new RdzvLoad(config(nobody, 50, RdzvLoad.Arrival.BURST, 2, 1, List.of(),
                Duration.ofSeconds(10))).run();
        assertEquals(50, burst.failures());
        assertEquals(0, burst.completed());
        assertTrue(burst.failureMessages().get(0).contains("connect"), burst.failureMessages().toString());
        long t0 = System.nanoTime();
        RdzvLoad.Result backoff = new RdzvLoad(config(nobody, 50, RdzvLoad.Arrival.BACKOFF, 2, 1, List.of(),
                Duration.ofSeconds(2))).run();
        assertEquals(50, backoff.failures());
        assertTrue(backoff.failureMessages().get(0).contains("timeout"), backoff.failureMessages().toString());
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(5), "bounded by the deadline");
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void commbenchRdzvStartsItsServerAndPrintsTheTable() {
        ByteArrayOutputStream buf = new ByteArrayOutputStream();
        PrintStream old = System.out;
        int code;
        try (PrintStream p = new PrintStream(buf, true, StandardCharsets.UTF_8)) {
            System.setOut(p);
            code = CommBench.commandLine().execute("rdzv", "--clients", "200", "--warmup-clients", "50",
                    "--timeout-s", "60");
        } finally {
            System.setOut(old);
        }
        String out = buf.toString(StandardCharsets.UTF_8);
        assertEquals(0, code, out);
        assertTrue(out.contains("limits: open files"), out);
        assertTrue(out.matches("(?s).*\\| 200 \\| jcomm \\| 1 \\| [0-9.]+ \\|.*\\| 0 \\|\\R.*"), out);
    }
}
