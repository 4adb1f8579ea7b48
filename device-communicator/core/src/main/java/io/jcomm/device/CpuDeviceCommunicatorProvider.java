package io.jcomm.device;

import io.jcomm.api.Availability;
import io.jcomm.api.BackendException;
import io.jcomm.api.OpContext;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.api.device.DeviceCommunicatorProvider;
import io.jcomm.device.internal.CpuDeviceCommunicator;

/**
 * Provider {@code cpu}: the data plane for host tensors on hosts without an accelerator. It runs the
 * collectives over the group's own CPU {@link io.jcomm.api.ProcessGroup} (whatever backend that
 * group uses), so it is always available. Concatenation and splitting along any dimension, and
 * out-of-place variants, are done in Java around the CPU collectives.
 */
public final class CpuDeviceCommunicatorProvider implements DeviceCommunicatorProvider {

    public static final String NAME = "cpu";

    private static final Availability AVAILABLE =
            Availability.available("host memory, over the group's CPU process group");

    public CpuDeviceCommunicatorProvider() {
        // no work: see availability()
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String deviceType() {
        return "cpu";
    }

    @Override
    public int priority() {
        return 0;
    }

    @Override
    public Availability availability() {
        return AVAILABLE;
    }

    @Override
    public DeviceCommunicator create(DeviceCommunicatorContext context) {
        if (!context.device().isCpu()) {
            throw new BackendException(OpContext.of(context.cpuGroup().name(), context.cpuGroup().rank(), "create"),
                    "provider " + NAME + " moves host tensors, not " + context.device() + " tensors");
        }
        return new CpuDeviceCommunicator(NAME, context.cpuGroup(), context.timeout());
    }
}
