package io.jcomm.api.device;

import io.jcomm.api.Device;
import io.jcomm.api.ProcessGroup;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;

/**
 * What a provider needs to create a communicator for one group.
 *
 * @param cpuGroup the group's control plane: same members, same ranks; used to exchange the
 *                 bootstrap id (NCCL unique id, HCCL root info) and by host communicators
 * @param device   the device this rank uses
 * @param timeout  default deadline of blocking steps (bootstrap, synchronize, abort)
 * @param options  provider-specific options (immutable copy)
 */
public record DeviceCommunicatorContext(ProcessGroup cpuGroup, Device device, Duration timeout,
                                        Map<String, String> options) {

    public DeviceCommunicatorContext {
        Objects.requireNonNull(cpuGroup, "cpuGroup");
        Objects.requireNonNull(device, "device");
        Objects.requireNonNull(timeout, "timeout");
        options = Map.copyOf(options);
    }

    public DeviceCommunicatorContext(ProcessGroup cpuGroup, Device device) {
        this(cpuGroup, device, cpuGroup.defaultTimeout(), Map.of());
    }
}
