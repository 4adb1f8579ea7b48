package io.jcomm.device;

import io.jcomm.api.Device;
import io.jcomm.api.ProcessGroup;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.CpuGroups;
import io.jcomm.device.testkit.DeviceCommunicatorConformanceTest;
import io.jcomm.device.testkit.DeviceMemory;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * The conformance kit for provider {@code cpu} over the real CPU group (tcp backend, loopback
 * sockets), ranks as threads sharing an in-memory store: the transport's own semantics (ordering of
 * point-to-point, blocking) in a fast unit test. The integration tests run it across JVMs.
 */
class CpuDeviceCommunicatorTcpGroupTest extends DeviceCommunicatorConformanceTest {

    @Override
    protected int[] worldSizes() {
        return new int[] {2, 3};
    }

    @Override
    protected World newWorld(int worldSize) {
        InMemoryStore store = new InMemoryStore(timeout());
        List<ProcessGroup> groups = new CopyOnWriteArrayList<>();
        CpuDeviceCommunicatorProvider provider = new CpuDeviceCommunicatorProvider();
        return new World() {
            @Override
            public RankSetup rank(ProcessGroup standIn) {
                ProcessGroup tcp = CpuGroups.create(CpuGroupOptions.builder().store(store).groupName("dc-" + worldSize)
                        .rank(standIn.rank()).size(worldSize).backend("tcp").timeout(timeout()).build());
                groups.add(tcp);
                return new RankSetup(provider.create(new DeviceCommunicatorContext(tcp, Device.CPU, timeout(),
                        java.util.Map.of())), DeviceMemory.host(), tcp);
            }

            @Override
            public void close() {
                groups.forEach(ProcessGroup::close);
                store.close();
            }
        };
    }

    @Override
    protected Duration timeout() {
        return Duration.ofSeconds(30);
    }
}
