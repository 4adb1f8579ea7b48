package com.example.fakeaccel;

import io.jcomm.api.Availability;
import io.jcomm.api.BackendException;
import io.jcomm.api.OpContext;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.api.device.DeviceCommunicatorProvider;

/**
 * Provider {@code fakeaccel:host}: a third-party device communicator for the invented
 * {@code fakeaccel} accelerator, discovered by jcomm only through
 * {@code META-INF/services/io.jcomm.api.device.DeviceCommunicatorProvider} in this jar.
 *
 * <p>The constructor does nothing; {@link #availability()} probes once and caches (here: how many
 * devices the runtime sees). A real vendor would check for its driver and collective library
 * files before loading anything (see docs/VENDOR-SPI.md).
 */
public final class FakeAccelCommunicatorProvider implements DeviceCommunicatorProvider {

    public static final String NAME = "fakeaccel:host";

    private volatile Availability availability;

    public FakeAccelCommunicatorProvider() {
        // no work here: ServiceLoader instantiates every provider, available or not
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String deviceType() {
        return FakeAccel.DEVICE_TYPE;
    }

    @Override
    public int priority() {
        return 10;
    }

    @Override
    public Availability availability() {
        Availability a = availability;
        if (a == null) {
            int n = FakeAccel.runtime().deviceCount();
            a = n > 0
                    ? Availability.available("fakeaccel runtime with " + n + " device(s), collectives over the CPU group")
                    : Availability.unavailable("no fakeaccel device visible (-D" + FakeAccel.DEVICES_PROP + "=" + n + ")");
            availability = a;
        }
        return a;
    }

    @Override
    public DeviceCommunicator create(DeviceCommunicatorContext context) {
        OpContext c = OpContext.of(context.cpuGroup().name(), context.cpuGroup().rank(), "create");
        Availability a = availability();
        if (!a.available()) {
            throw new BackendException(c, "device communicator provider '" + NAME + "' is unavailable: " + a.reason());
        }
        if (!FakeAccel.DEVICE_TYPE.equals(context.device().type())
                || context.device().index() >= FakeAccel.runtime().deviceCount()) {
            throw new BackendException(c, NAME + " cannot serve " + context.device());
        }
        return FakeAccelCommunicator.create(NAME, context);
    }
}
