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
 * fake saw a call after abort or an unbalanced group. Its NCCL has {@code ncclCommShrink}: the shrink case
 * goes through it ({@link FakeNcclWithoutShrinkConformanceTest}: the abort and fresh-id path).
 */
class FakeNcclConformanceTest extends DeviceCommunicatorConformanceTest {

    /** Options of every communicator. */
    protected Map<String, String> options() {
        return Map.of();
    }

    /** The NCCL version the fake reports: 2.29.3, which has {@code ncclCommShrink}. */
    protected int ncclVersion() {
        return 22903;
    }

    @Override
    protected World newWorld(int worldSize) {
        FakeNccl fake = new FakeNccl(8, ncclVersion(), Duration.ofSeconds(20));
        NcclDeviceCommunicatorProvider provider = new NcclDeviceCommunicatorProvider(
                () -> new NcclProbe.Result(Availability.available("fake NCCL"), null, ncclVersion(), 8, fake));
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
                // the shrink case went through ncclCommShrink exactly where the library has it
                boolean nativeShrink = ncclVersion() >= NcclConstants.SHRINK_MIN_VERSION_CODE;
                for (int r = 0; r < worldSize; r++) {
                    boolean survivor = worldSize == 1 || r < worldSize - 1;
                    boolean shrunk = fake.calls(r).contains("ncclCommShrink");
                    if (shrunk != (survivor && nativeShrink)) {
                        throw new AssertionError("rank " + r + " of " + worldSize + (shrunk ? " called" : " did not call")
                                + " ncclCommShrink on NCCL " + NcclConstants.versionString(ncclVersion()));
                    }
                }
            }
        };
    }
}
