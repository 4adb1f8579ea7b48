package io.jcomm.cpu.internal.tcp;

import io.jcomm.api.DType;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.Tensor;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import io.jcomm.cpu.TcpOptions;
import io.jcomm.cpu.internal.DefaultProcessGroup;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.testkit.CpuGroupCases;
import java.time.Duration;

/**
 * One rank of {@link CrossMemoryAllToAllTest}: all-to-all and all-to-all-v of inputs far beyond the fast
 * path's region, every value checked, in a group with cross-memory reads and in one without; prints
 * {@code CROSS <group> <parts read from peers' processes>} and {@code DONE}.
 */
public final class CrossMemoryWorker {

    private CrossMemoryWorker() {
    }

    public static void main(String[] args) throws Exception {
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        int me = cfg.rank();
        int n = cfg.worldSize();
        try (TcpStore store = TcpRendezvous.connect(cfg)) {
            for (boolean cross : new boolean[] {true, false}) {
                String name = cross ? "cross" : "rings";
                ProcessGroup g = CpuGroups.create(CpuGroupOptions.builder().backend("tcp").store(store).groupName(name)
                        .rank(me).size(n).timeout(Duration.ofSeconds(60)).codec(CpuGroupCases.codec())
                        .options(TcpOptions.builder().shmCrossMemory(cross).build()).build());
                for (int round = 0; round < 3; round++) {
                    long per = (1 << 20) + 7 * round; // ~4 MiB of f32 per peer part
                    Tensor in = Tensor.allocate(DType.F32, per * n);
                    Tensor out = Tensor.allocate(DType.F32, per * n);
                    for (int dst = 0; dst < n; dst++) {
                        for (long i = 0; i < per; i += 1021) {
                            in.setDouble(dst * per + i, value(me, dst, round, i));
                        }
                    }
                    g.allToAll(out, in);
                    for (int src = 0; src < n; src++) {
                        for (long i = 0; i < per; i += 1021) {
                            check(out.getDouble(src * per + i), value(src, me, round, i), name + " allToAll");
                        }
                    }
                    // uneven parts: rank r sends (r + dst + 1) x 100,003 elements to dst
                    long[] inCounts = new long[n];
                    long[] outCounts = new long[n];
                    for (int q = 0; q < n; q++) {
                        inCounts[q] = (me + q + 1) * 100_003L;
                        outCounts[q] = (q + me + 1) * 100_003L;
                    }
                    Tensor vin = Tensor.allocate(DType.I32, sum(inCounts));
                    Tensor vout = Tensor.allocate(DType.I32, sum(outCounts));
                    long at = 0;
                    for (int q = 0; q < n; q++) {
                        for (long i = 0; i < inCounts[q]; i++) {
                            vin.setDouble(at + i, me * 1_000_000 + q * 1000 + i % 997);
                        }
                        at += inCounts[q];
                    }
                    g.allToAllV(vout, vin, outCounts, inCounts);
                    at = 0;
                    for (int q = 0; q < n; q++) {
                        for (long i = 0; i < outCounts[q]; i += 101) {
                            check(vout.getDouble(at + i), q * 1_000_000 + me * 1000 + i % 997, name + " allToAllV");
                        }
                        at += outCounts[q];
                    }
                }
                long reads = ((TcpBackend) ((DefaultProcessGroup) g).backend()).crossReads();
                System.out.println("CROSS " + name + " " + reads);
                g.close();
            }
        }
        System.out.println("DONE");
    }

    private static double value(int src, int dst, int round, long i) {
        return src * 100_000 + dst * 1000 + round * 10 + (i % 7);
    }

    private static long sum(long[] a) {
        long s = 0;
        for (long v : a) {
            s += v;
        }
        return s;
    }

    private static void check(double got, double want, String what) {
        if (got != want) {
            throw new IllegalStateException(what + ": got " + got + ", want " + want);
        }
    }
}
