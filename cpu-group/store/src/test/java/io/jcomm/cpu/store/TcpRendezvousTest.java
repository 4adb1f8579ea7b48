package io.jcomm.cpu.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.StoreException;
import io.jcomm.testkit.FreePorts;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** torchrun-style rendezvous with ranks as threads (the multi-process version is in integration-tests). */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpRendezvousTest {

    private static DistributedConfig config(int port, int rank, int world, Path token) {
        return DistributedConfig.builder().masterPort(port).rank(rank).worldSize(world)
                .timeout(Duration.ofSeconds(20)).tokenFile(token).build();
    }

    private static void runRanks(int world, int port, Path token, TcpRendezvous.Options opts) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(world);
        try {
            List<Future<String>> fs = new ArrayList<>();
            for (int r = world - 1; r >= 0; r--) { // non-zero ranks first: they must wait for the server
                int rank = r;
                fs.add(pool.submit(() -> {
                    try (TcpStore s = TcpRendezvous.connect(config(port, rank, world, token), opts)) {
                        s.set("addr/" + rank, ("host-" + rank).getBytes(UTF_8));
                        StringBuilder sb = new StringBuilder();
                        for (int p = 0; p < world; p++) {
                            sb.append(new String(s.get("addr/" + p), UTF_8)).append(',');
                        }
                        s.add("done", 1);
                        if (rank == 0) { // the host keeps the server up until everyone is done
                            s.wait(List.of("bye/1", "bye/2"));
                        } else {
                            s.wait(List.of("done"));
                            while (s.add("done", 0) < world) {
                                Thread.sleep(2);
                            }
                            s.set("bye/" + rank, new byte[0]);
                        }
                        return sb.toString();
                    }
                }));
            }
            for (Future<String> f : fs) {
                assertEquals("host-0,host-1,host-2,", f.get(30, TimeUnit.SECONDS));
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void rankZeroHostsAndEveryoneConnectsWithWorkerCounting() throws Exception {
        runRanks(3, FreePorts.find(), null, TcpRendezvous.Options.builder().waitForWorkers(true).build());
    }

    @Test
    void withATokenFileFromTheConfig(@TempDir Path dir) throws Exception {
        Path token = dir.resolve("job.token");
        Files.writeString(token, JobToken.generate());
        int port = FreePorts.find();
        runRanks(3, port, token, TcpRendezvous.Options.builder().dialect(TcpStoreDialect.TORCH_2_5).build());
    }

    @Test
    void workerCountingTimesOutNamingTheCount() {
        int port = FreePorts.find();
        DistributedConfig c = DistributedConfig.builder().masterPort(port).rank(0).worldSize(2)
                .timeout(Duration.ofMillis(300)).build();
        CommTimeoutException e = assertThrows(CommTimeoutException.class,
                () -> TcpRendezvous.connect(c, TcpRendezvous.Options.builder().waitForWorkers(true).build()));
        assertTrue(e.getMessage().contains("1 of 2"), e.getMessage());
        // the hosted server was closed with the failed store: the port is free again
        try (TcpStoreServer s = TcpStoreServer.start(TcpStoreServerConfig.builder().port(port).build())) {
            assertEquals(port, s.port());
        }
    }

    @Test
    void hostingCanBeMovedOffRankZero() throws Exception {
        int port = FreePorts.find();
        DistributedConfig r1 = config(port, 1, 2, null);
        try (TcpStore host = TcpRendezvous.connect(r1, TcpRendezvous.Options.builder().hostServer(true).build())) {
            DistributedConfig r0 = DistributedConfig.builder().masterPort(port).rank(0).worldSize(2)
                    .timeout(Duration.ofSeconds(5)).build();
            try (TcpStore c = TcpRendezvous.connect(r0, TcpRendezvous.Options.builder().hostServer(false).build())) {
                c.set("x", new byte[] {7});
                assertArrayEquals(new byte[] {7}, host.get("x"));
            }
        }
        assertThrows(StoreException.class, () -> TcpRendezvous.connect(DistributedConfig.builder().masterPort(port)
                .rank(0).worldSize(1).timeout(Duration.ofMillis(200)).build(),
                TcpRendezvous.Options.builder().hostServer(false).build()));
    }

    @Test
    void everyRankDeclaresItselfAMemberOfTheConfiguredJob() throws Exception {
        try (TcpStoreServer launcher = TcpStoreServer.start(TcpStoreServerConfig.builder().build())) {
            DistributedConfig r1 = DistributedConfig.builder().masterPort(launcher.port()).rank(1).worldSize(2)
                    .timeout(Duration.ofSeconds(5)).launcherStore(true).jobId("train-7").build();
            try (TcpStore s = TcpRendezvous.connect(r1)) {
                assertTrue(s.isDeclaredMember());
                assertEquals(new TcpStoreConfig.Member("train-7", 1), s.config().member().orElseThrow());
                try (TcpStore lane = TcpStore.connect(s.config())) { // a helper thread's clone, as ParallelState makes
                    assertTrue(lane.isDeclaredMember());
                }
            }
            try (TcpStore s = TcpRendezvous.connect(r1, TcpRendezvous.Options.builder().declareMember(false).build())) {
                assertTrue(s.config().member().isEmpty());
                assertTrue(!s.isDeclaredMember());
            }
            assertEquals(0, launcher.stats().memberDeaths(), launcher.stats().toString());
        }
    }

    @Test
    void noRankHostsWhenTheLauncherDoes() throws Exception {
        try (TcpStoreServer launcher = TcpStoreServer.start(TcpStoreServerConfig.builder().host("127.0.0.1").port(0).build())) {
            DistributedConfig r0 = DistributedConfig.builder().masterPort(launcher.port()).rank(0).worldSize(2)
                    .timeout(Duration.ofSeconds(5)).launcherStore(true).build();
            // rank 0 would fail to bind the launcher's port if it tried to host
            try (TcpStore c = TcpRendezvous.connect(r0)) {
                c.set("k", new byte[] {3});
                assertArrayEquals(new byte[] {3}, c.get("k"));
                assertTrue(launcher.stats().connectionsOpened() >= 1);
            }
        }
    }
}
