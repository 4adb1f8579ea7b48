package io.jcomm.it.device;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;

/**
 * The third-party provider {@code fakeaccel:host} (module vendor-plugin-example, registered only
 * through its jar's META-INF/services) selected by name from configuration and passing the kit
 * across real JVMs.
 */
class VendorPluginIT extends AbstractDeviceConformanceIT {

    @Override
    protected String deviceType() {
        return "fakeaccel";
    }

    @Override
    protected String configuredProvider() {
        return "fakeaccel:host";
    }

    @Override
    protected String expectedProvider() {
        return "fakeaccel:host";
    }

    @Override
    protected void checkOutput(List<String> rank0) {
        String line = rank0.stream().filter(l -> l.startsWith("PROVIDER ")).findFirst().orElseThrow();
        assertTrue(line.contains("class com.example.fakeaccel.FakeAccelCommunicatorProvider"), line);
        // loaded from the vendor module's own artifact, not from jcomm's device-communicator
        assertTrue(line.contains("vendor-plugin-example"), line);
        assertEquals(-1, line.indexOf("device-communicator"), line);
    }
}
