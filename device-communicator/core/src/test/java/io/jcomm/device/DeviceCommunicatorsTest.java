package io.jcomm.device;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.Availability;
import io.jcomm.api.BackendException;
import io.jcomm.api.Device;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.api.device.DeviceCommunicatorProvider;
import java.util.List;
import org.junit.jupiter.api.Test;

class DeviceCommunicatorsTest {

    static class Stub implements DeviceCommunicatorProvider {
        private final String name;
        private final String deviceType;
        private final int priority;
        private final Availability availability;

        Stub(String name, String deviceType, int priority, Availability availability) {
            this.name = name;
            this.deviceType = deviceType;
            this.priority = priority;
            this.availability = availability;
        }

        @Override
        public String name() {
            return name;
        }

        @Override
        public String deviceType() {
            return deviceType;
        }

        @Override
        public int priority() {
            return priority;
        }

        @Override
        public Availability availability() {
            return availability;
        }

        @Override
        public DeviceCommunicator create(DeviceCommunicatorContext context) {
            throw new UnsupportedOperationException();
        }
    }

    @Test
    void serviceLoaderFindsTheCpuProviderAndNoJavaCpp() {
        DeviceCommunicators reg = DeviceCommunicators.load();
        assertEquals(List.of(), reg.loadErrors());
        assertInstanceOf(CpuDeviceCommunicatorProvider.class, reg.find("cpu").orElseThrow());
        assertEquals(List.of("cpu"), reg.list().stream().map(DeviceCommunicators.ProviderStatus::name).toList());
        // cuda:nccl and JavaCPP are io.jcomm:device-communicator-nccl's, not on this module's class path
        ClassLoader cl = DeviceCommunicators.class.getClassLoader();
        assertNull(cl.getResource("io/jcomm/device/NcclDeviceCommunicatorProvider.class"));
        assertNull(cl.getResource("org/bytedeco/javacpp/Loader.class"));
    }

    @Test
    void cudaTensorsWithoutTheNcclArtifactSayItIsNotOnTheClassPath() {
        String absent = "io.jcomm:device-communicator-nccl, which provides cuda:nccl, is not on the class path";
        DeviceCommunicators reg = DeviceCommunicators.load();
        assertEquals("no available device communicator for cuda tensors (no provider handles device type 'cuda'; known: cpu; "
                + absent + ")", assertThrows(BackendException.class, () -> reg.auto(Device.cuda(0))).detail());
        assertEquals("no available device communicator for cuda tensors (no provider handles device type 'cuda'; known: cpu; "
                + absent + ")", assertThrows(BackendException.class, () -> reg.select("auto", Device.cuda(1))).detail());
        assertEquals("no device communicator provider named 'cuda:nccl' (known: cpu; " + absent + ")",
                assertThrows(BackendException.class, () -> reg.byName("cuda:nccl")).detail());
        // a vendor's cuda provider that is unavailable: its reason, then the missing artifact
        DeviceCommunicators withVendor = DeviceCommunicators.of(List.of(new CpuDeviceCommunicatorProvider(),
                new Stub("cuda:vendor", "cuda", 10, Availability.unavailable("libvendor.so not found"))));
        assertEquals("no available device communicator for cuda tensors (cuda:vendor: libvendor.so not found; " + absent + ")",
                assertThrows(BackendException.class, () -> withVendor.auto(Device.cuda(0))).detail());
        // other device types and other names are not about NCCL
        assertEquals("no available device communicator for xpu tensors (no provider handles device type 'xpu'; known: cpu)",
                assertThrows(BackendException.class, () -> reg.auto(new Device("xpu", 0))).detail());
        assertEquals("no device communicator provider named 'cuda:other' (known: cpu)",
                assertThrows(BackendException.class, () -> reg.byName("cuda:other")).detail());
    }

    @Test
    void autoPrefersTheHighestPriorityAvailableProvider() {
        Stub low = new Stub("x:low", "x", 1, Availability.available("ok"));
        Stub high = new Stub("x:high", "x", 50, Availability.available("ok"));
        Stub best = new Stub("x:best", "x", 99, Availability.unavailable("driver missing"));
        DeviceCommunicators reg = DeviceCommunicators.of(List.of(low, best, high));
        assertSame(high, reg.auto(new Device("x", 0)));
        assertSame(best, reg.find("x:best").orElseThrow());
        BackendException e = assertThrows(BackendException.class, () -> reg.byName("x:best"));
        assertEquals("device communicator provider 'x:best' is unavailable: driver missing", e.detail());
        assertSame(low, reg.select("x:low", new Device("x", 3)));
    }

    @Test
    void unknownNamesAndDeviceTypesFailWithWhatIsKnown() {
        DeviceCommunicators reg = DeviceCommunicators.of(List.of(new CpuDeviceCommunicatorProvider(),
                new Stub("npu:hccl", "npu", 100, Availability.unavailable("libhccl.so not found"))));
        assertEquals("no device communicator provider named 'npu:hcl' (known: cpu, npu:hccl)",
                assertThrows(BackendException.class, () -> reg.byName("npu:hcl")).detail());
        assertEquals("no available device communicator for xpu tensors (no provider handles device type 'xpu'; known: cpu, npu:hccl)",
                assertThrows(BackendException.class, () -> reg.auto(new Device("xpu", 0))).detail());
        assertEquals("no available device communicator for npu tensors (npu:hccl: libhccl.so not found)",
                assertThrows(BackendException.class, () -> reg.auto(new Device("npu", 0))).detail());
        assertEquals("device communicator provider 'cpu' moves cpu tensors, not npu tensors",
                assertThrows(BackendException.class, () -> reg.select("cpu", new Device("npu", 0))).detail());
    }

    @Test
    void duplicatesAndBrokenProbesAreReportedNotFatal() {
        DeviceCommunicatorProvider throwing = new Stub("y", "y", 1, null) {
            @Override
            public Availability availability() {
                throw new IllegalStateException("probe bug");
            }
        };
        DeviceCommunicators reg = DeviceCommunicators.of(List.of(new CpuDeviceCommunicatorProvider(),
                new Stub("cpu", "cpu", 5, Availability.available("dup")), throwing));
        assertEquals(1, reg.loadErrors().size());
        assertTrue(reg.loadErrors().get(0).startsWith("provider name 'cpu' of"), reg.loadErrors().toString());
        DeviceCommunicators.ProviderStatus y = reg.list().stream().filter(p -> p.name().equals("y")).findFirst().orElseThrow();
        assertFalse(y.availability().available());
        assertTrue(y.availability().reason().contains("probe bug"), y.availability().reason());
    }
}
