package io.jcomm.parallel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;

import io.jcomm.api.Availability;
import io.jcomm.api.Device;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.api.device.DeviceCommunicatorProvider;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.cpu.CpuGroupOptions;
import io.jcomm.cpu.TcpOptions;
import io.jcomm.device.CpuDeviceCommunicatorProvider;
import io.jcomm.device.DeviceCommunicators;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;

/** What {@link GroupFactory} asks of the CPU groups, by the device the data moves on. */
class GroupFactoryOptionsTest {

    /** A provider for an accelerator type; never asked to create anything here. */
    private static final class Accelerator implements DeviceCommunicatorProvider {
        @Override
        public String name() {
            return "accel";
        }

        @Override
        public String deviceType() {
            return "accel";
        }

        @Override
        public int priority() {
            return 10;
        }

        @Override
        public Availability availability() {
            return Availability.available("always, in this test");
        }

        @Override
        public DeviceCommunicator create(DeviceCommunicatorContext context) {
            throw new UnsupportedOperationException("not created in this test");
        }
    }

    private static CpuGroupOptions cpuOptionsFor(Device device) {
        DistributedConfig config = DistributedConfig.builder().rank(0).worldSize(2).hostId("h").build();
        ParallelStateOptions options = ParallelStateOptions.builder().device(device).build();
        DeviceCommunicators registry = DeviceCommunicators.of(List.of(new CpuDeviceCommunicatorProvider(), new Accelerator()));
        try (InMemoryStore store = new InMemoryStore(Duration.ofSeconds(5))) {
            GroupFactory f = new GroupFactory(config, options, store, ParallelStateOptions.defaultCodec(), registry);
            return f.cpuOptions(new GroupFactory.Spec("tp:0", List.of(0, 1), false, "g", false), store, false);
        }
    }

    @Test
    void controlPlaneGroupsGetSmallRingsAndNoStaging() {
        CpuGroupOptions o = cpuOptionsFor(Device.of("accel", 0));
        assertEquals(Integer.toString(GroupFactory.CONTROL_RING_BYTES), o.option(TcpOptions.SHM_RING_BYTES, null));
        assertEquals("0", o.option(TcpOptions.SHM_STAGING_BYTES, null));
    }

    @Test
    void cpuDataPlaneGroupsKeepTheBackendDefaults() {
        CpuGroupOptions o = cpuOptionsFor(Device.CPU);
        assertNull(o.option(TcpOptions.SHM_RING_BYTES, null));
        assertNull(o.option(TcpOptions.SHM_STAGING_BYTES, null));
        assertEquals("127.0.0.1", o.hostname());
    }
}
