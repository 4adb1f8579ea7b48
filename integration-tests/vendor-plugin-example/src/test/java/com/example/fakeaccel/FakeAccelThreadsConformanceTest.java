package com.example.fakeaccel;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.device.DeviceCommunicators;
import io.jcomm.device.testkit.DeviceCommunicatorConformanceTest;
import org.junit.jupiter.api.Test;

/**
 * A vendor re-runs jcomm's conformance kit in its own build (threads as ranks over the kit's
 * stand-in CPU group), and checks that jcomm finds its provider through META-INF/services. The
 * integration tests run the same kit across real JVMs over the real CPU group.
 */
class FakeAccelThreadsConformanceTest extends DeviceCommunicatorConformanceTest {

    @Override
    protected World newWorld(int worldSize) {
        return cpu -> {
            var provider = DeviceCommunicators.load().byName(FakeAccelCommunicatorProvider.NAME);
            var comm = provider.create(new DeviceCommunicatorContext(cpu, FakeAccel.device(cpu.rank())));
            return new RankSetup(comm, new FakeAccelMemory(cpu.rank()));
        };
    }

    @Test
    void foundThroughServiceLoaderAndChosenAutomaticallyForItsDeviceType() {
        DeviceCommunicators reg = DeviceCommunicators.load();
        assertInstanceOf(FakeAccelCommunicatorProvider.class, reg.auto(FakeAccel.device(0)));
        var status = reg.list().stream().filter(p -> p.name().equals("fakeaccel:host")).findFirst().orElseThrow();
        assertTrue(status.availability().available(), status.toString());
        assertEquals("fakeaccel", status.deviceType());
    }
}
