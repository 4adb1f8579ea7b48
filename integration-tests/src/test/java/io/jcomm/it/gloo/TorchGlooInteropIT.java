package io.jcomm.it.gloo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;

import io.jcomm.api.Availability;
import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.gloo.GlooBackend;
import io.jcomm.cpu.gloo.TorchGlooGroup;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.testkit.FreePorts;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Java ranks on the gloo backend and a PyTorch 1.13 rank ({@code init_process_group("gloo",
 * init_method="env://")}) in one process group: all_reduce SUM f32, broadcast i64 from rank 0,
 * barrier, all_gather i32, send/recv with tags, all_reduce MAX i32 and SUM f16, results asserted on both sides
 * (the Python side in {@code gloo/torch_rank.py}), and the same sequence number.
 */
@Timeout(240)
class TorchGlooInteropIT {

    private static final Duration TIMEOUT = Duration.ofSeconds(60);
    private static final String SCRIPT = "/gloo/torch_rank.py";

    @BeforeAll
    static void requirements() {
        Availability a = GlooBackend.availability();
        io.jcomm.testkit.Requirements.assume("gloo", a.available(), "gloo backend " + a);
        String v = TorchProcess.torchVersion();
        io.jcomm.testkit.Requirements.assume("torch", v != null, "no torch for " + TorchProcess.PYTHON + " (apt-get install python3-torch)");
        io.jcomm.testkit.Requirements.assume("torch", v.startsWith("1.13"), "torch " + v + " is not 1.13: its bundled gloo speaks another handshake");
    }

    @Test
    void pythonRankHostsTheStore() throws Exception {
        run(2, List.of(1), 1, "lo");
    }

    @Test
    void javaRankHostsTheStoreWithTwoDevices() throws Exception {
        run(2, List.of(0), 2, "lo,lo");
    }

    @Test
    void twoJavaRanksAndOnePythonRank() throws Exception {
        run(3, List.of(0, 1), 1, "lo");
    }

    /**
     * Runs a job of {@code size} ranks: {@code javaRanks} in this JVM (one thread and one gloo
     * communicator each), the others Python processes. Rank 0 hosts the store.
     */
    private static void run(int size, List<Integer> javaRanks, int devices, String ifnames) throws Exception {
        for (int attempt = 1; ; attempt++) {
            int port = FreePorts.find();
            try {
                run(size, javaRanks, devices, ifnames, port);
                return;
            } catch (PortTaken e) {
                if (attempt >= 3) {
                    throw e;
                }
                System.out.println(e.getMessage() + " (attempt " + attempt + "): another port");
            }
        }
    }

    /**
     * torch's store binds every address: a port another socket took after FreePorts looked at it fails the
     * Python rank 0 with "Address already in use"; that is the test's luck, not a result.
     */
    private static final class PortTaken extends Exception {
        private static final long serialVersionUID = 1L;

        PortTaken(int port, Throwable cause) {
            super("torch rank 0 could not bind port " + port, cause);
        }
    }

    private static void run(int size, List<Integer> javaRanks, int devices, String ifnames, int port) throws Exception {
        List<TorchProcess> pythons = new ArrayList<>();
        ExecutorService pool = Executors.newFixedThreadPool(javaRanks.size());
        try {
            for (int r = 0; r < size; r++) {
                if (!javaRanks.contains(r)) {
                    pythons.add(TorchProcess.start("torch rank " + r, TorchProcess.script(SCRIPT), Map.of(
                            "RANK", Integer.toString(r), "WORLD_SIZE", Integer.toString(size),
                            "MASTER_ADDR", "127.0.0.1", "MASTER_PORT", Integer.toString(port),
                            "GLOO_SOCKET_IFNAME", ifnames)));
                }
            }
            List<Future<Long>> javas = new ArrayList<>();
            for (int r : javaRanks) {
                javas.add(pool.submit(() -> javaRank(r, size, port, devices)));
            }
            List<Long> seqs = new ArrayList<>();
            for (Future<Long> f : javas) {
                seqs.add(f.get(180, TimeUnit.SECONDS));
            }
            for (TorchProcess p : pythons) {
                int code = p.await(60, TimeUnit.SECONDS);
                assertEquals(0, code, "python rank failed:\n" + String.join("\n", p.output()));
                String ok = p.line("TORCH_OK seq=");
                assertNotNull(ok, "python rank did not finish:\n" + String.join("\n", p.output()));
                seqs.add(Long.parseLong(ok.substring("TORCH_OK seq=".length()).trim()));
            }
            for (long s : seqs) {
                assertEquals(seqs.get(0), s, "every rank has rank 0's sequence number: " + seqs);
            }
        } catch (Exception | AssertionError e) {
            if (pythons.stream().anyMatch(p -> p.output().stream().anyMatch(l -> l.contains("failed to bind")
                    && l.contains("Address already in use")))) {
                throw new PortTaken(port, e);
            }
            throw e;
        } finally {
            pool.shutdownNow();
            for (TorchProcess p : pythons) {
                p.close();
            }
        }
    }

    /** One Java rank: the same sequence as torch_rank.py. Returns the group's sequence number. */
    private static long javaRank(int rank, int size, int port, int devices) {
        DistributedConfig config = DistributedConfig.builder().masterAddr("127.0.0.1").masterPort(port)
                .rank(rank).worldSize(size).timeout(TIMEOUT).build();
        TcpRendezvous.Options how = TcpRendezvous.Options.builder().hostServer(rank == 0).waitForWorkers(true).build();
        try (TcpStore store = TcpRendezvous.connect(config, how);
             TorchGlooGroup group = TorchGlooGroup.joinDefaultGroup(store, rank, size, TIMEOUT,
                     Map.of(GlooBackend.IFNAME_OPTION, "lo", GlooBackend.DEVICES_OPTION, Integer.toString(devices)))) {
            ProcessGroup g = group.group();
            assertEquals("gloo", g.backendName());

            // 1. all_reduce SUM f32
            Tensor t = Tensor.ofFloats(rank + 1f, 2f * (rank + 1), 0.5f);
            g.allReduce(t, ReduceOp.SUM, d());
            double s1 = 0;
            double s2 = 0;
            for (int r = 0; r < size; r++) {
                s1 += r + 1;
                s2 += 2.0 * (r + 1);
            }
            assertArrayEquals(new double[] {s1, s2, 0.5 * size}, t.toDoubleArray(), "all_reduce sum f32");

            // 2. broadcast i64 from rank 0
            Tensor b = rank == 0 ? Tensor.ofLongs(10, -20, 1L << 40) : Tensor.allocate(DType.I64, 3);
            g.broadcast(b, 0, d());
            assertArrayEquals(new long[] {10, -20, 1L << 40}, b.toLongArray(), "broadcast i64");

            // 3. barrier
            g.barrier(d());

            // 4. all_gather i32
            Tensor mine = Tensor.ofInts(rank * 10, rank * 10 + 1, rank * 10 + 2);
            Tensor all = Tensor.allocate(DType.I32, 3L * size);
            g.allGather(all, mine, d());
            long[] want = new long[3 * size];
            for (int r = 0; r < size; r++) {
                for (int i = 0; i < 3; i++) {
                    want[3 * r + i] = r * 10L + i;
                }
            }
            assertArrayEquals(want, all.toLongArray(), "all_gather i32");

            // 5. send/recv with tags between rank 0 and the last rank
            if (rank == 0) {
                g.send(Tensor.ofDoubles(1.5, 2.5, -3.25), size - 1, 7, d());
                Tensor back = Tensor.allocate(DType.F64, 3);
                g.recv(back, size - 1, 8, d());
                assertArrayEquals(new double[] {3.0, 5.0, -6.5}, back.toDoubleArray(), "recv f64 tag 8");
            } else if (rank == size - 1) {
                Tensor got = Tensor.allocate(DType.F64, 3);
                g.recv(got, 0, 7, d());
                assertArrayEquals(new double[] {1.5, 2.5, -3.25}, got.toDoubleArray(), "recv f64 tag 7");
                g.send(Tensor.ofDoubles(3.0, 5.0, -6.5), 0, 8, d());
            }

            // 6. all_reduce MAX i32
            Tensor m = Tensor.ofInts(rank * 3, -rank, 7);
            g.allReduce(m, ReduceOp.MAX, d());
            assertArrayEquals(new long[] {(size - 1) * 3L, 0, 7}, m.toLongArray(), "all_reduce max i32");

            // 7. all_reduce SUM f16: half precision on the wire, like torch
            Tensor h = Tensor.allocate(DType.F16, 3);
            h.setDouble(0, rank + 0.5);
            h.setDouble(1, 100.0 + rank); // every partial sum is exact in half precision
            h.setDouble(2, -0.25);
            g.allReduce(h, ReduceOp.SUM, d());
            double h0 = 0;
            double h1 = 0;
            for (int r = 0; r < size; r++) {
                h0 += r + 0.5;
                h1 += 100.0 + r;
            }
            assertArrayEquals(new double[] {h0, h1, -0.25 * size}, h.toDoubleArray(), "all_reduce sum f16");

            g.barrier(d());
            System.out.println("java rank " + rank + " ok, seq=" + group.sequenceNumber());
            return group.sequenceNumber();
        }
    }

    private static Duration d() {
        return TIMEOUT;
    }
}
