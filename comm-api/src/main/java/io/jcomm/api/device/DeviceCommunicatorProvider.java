package io.jcomm.api.device;

import io.jcomm.api.spi.Provider;
import io.jcomm.api.Availability;

/**
 * A pluggable source of {@link DeviceCommunicator}s, found with {@link java.util.ServiceLoader}
 * (declare the implementation in {@code META-INF/services/io.jcomm.api.device.DeviceCommunicatorProvider}).
 * Implementations need a public no-argument constructor that does no work: probing happens in
 * {@link #availability()}.
 */
public interface DeviceCommunicatorProvider extends Provider {

    /** Unique name used to select the provider, e.g. {@code cuda:nccl}, {@code cpu}, {@code npu:hccl}. */
    @Override
    String name();

    /** The device type whose tensors this provider moves, e.g. {@code cuda}, {@code cpu}, {@code npu}. */
    String deviceType();

    /** Preference among available providers for the same device type; higher wins. */
    @Override
    int priority();

    /**
     * Whether this provider can work here, with a reason. Computed once and cached; never throws
     * and never leaves a class half-initialised (probe native libraries without loading them until
     * it is known to be safe).
     */
    @Override
    Availability availability();

    /**
     * Creates a communicator for the members of {@code context.cpuGroup()}. Collective: every member
     * calls it.
     *
     * @throws io.jcomm.api.BackendException when unavailable (with the reason) or bootstrap fails
     */
    DeviceCommunicator create(DeviceCommunicatorContext context);

    /**
     * Copies between this provider's device memory and host memory, where the provider supports it
     * (an engine stages device tensors through host buffers with it); empty by default and whenever
     * the provider is unavailable.
     */
    default java.util.Optional<DeviceMemory> deviceMemory() {
        return java.util.Optional.empty();
    }
}
