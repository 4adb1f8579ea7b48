package io.jcomm.device;

import io.jcomm.api.Availability;
import io.jcomm.api.BackendException;
import io.jcomm.api.OpContext;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.api.device.DeviceCommunicatorProvider;
import io.jcomm.device.internal.nccl.NcclCommunicator;
import io.jcomm.device.internal.nccl.NcclProbe;
import io.jcomm.device.internal.nccl.NcclSettings;
import java.util.Objects;
import java.util.function.Supplier;

/**
 * Provider {@code cuda:nccl}: NCCL through JavaCPP ({@code org.bytedeco:cuda}, NCCL 2.29 bindings)
 * for CUDA device tensors.
 *
 * <p>{@link #availability()} runs {@link NcclProbe} once per JVM: it checks for the CUDA driver
 * ({@code libcuda.so.1}), the CUDA 13 runtime ({@code libcudart.so.13}) and {@code libnccl.so.2}
 * (in {@code -Djcomm.nccl.libdir} / {@code -Djcomm.cuda.libdir}, {@code LD_LIBRARY_PATH} and the
 * system library directories), reads libnccl's version from the file and refuses anything older
 * than {@code NcclConstants.MIN_VERSION_CODE} (2.14) before loading it, and only then loads the bindings and counts devices. Without a GPU
 * it answers "unavailable" with the reason and never touches the bindings.
 *
 * <p>Options ({@link DeviceCommunicatorContext#options()}): {@value NcclSettings#OP_TIMEOUT_MS},
 * {@value NcclSettings#ABORT_TIMEOUT_MS}, {@value NcclSettings#WATCHDOG_INTERVAL_MS},
 * {@value NcclSettings#TRACK_OPS}, {@value NcclSettings#MAX_TRACKED_OPS}; see {@link NcclSettings}.
 */
public final class NcclDeviceCommunicatorProvider implements DeviceCommunicatorProvider {

    public static final String NAME = "cuda:nccl";

    private final Supplier<NcclProbe.Result> probe;

    public NcclDeviceCommunicatorProvider() {
        this(NcclProbe::system);
    }

    /** A provider over another probe result (tests run the real logic over a fake {@code NcclApi}). */
    public NcclDeviceCommunicatorProvider(Supplier<NcclProbe.Result> probe) {
        this.probe = Objects.requireNonNull(probe, "probe");
    }

    @Override
    public String name() {
        return NAME;
    }

    @Override
    public String deviceType() {
        return "cuda";
    }

    @Override
    public int priority() {
        return 100;
    }

    @Override
    public Availability availability() {
        return probe.get().availability();
    }

    @Override
    public DeviceCommunicator create(DeviceCommunicatorContext context) {
        NcclProbe.Result p = probe.get();
        OpContext c = OpContext.of(context.cpuGroup().name(), context.cpuGroup().rank(), "create");
        if (!p.availability().available()) {
            throw new BackendException(c, "device communicator provider '" + NAME + "' is unavailable: "
                    + p.availability().reason());
        }
        if (!"cuda".equals(context.device().type())) {
            throw new BackendException(c, "provider " + NAME + " moves cuda tensors, not " + context.device() + " tensors");
        }
        if (context.device().index() >= p.deviceCount()) {
            throw new BackendException(c, context.device() + " requested but only " + p.deviceCount()
                    + " CUDA device(s) are visible to this process");
        }
        return NcclCommunicator.create(NAME, p.api(), context);
    }

    /** {@code cudaMemcpy} between cuda tensors and direct host buffers, when NCCL and CUDA are available. */
    @Override
    public java.util.Optional<io.jcomm.api.device.DeviceMemory> deviceMemory() {
        NcclProbe.Result p = probe.get();
        return p.availability().available() ? java.util.Optional.of(new io.jcomm.device.internal.nccl.NcclDeviceMemory(p.api()))
                : java.util.Optional.empty();
    }
}
