package io.jcomm.device.internal.nccl;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.ReduceOp;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.device.NcclDeviceCommunicatorProvider;
import io.jcomm.device.testkit.ConformanceRunner;
import io.jcomm.device.testkit.ThreadRanksGroup;
import java.time.Duration;
import java.util.Locale;
import java.util.Map;

/**
 * The one-GPU check run by {@code scripts/gpu-check.sh}: the real NCCL path (JavaCPP bindings,
 * libnccl, a CUDA device) at world size 1.
 *
 * <ol>
 *   <li>the probe's verdict;</li>
 *   <li>the conformance kit at world size 1, once through NCCL itself ({@code nccl.localWorldOfOne=false}:
 *       allReduce, allGather along every dim, reduceScatter, gather, broadcast, send/recv to self in a
 *       group call, with exact values) and once with the local shortcut;</li>
 *   <li>error paths: NCCL's own error string for an invalid call, typed errors, abort and bounded close;</li>
 *   <li>per-call overhead of an allReduce of 4 bytes: our communicator (tracking on and off) and the bare
 *       JavaCPP call, enqueue-only and enqueue+synchronize, in microseconds.</li>
 * </ol>
 * Exit status: 0 all passed, 1 a check failed, 2 NCCL unavailable.
 */
public final class GpuCheck {

    private GpuCheck() {
    }

    private static int failures;

    private static void result(boolean ok, String what) {
        System.out.println((ok ? "OK   " : "FAIL ") + what);
        if (!ok) {
            failures++;
        }
    }

    public static void main(String[] args) throws Exception {
        int iterations = args.length > 0 ? Integer.parseInt(args[0]) : 20_000;
        NcclProbe.Result probe = NcclProbe.system();
        System.out.println("probe: " + probe.availability());
        if (!probe.availability().available()) {
            System.exit(2);
        }
        NcclDeviceCommunicatorProvider provider = new NcclDeviceCommunicatorProvider();
        for (boolean throughNccl : new boolean[] {true, false}) {
            Map<String, String> opts = Map.of(NcclSettings.LOCAL_WORLD_OF_ONE, Boolean.toString(!throughNccl));
            String label = throughNccl ? "world size 1 through NCCL" : "world size 1, local shortcut";
            ThreadRanksGroup g = ThreadRanksGroup.create("gpu-check", 1, Duration.ofSeconds(60)).get(0);
            try (CudaMemory mem = new CudaMemory(0)) {
                DeviceCommunicator comm = provider.create(new DeviceCommunicatorContext(g, Device.cuda(0), Duration.ofSeconds(60), opts));
                Map<String, String> res = ConformanceRunner.run(comm, mem, g, System.out);
                long failed = res.values().stream().filter(v -> v != null).count();
                result(failed == 0, "conformance kit, " + label + ": " + (res.size() - failed) + "/" + res.size() + " cases");
                comm.close();
            }
        }
        errorPaths(provider, probe);
        deviceMemory(provider);
        overhead(provider, probe.api(), iterations);
        System.out.println(failures == 0 ? "gpu-check: all checks passed" : "gpu-check: " + failures + " check(s) failed");
        System.exit(failures == 0 ? 0 : 1);
    }

    /** The copies the transfer engine stages device regions with: 4 MiB up and back at an offset. */
    private static void deviceMemory(NcclDeviceCommunicatorProvider provider) {
        io.jcomm.api.device.DeviceMemory m = provider.deviceMemory().orElse(null);
        result(m != null, "deviceMemory offered");
        if (m == null) {
            return;
        }
        try (CudaMemory mem = new CudaMemory(0)) {
            Tensor dev = mem.allocate(DType.U8, 8 << 20);
            java.nio.ByteBuffer up = java.nio.ByteBuffer.allocateDirect(4 << 20);
            for (int i = 0; i < up.capacity(); i++) {
                up.put(i, (byte) (i * 13 + 5));
            }
            long t0 = System.nanoTime();
            m.copyFromHost(up.duplicate(), dev, 1 << 20);
            java.nio.ByteBuffer down = java.nio.ByteBuffer.allocateDirect(4 << 20);
            m.copyToHost(dev, 1 << 20, down.duplicate());
            long us = (System.nanoTime() - t0) / 1000;
            result(up.equals(down), "deviceMemory: 4 MiB to cuda:0 and back at offset 1 MiB, equal, " + us + " us");
        } catch (RuntimeException e) {
            result(false, "deviceMemory: " + e);
        }
    }

    private static void errorPaths(NcclDeviceCommunicatorProvider provider, NcclProbe.Result probe) {
        NcclApi api = probe.api();
        // NCCL's own error for a call our checks would have refused: a peer out of range
        api.cudaSetDevice(0);
        byte[] id = new byte[NcclConstants.UNIQUE_ID_BYTES];
        result(api.getUniqueId(id) == 0, "ncclGetUniqueId");
        NcclApi.NcclComm[] out = new NcclApi.NcclComm[1];
        result(api.commInitRank(out, 1, id, 0) == 0, "ncclCommInitRank (1 rank)");
        long[] buf = new long[1];
        api.cudaMallocAsync(buf, 4, 0);
        int r = out[0].send(buf[0], 1, NcclConstants.FLOAT32, 7, 0);
        String msg = api.getErrorString(r);
        result(r == NcclConstants.INVALID_ARGUMENT && msg.contains("invalid argument"),
                "ncclSend to peer 7 of 1 -> ncclResult " + r + ": \"" + msg + "\" last error: \"" + out[0].getLastError() + "\"");
        api.cudaFreeAsync(buf[0], 0);
        result(out[0].abort() == 0, "ncclCommAbort");

        ThreadRanksGroup g = ThreadRanksGroup.create("gpu-check-errors", 1, Duration.ofSeconds(60)).get(0);
        try {
            provider.create(new DeviceCommunicatorContext(g, Device.cuda(probe.deviceCount())));
            result(false, "create on a device that does not exist");
        } catch (io.jcomm.api.BackendException e) {
            result(true, "create on cuda:" + probe.deviceCount() + " -> " + e.detail());
        }
        DeviceCommunicator comm = provider.create(new DeviceCommunicatorContext(g, Device.cuda(0), Duration.ofSeconds(60),
                Map.of(NcclSettings.ABORT_TIMEOUT_MS, "5000")));
        try (CudaMemory mem = new CudaMemory(0)) {
            Tensor t = mem.allocate(DType.F32, 4);
            try {
                comm.send(t, 0, mem.stream());
                result(false, "send to self outside a batch is refused");
            } catch (IllegalArgumentException e) {
                result(true, "send to self outside a batch -> IllegalArgumentException: " + e.getMessage());
            }
            comm.abort();
            try {
                comm.allReduce(t, t, ReduceOp.SUM, mem.stream());
                result(false, "calls after abort fail fast");
            } catch (CommClosedException e) {
                result(true, "call after abort -> CommClosedException: " + e.detail());
            }
            long start = System.nanoTime();
            comm.close();
            result(System.nanoTime() - start < Duration.ofSeconds(6).toNanos(), "close after abort is bounded");
        }
    }

    private static void overhead(NcclDeviceCommunicatorProvider provider, NcclApi api, int n) {
        System.out.println();
        System.out.printf(Locale.ROOT, "per-call overhead, allReduce of 4 B (1 x f32), world size 1, %d calls%n", n);
        System.out.printf(Locale.ROOT, "%-44s %16s %18s%n", "path", "enqueue us/call", "call+sync us/call");
        for (boolean track : new boolean[] {true, false}) {
            ThreadRanksGroup g = ThreadRanksGroup.create("gpu-check-bench", 1, Duration.ofSeconds(60)).get(0);
            try (CudaMemory mem = new CudaMemory(0)) {
                DeviceCommunicator comm = provider.create(new DeviceCommunicatorContext(g, Device.cuda(0), Duration.ofSeconds(60),
                        Map.of(NcclSettings.LOCAL_WORLD_OF_ONE, "false", NcclSettings.TRACK_OPS, Boolean.toString(track))));
                Tensor t = mem.upload(Tensor.ofFloats(1f));
                StreamHandle s = mem.stream();
                Runnable call = () -> comm.allReduce(t, t, ReduceOp.SUM, s);
                Runnable sync = () -> comm.synchronize(s);
                double[] v = time(call, sync, n);
                String name = "jcomm NcclCommunicator (op tracking " + (track ? "on)" : "off)");
                print(name, v);
                comm.close();
            }
        }
        // the bare JavaCPP call, through JavaCppNcclApi's reusable pointers
        api.cudaSetDevice(0);
        byte[] id = new byte[NcclConstants.UNIQUE_ID_BYTES];
        api.getUniqueId(id);
        NcclApi.NcclComm[] out = new NcclApi.NcclComm[1];
        api.commInitRank(out, 1, id, 0);
        try (CudaMemory mem = new CudaMemory(0)) {
            Tensor t = mem.upload(Tensor.ofFloats(1f));
            long stream = mem.stream().handle();
            double[] v = time(() -> out[0].allReduce(t.address(), t.address(), 1, NcclConstants.FLOAT32, NcclConstants.OP_SUM, stream),
                    () -> {
                        while (api.cudaStreamQuery(stream) == NcclConstants.CUDA_ERROR_NOT_READY) {
                            Thread.onSpinWait();
                        }
                    }, n);
            print("bare JavaCPP ncclAllReduce (JavaCppNcclApi)", v);
        }
        out[0].abort();
    }

    private static void print(String name, double[] v) {
        System.out.printf(Locale.ROOT, "%-44s %16.2f %18.2f%n", name, v[0], v[1]);
    }

    /** {enqueue-only µs per call, call+sync µs per call}, after a warm-up. */
    private static double[] time(Runnable call, Runnable sync, int n) {
        for (int i = 0; i < Math.min(n, 5_000); i++) {
            call.run();
        }
        sync.run();
        long t0 = System.nanoTime();
        for (int i = 0; i < n; i++) {
            call.run();
        }
        long t1 = System.nanoTime();
        sync.run();
        int m = Math.max(1, n / 10);
        long t2 = System.nanoTime();
        for (int i = 0; i < m; i++) {
            call.run();
            sync.run();
        }
        long t3 = System.nanoTime();
        return new double[] {(t1 - t0) / 1e3 / n, (t3 - t2) / 1e3 / m};
    }
}
