package io.jcomm.device.internal.nccl;

import io.jcomm.api.Availability;
import io.jcomm.api.Device;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.device.NcclDeviceCommunicatorProvider;
import io.jcomm.device.testkit.DeviceCommunicatorConformanceTest;
import java.time.Duration;
import java.util.Map;

/**
 * The conformance kit for provider {@code cuda:nccl}, its real Java logic over {@link FakeNccl}
 * (threads as ranks, each on its own fake device, one caller stream per rank). A world fails if the
 * fake saw a call after abort or an unbalanced group.
 */
class FakeNcclConformanceTest extends DeviceCommunicatorConformanceTest {

    /** Options of every communicator. */
    protected Map<String, String> options() {
        return Map.of();
    }

    @Override
    protected World newWorld(int worldSize) {
        FakeNccl fake = new FakeNccl();
        NcclDeviceCommunicatorProvider provider = new NcclDeviceCommunicatorProvider(
                () -> new NcclProbe.Result(Availability.available("fake NCCL"), null, 22903, 8, fake));
        return new World() {
            @Override
            public RankSetup rank(io.jcomm.api.ProcessGroup cpu) {
                Device dev = Device.cuda(cpu.rank());
                var comm = provider.create(new DeviceCommunicatorContext(cpu, dev, Duration.ofSeconds(20), options()));
                return new RankSetup(comm, fake.memory(cpu.rank(), 0x5000 + cpu.rank()));
            }

            @Override
            public void close() {
                if (!fake.violations().isEmpty()) {
                    throw new AssertionError("misuse of NCCL: " + fake.violations());
                }
            }
        };
    }
}
