package io.jcomm.it.device;

import com.example.fakeaccel.FakeAccel;
import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.StreamHandle;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.api.device.DeviceCommunicatorProvider;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.device.DeviceCommunicators;
import io.jcomm.device.internal.nccl.CudaMemory;
import io.jcomm.device.testkit.ConformanceRunner;
import io.jcomm.device.testkit.DeviceMemory;
import java.util.Map;

/**
 * One rank of a multi-JVM conformance run of a device communicator provider: torchrun environment
 * in, TCP store and real CPU group ({@code tcp} backend), the provider chosen from configuration
 * ({@code JCOMM_DEVICE_COMM}: a name or {@code auto}) through {@link DeviceCommunicators}, then every
 * case of the kit. Argument: the device type ({@code cpu}, {@code fakeaccel}, {@code cuda}); the
 * device index is {@code LOCAL_RANK}.
 */
public final class DeviceConformanceWorker {

    private DeviceConformanceWorker() {
    }

    public static void main(String[] args) throws Exception {
        String deviceType = args[0];
        DistributedConfig cfg = DistributedConfig.fromEnvironment();
        Device device = Device.of(deviceType, cfg.localRank());
        try (TcpStore store = TcpRendezvous.connect(cfg);
             ProcessGroup cpu = CpuGroups.create(CpuGroupOptions.fromConfig(cfg, store).toBuilder().backend("tcp").build())) {
            DeviceCommunicators registry = DeviceCommunicators.load();
            DeviceCommunicatorProvider provider = registry.select(cfg.deviceCommunicator(), device);
            System.out.println("PROVIDER " + provider.name() + " class " + provider.getClass().getName() + " from "
                    + provider.getClass().getProtectionDomain().getCodeSource().getLocation());
            DeviceCommunicator comm = provider.create(new DeviceCommunicatorContext(cpu, device, cfg.timeout(), Map.of()));
            DeviceMemory memory = memory(device);
            Map<String, String> results = ConformanceRunner.run(comm, memory, cpu, System.out);
            comm.close();
            if (memory instanceof AutoCloseable) {
                ((AutoCloseable) memory).close();
            }
            cpu.barrier();
            long failed = results.values().stream().filter(v -> v != null).count();
            System.out.println("DONE " + (results.size() - failed) + "/" + results.size());
            if (failed > 0) {
                throw new AssertionError(failed + " conformance case(s) failed on rank " + cfg.rank());
            }
        }
    }

    private static DeviceMemory memory(Device device) {
        switch (device.type()) {
            case "cpu": return DeviceMemory.host();
            case "cuda": return new CudaMemory(device.index());
            case FakeAccel.DEVICE_TYPE: return fakeAccel(device.index());
            default: throw new IllegalArgumentException("no test memory for " + device);
        }
    }

    /** The conformance kit's view of fakeaccel memory, through the vendor's runtime API. */
    static DeviceMemory fakeAccel(int index) {
        FakeAccel rt = FakeAccel.runtime();
        return new DeviceMemory() {
            @Override
            public Device device() {
                return FakeAccel.device(index);
            }

            @Override
            public StreamHandle stream() {
                return new StreamHandle(device(), 1L);
            }

            @Override
            public Tensor allocate(DType dtype, long... shape) {
                return rt.allocate(index, dtype, shape);
            }

            @Override
            public void write(Tensor target, Tensor source) {
                rt.copyToDevice(target.address(), source.buffer());
            }

            @Override
            public Tensor read(Tensor t) {
                Tensor h = Tensor.allocate(t.dtype(), t.shape());
                rt.copyToHost(h.buffer(), t.address());
                return h;
            }
        };
    }
}
