package io.jcomm.cpu.spi;

import io.jcomm.api.Availability;

/**
 * A CPU backend, found with {@link java.util.ServiceLoader} (listed in
 * {@code META-INF/services/io.jcomm.cpu.spi.CpuBackendProvider}) and chosen by {@link #name()}, or
 * automatically by {@link #priority()} among the available ones.
 */
public interface CpuBackendProvider {

    /** {@code tcp}, {@code gloo}, ... */
    String name();

    /** Preference for automatic choice; higher wins. */
    int priority();

    /** Computed once and cached; never throws, never crashes the JVM. */
    Availability availability();

    /**
     * Creates and connects the backend: collective over the group's members (every member calls it
     * with the same store prefix), bounded by {@code context.timeout()}.
     */
    CpuBackend create(CpuBackendContext context);
}
