package io.jcomm.api.spi;

import io.jcomm.api.Availability;

/**
 * What every pluggable part of jcomm has in common (CPU backends, device communicators, transfer
 * transports, all-to-all managers): a name to select it by, a priority among those available, and its
 * availability here. Each kind of plug-in is found with {@link java.util.ServiceLoader} and chosen by the one
 * rule of {@code io.jcomm.runtime.Providers}: by name when one is asked for, else the available one
 * with the highest priority (ties by name).
 */
public interface Provider {

    /** The name it is selected by; unique among providers of its kind. */
    String name();

    /** Preference among the available providers of its kind; higher wins. 0 unless a provider says otherwise. */
    default int priority() {
        return 0;
    }

    /**
     * Whether it can work here, with a reason. Computed once and cached; never throws and never leaves a class
     * half-initialised. Available unless a provider says otherwise.
     */
    default Availability availability() {
        return Availability.available("always");
    }
}
