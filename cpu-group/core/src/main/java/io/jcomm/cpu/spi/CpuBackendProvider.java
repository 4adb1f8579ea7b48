package io.jcomm.cpu.spi;

import io.jcomm.api.spi.Provider;
import io.jcomm.api.Availability;

/**
 * A CPU backend, found with {@link java.util.ServiceLoader} (listed in
 * {@code META-INF/services/io.jcomm.cpu.spi.CpuBackendProvider}) and chosen by {@link #name()}, or
 * automatically by {@link #priority()} among the available ones.
 */
public interface CpuBackendProvider extends Provider {

    /** {@code tcp}, {@code gloo}, ... */
    @Override
    String name();

    /** Preference for automatic choice; higher wins. */
    @Override
    int priority();

    /** Computed once and cached; never throws, never crashes the JVM. */
    @Override
    Availability availability();

    /**
     * The option keys this backend reads, all under {@code name() + "."}; a group made with this backend
     * rejects any other key under that prefix (a typo must not be ignored silently), while keys of other
     * backends are left alone (options may name several backends when {@code auto} chooses). Empty: the
     * provider declares none and nothing is checked.
     */
    default java.util.Optional<java.util.Set<String>> optionKeys() {
        return java.util.Optional.empty();
    }

    /**
     * Creates and connects the backend: collective over the group's members (every member calls it
     * with the same store prefix), bounded by {@code context.timeout()}.
     */
    CpuBackend create(CpuBackendContext context);
}
