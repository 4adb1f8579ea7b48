package io.jcomm.device.internal.nccl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.Availability;
import io.jcomm.api.BackendException;
import io.jcomm.api.DType;
import io.jcomm.api.Device;
import io.jcomm.api.Tensor;
import io.jcomm.api.device.DeviceMemory;
import io.jcomm.device.NcclDeviceCommunicatorProvider;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * The NCCL provider's device memory copies (what the transfer engine stages device regions with), over
 * the fake NCCL's device heap: both directions at an offset, the range checks, a CUDA error as a
 * BackendException with CUDA's string, and none offered while NCCL is unavailable.
 */
@Timeout(value = 30, unit = TimeUnit.SECONDS)
class NcclDeviceMemoryTest {

    @Test
    void copiesBothWaysChecksRangesAndReportsCudaErrors() {
        FakeNccl fake = new FakeNccl(2, 22903, Duration.ofSeconds(5));
        DeviceMemory m = new NcclDeviceCommunicatorProvider(
                () -> new NcclProbe.Result(Availability.available("fake"), null, 22903, 2, fake)).deviceMemory().orElseThrow();
        long addr = fake.malloc(4096);
        Tensor dev = Tensor.onDevice(Device.cuda(1), addr, DType.U8, new long[] {4096}, null);

        ByteBuffer up = ByteBuffer.allocateDirect(1000);
        for (int i = 0; i < 1000; i++) {
            up.put(i, (byte) (i * 7 + 1));
        }
        m.copyFromHost(up, dev, 96);
        assertFalse(up.hasRemaining(), "the source's position moves to its limit");
        ByteBuffer onDevice = fake.at(addr + 96, 1000);
        for (int i = 0; i < 1000; i++) {
            assertEquals((byte) (i * 7 + 1), onDevice.get(i), "device byte " + i);
        }
        ByteBuffer down = ByteBuffer.allocateDirect(1000);
        m.copyToHost(dev, 96, down);
        assertEquals(up.flip(), down.flip());

        assertThrows(IllegalArgumentException.class, () -> m.copyToHost(dev, 3500, ByteBuffer.allocateDirect(1000)));
        assertThrows(IllegalArgumentException.class, () -> m.copyToHost(dev, 0, ByteBuffer.allocate(16)));
        assertThrows(IllegalArgumentException.class, () -> m.copyToHost(
                Tensor.onDevice(Device.of("npu", 0), addr, DType.U8, new long[] {16}, null), 0, ByteBuffer.allocateDirect(16)));

        fake.failNext("cudaMemcpyHost", NcclConstants.CUDA_ERROR_INVALID_VALUE);
        BackendException e = assertThrows(BackendException.class, () -> m.copyToHost(dev, 0, ByteBuffer.allocateDirect(16)));
        assertTrue(e.getMessage().contains("cudaMemcpy of 16 bytes from cuda:1 failed"), e.getMessage());

        assertTrue(new NcclDeviceCommunicatorProvider(() -> new NcclProbe.Result(Availability.unavailable("no libnccl (test)"),
                null, 0, 0, null)).deviceMemory().isEmpty());
    }
}
