package io.jcomm.device;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.jcomm.api.Availability;
import io.jcomm.api.BackendException;
import io.jcomm.api.Device;
import io.jcomm.device.internal.nccl.NcclProbe;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.Test;

/** The registry ({@code device-communicator}) with this artifact on the class path: both built-in providers. */
class NcclDeviceCommunicatorsTest {

    @Test
    void serviceLoaderFindsBothBuiltInProviders() {
        DeviceCommunicators reg = DeviceCommunicators.load();
        assertEquals(List.of(), reg.loadErrors());
        assertInstanceOf(NcclDeviceCommunicatorProvider.class, reg.find("cuda:nccl").orElseThrow());
        assertInstanceOf(CpuDeviceCommunicatorProvider.class, reg.find("cpu").orElseThrow());
        assertEquals(List.of("cpu", "cuda:nccl"), reg.list().stream().map(DeviceCommunicators.ProviderStatus::name).toList());
    }

    @Test
    void onThisGpuLessHostNcclIsUnavailableWithItsReasonAndCpuIsChosenForHostTensors() {
        Assumptions.assumeFalse(Files.exists(Path.of("/dev/nvidiactl")), "this host has an NVIDIA driver");
        Assumptions.assumeFalse(NcclProbe.system().availability().available(), "NCCL is available here");
        String reason = "CUDA driver library libcuda.so.1 not found (searched -Djcomm.cuda.libdir, LD_LIBRARY_PATH and the "
                + "system library directories); is the NVIDIA driver installed?";
        DeviceCommunicators reg = DeviceCommunicators.load();
        DeviceCommunicators.ProviderStatus nccl = reg.list().stream().filter(p -> p.name().equals("cuda:nccl")).findFirst().orElseThrow();
        assertEquals(Availability.unavailable(reason), nccl.availability());
        BackendException byName = assertThrows(BackendException.class, () -> reg.byName("cuda:nccl"));
        assertEquals("device communicator provider 'cuda:nccl' is unavailable: " + reason, byName.detail());
        BackendException auto = assertThrows(BackendException.class, () -> reg.auto(Device.cuda(0)));
        assertEquals("no available device communicator for cuda tensors (cuda:nccl: " + reason + ")", auto.detail());
        assertInstanceOf(CpuDeviceCommunicatorProvider.class, reg.auto(Device.CPU));
        assertInstanceOf(CpuDeviceCommunicatorProvider.class, reg.select("auto", Device.CPU));
        assertInstanceOf(CpuDeviceCommunicatorProvider.class, reg.select(null, Device.CPU));
    }

    @Test
    void withThisArtifactOnTheClassPathNoMessageCallsItMissing() {
        // the core names this artifact's provider and class without seeing them: keep them in step
        assertEquals(NcclDeviceCommunicatorProvider.NAME, DeviceCommunicators.NCCL_PROVIDER);
        assertEquals(NcclDeviceCommunicatorProvider.class.getName(), DeviceCommunicators.NCCL_PROVIDER_CLASS);
        // a registry without cuda:nccl (of(...)): the artifact is on the class path, so no hint
        DeviceCommunicators reg = DeviceCommunicators.of(List.of(new CpuDeviceCommunicatorProvider()));
        assertEquals("no available device communicator for cuda tensors (no provider handles device type 'cuda'; known: cpu)",
                assertThrows(BackendException.class, () -> reg.auto(Device.cuda(0))).detail());
        assertEquals("no device communicator provider named 'cuda:nccl' (known: cpu)",
                assertThrows(BackendException.class, () -> reg.byName("cuda:nccl")).detail());
    }
}
