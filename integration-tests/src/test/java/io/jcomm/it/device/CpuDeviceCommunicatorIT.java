package io.jcomm.it.device;

/**
 * Provider {@code cpu} across real JVMs over the real TCP store and CPU group, chosen automatically
 * ({@code JCOMM_DEVICE_COMM=auto}) for host tensors: what a host without GPUs uses.
 */
class CpuDeviceCommunicatorIT extends AbstractDeviceConformanceIT {

    @Override
    protected String deviceType() {
        return "cpu";
    }

    @Override
    protected String configuredProvider() {
        return "auto";
    }

    @Override
    protected String expectedProvider() {
        return "cpu";
    }
}
