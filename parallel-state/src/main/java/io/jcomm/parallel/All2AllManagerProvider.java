package io.jcomm.parallel;

import io.jcomm.api.spi.Provider;

/**
 * Service-provider interface for {@link All2AllManager}s, found with {@link java.util.ServiceLoader}
 * (list the class in {@code META-INF/services/io.jcomm.parallel.All2AllManagerProvider}; it needs a
 * public no-argument constructor). Selected by {@link #name()} through
 * {@link ParallelStateOptions#all2allBackend()} or {@code JCOMM_ALL2ALL_BACKEND}; see
 * {@link All2AllManagers}.
 */
public interface All2AllManagerProvider extends Provider {

    /** The name the manager is selected by (unique; lower case, e.g. {@code alltoall}). */
    @Override
    String name();

    /** Makes the manager (once per {@link ParallelState}). */
    All2AllManager create();
}
