package io.jcomm.device;

import io.jcomm.runtime.Providers;
import io.jcomm.api.Availability;
import io.jcomm.api.BackendException;
import io.jcomm.api.Device;
import io.jcomm.api.device.DeviceCommunicator;
import io.jcomm.api.device.DeviceCommunicatorContext;
import io.jcomm.api.device.DeviceCommunicatorProvider;
import java.util.Collection;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Objects;
import java.util.Optional;
import java.util.ServiceLoader;
import java.util.stream.Collectors;

/**
 * The registry of {@link DeviceCommunicatorProvider}s: found with {@link ServiceLoader}, chosen by
 * name from configuration ({@code cuda:nccl}, {@code cpu}, a vendor's name) or automatically for a
 * device type by {@link DeviceCommunicatorProvider#priority() priority} among the available ones.
 *
 * <p>An instance is an immutable snapshot of the providers a class loader sees. Availability is the
 * providers' own (computed once and cached by each of them). Two registries in one JVM are
 * independent; nothing here is a global.
 *
 * <p>This artifact ({@code io.jcomm:device-communicator}) brings provider {@code cpu} only; provider
 * {@code cuda:nccl} is in {@code io.jcomm:device-communicator-nccl}. When CUDA tensors find no provider and that
 * artifact is not on the class path, the exception says so.
 *
 * <pre>{@code
 * DeviceCommunicators registry = DeviceCommunicators.load();
 * DeviceCommunicator comm = registry.select(config.deviceCommunicator(), device)   // "auto" or a name
 *         .create(new DeviceCommunicatorContext(cpuGroup, device));
 * }</pre>
 */
public final class DeviceCommunicators {

    /** The configuration value that asks for automatic choice. */
    public static final String AUTO = "auto";

    /** Provider cuda:nccl, its class and the artifact that holds them (named when it is missing). */
    static final String NCCL_ARTIFACT = "io.jcomm:device-communicator-nccl";
    static final String NCCL_PROVIDER = "cuda:nccl";
    static final String NCCL_PROVIDER_CLASS = "io.jcomm.device.NcclDeviceCommunicatorProvider";

    private final Providers<DeviceCommunicatorProvider> providers;
    private final boolean ncclOnClassPath;

    private DeviceCommunicators(Providers<DeviceCommunicatorProvider> providers, ClassLoader loader) {
        this.providers = providers;
        String resource = NCCL_PROVIDER_CLASS.replace('.', '/') + ".class";
        this.ncclOnClassPath = (loader != null ? loader.getResource(resource) : ClassLoader.getSystemResource(resource)) != null;
    }

    /** The providers visible to the thread's context class loader (or this class's loader). */
    public static DeviceCommunicators load() {
        ClassLoader cl = Thread.currentThread().getContextClassLoader();
        return load(cl != null ? cl : DeviceCommunicators.class.getClassLoader());
    }

    /**
     * The providers listed in {@code META-INF/services/io.jcomm.api.device.DeviceCommunicatorProvider}
     * files visible to {@code loader}. A provider that cannot be instantiated, or whose name is
     * already taken, is skipped and reported in {@link #loadErrors()}.
     */
    public static DeviceCommunicators load(ClassLoader loader) {
        return new DeviceCommunicators(Providers.load(DeviceCommunicatorProvider.class, loader), loader);
    }

    /** A registry of exactly these providers (tests, embedding). */
    public static DeviceCommunicators of(Collection<? extends DeviceCommunicatorProvider> providers) {
        for (DeviceCommunicatorProvider p : providers) {
            Objects.requireNonNull(p, "provider");
        }
        return new DeviceCommunicators(Providers.of(providers), DeviceCommunicators.class.getClassLoader());
    }

    /** Problems met while loading (unloadable or duplicate providers), for diagnostics. */
    public List<String> loadErrors() {
        return providers.errors();
    }

    /** Every provider with its availability, grouped by device type, best first. */
    public List<ProviderStatus> list() {
        return providers.all().stream()
                .map(ProviderStatus::of)
                .sorted(Comparator.comparing(ProviderStatus::deviceType)
                        .thenComparing(Comparator.comparingInt(ProviderStatus::priority).reversed())
                        .thenComparing(ProviderStatus::name))
                .collect(Collectors.toUnmodifiableList());
    }

    /** The provider called {@code name}, available or not. */
    public Optional<DeviceCommunicatorProvider> find(String name) {
        return providers.named(name);
    }

    /**
     * The provider called {@code name}, which must be available.
     *
     * @throws BackendException naming the known providers when there is none of that name, or with
     *                          the provider's reason when it is unavailable
     */
    public DeviceCommunicatorProvider byName(String name) {
        Objects.requireNonNull(name, "name");
        DeviceCommunicatorProvider p = providers.named(name).orElse(null);
        if (p == null) {
            String absent = NCCL_PROVIDER.equals(name) ? ncclAbsent() : "";
            throw new BackendException("no device communicator provider named '" + name + "' (known: "
                    + names() + (loadErrors().isEmpty() ? "" : "; load errors: " + loadErrors())
                    + absent + ")");
        }
        Availability a = availabilityOf(p);
        if (!a.available()) {
            throw new BackendException("device communicator provider '" + name + "' is unavailable: " + a.reason());
        }
        return p;
    }

    /**
     * The available provider with the highest priority for {@code device}'s type.
     *
     * @throws BackendException listing every candidate's reason when none is available
     */
    public DeviceCommunicatorProvider auto(Device device) {
        Objects.requireNonNull(device, "device");
        Optional<DeviceCommunicatorProvider> best = providers.best(p -> device.type().equals(p.deviceType()));
        if (best.isPresent()) {
            return best.get();
        }
        List<DeviceCommunicatorProvider> candidates = providers.all().stream()
                .filter(p -> device.type().equals(p.deviceType())).collect(Collectors.toList());
        StringBuilder why = new StringBuilder();
        for (DeviceCommunicatorProvider p : candidates) {
            why.append(why.length() == 0 ? "" : "; ").append(p.name()).append(": ").append(availabilityOf(p).reason());
        }
        String absent = "cuda".equals(device.type()) ? ncclAbsent() : "";
        throw new BackendException("no available device communicator for " + device.type() + " tensors ("
                + (candidates.isEmpty() ? "no provider handles device type '" + device.type() + "'; known: "
                + names() : why) + absent + ")");
    }

    /** "; io.jcomm:device-communicator-nccl ... is not on the class path" when so and no provider is named cuda:nccl, else "". */
    private String ncclAbsent() {
        return ncclOnClassPath || providers.named(NCCL_PROVIDER).isPresent() ? ""
                : "; " + NCCL_ARTIFACT + ", which provides " + NCCL_PROVIDER + ", is not on the class path";
    }

    /** {@link #auto(Device)} for {@code null}, blank or {@code "auto"} (any case), else {@link #byName(String)}. */
    public DeviceCommunicatorProvider select(String nameOrAuto, Device device) {
        if (nameOrAuto == null || nameOrAuto.isBlank() || AUTO.equals(nameOrAuto.trim().toLowerCase(Locale.ROOT))) {
            return auto(device);
        }
        DeviceCommunicatorProvider p = byName(nameOrAuto.trim());
        if (!p.deviceType().equals(device.type())) {
            throw new BackendException("device communicator provider '" + p.name() + "' moves " + p.deviceType()
                    + " tensors, not " + device.type() + " tensors");
        }
        return p;
    }

    /** Selects a provider for {@code context.device()} and creates the communicator (collective). */
    public DeviceCommunicator create(String nameOrAuto, DeviceCommunicatorContext context) {
        return select(nameOrAuto, context.device()).create(context);
    }

    private static Availability availabilityOf(DeviceCommunicatorProvider p) {
        return Providers.availabilityOf(p);
    }

    private String names() {
        return providers.all().stream().map(DeviceCommunicatorProvider::name).sorted().collect(Collectors.joining(", "));
    }

    /**
     * One provider as {@link #list()} reports it.
     *
     * @param implementation the provider's class name
     */
    public record ProviderStatus(String name, String deviceType, int priority, Availability availability,
                                 String implementation) {

        static ProviderStatus of(DeviceCommunicatorProvider p) {
            return new ProviderStatus(p.name(), p.deviceType(), p.priority(), availabilityOf(p), p.getClass().getName());
        }

        @Override
        public String toString() {
            return String.format(Locale.ROOT, "%-16s %-10s priority %4d  %s", name, deviceType, priority, availability);
        }
    }
}
