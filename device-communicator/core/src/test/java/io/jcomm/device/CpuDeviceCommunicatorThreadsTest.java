package io.jcomm.device;

import io.jcomm.api.Device;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.device.testkit.DeviceCommunicatorConformanceTest;
import io.jcomm.device.testkit.DeviceMemory;

/**
 * The conformance kit for provider {@code cpu} with threads as ranks over the stand-in CPU group
 * (checks the Java logic: concatenation and splitting, self pairs, argument checks). The same kit
 * runs across real JVMs over the real CPU group in the integration tests.
 */
class CpuDeviceCommunicatorThreadsTest extends DeviceCommunicatorConformanceTest {

    @Override
    protected World newWorld(int worldSize) {
        CpuDeviceCommunicatorProvider provider = new CpuDeviceCommunicatorProvider();
        return cpu -> new RankSetup(provider.create(new DeviceCommunicatorContext(cpu, Device.CPU)), DeviceMemory.host());
    }
}
