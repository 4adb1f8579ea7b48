package io.jcomm.cpu;

import io.jcomm.runtime.Providers;
import io.jcomm.api.Availability;
import io.jcomm.api.BackendException;
import io.jcomm.api.OpContext;
import io.jcomm.cpu.spi.CpuBackendProvider;
import java.util.List;
import java.util.Locale;
import java.util.Optional;
import java.util.ServiceLoader;

/**
 * Finds {@link CpuBackendProvider}s with {@link ServiceLoader} (entries in
 * {@code META-INF/services/io.jcomm.cpu.spi.CpuBackendProvider}) and picks one by name or
 * automatically. Stateless: every call consults the class loader anew (providers cache their own
 * {@link CpuBackendProvider#availability()}).
 */
public final class CpuBackends {

    /** The name that selects the highest-priority available provider. */
    public static final String AUTO = "auto";

    private CpuBackends() {
    }

    /** Every provider visible to this class's class loader, highest priority first. */
    public static List<CpuBackendProvider> providers() {
        return providers(CpuBackends.class.getClassLoader());
    }

    /** Every provider visible to {@code loader}, highest priority first (a broken provider is left out). */
    public static List<CpuBackendProvider> providers(ClassLoader loader) {
        return registry(loader).all();
    }

    private static Providers<CpuBackendProvider> registry(ClassLoader loader) {
        return Providers.load(CpuBackendProvider.class, loader);
    }

    /** The provider called {@code name} (case-insensitive), whether or not it is available. */
    public static Optional<CpuBackendProvider> find(String name) {
        return registry(CpuBackends.class.getClassLoader()).named(name);
    }

    /**
     * The provider to use for {@code name}: {@value #AUTO} picks the available provider with the highest
     * priority; any other name must be present and available.
     *
     * @throws BackendException naming the provider and the reason it cannot be used (or listing the
     *                          known providers and their availability)
     */
    public static CpuBackendProvider select(String name) {
        Providers<CpuBackendProvider> all = registry(CpuBackends.class.getClassLoader());
        String n = name.trim().toLowerCase(Locale.ROOT);
        if (n.equals(AUTO)) {
            return all.best(p -> true).orElseThrow(() -> new BackendException(OpContext.of("?", -1, "selectBackend"),
                    "no CPU backend is available: " + all.describe(p -> true)));
        }
        Optional<CpuBackendProvider> named = all.named(n);
        if (named.isPresent()) {
            Availability a = Providers.availabilityOf(named.get());
            if (!a.available()) {
                throw new BackendException(OpContext.of("?", -1, "selectBackend"),
                        "CPU backend '" + named.get().name() + "' is unavailable: " + a.reason());
            }
            return named.get();
        }
        String hint = n.equals("gloo") ? " (the gloo backend is its own artifact: add io.jcomm:cpu-group-gloo to the "
                + "class path)" : "";
        throw new BackendException(OpContext.of("?", -1, "selectBackend"),
                "unknown CPU backend '" + name + "'" + hint + "; known: " + all.describe(p -> true));
    }

    /** One entry per provider: name, priority and availability. */
    public static String describe(List<CpuBackendProvider> providers) {
        return Providers.of(providers).describe(p -> true);
    }

    /**
     * Rejects a key under {@code provider}'s prefix ({@code name + "."}) that the provider does not
     * declare ({@link CpuBackendProvider#optionKeys()}), naming the known ones; other keys pass.
     *
     * @throws IllegalArgumentException on an unknown key of this backend
     */
    public static void checkOptions(CpuBackendProvider provider, java.util.Map<String, String> options) {
        java.util.Optional<java.util.Set<String>> known = provider.optionKeys();
        if (known.isEmpty()) {
            return;
        }
        String prefix = provider.name().toLowerCase(Locale.ROOT) + ".";
        for (String key : options.keySet()) {
            if (key.toLowerCase(Locale.ROOT).startsWith(prefix) && !known.get().contains(key)) {
                throw new IllegalArgumentException("unknown option '" + key + "' of CPU backend " + provider.name()
                        + "; known: " + new java.util.TreeSet<>(known.get()));
            }
        }
    }
}
