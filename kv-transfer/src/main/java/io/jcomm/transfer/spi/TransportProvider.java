package io.jcomm.transfer.spi;

import io.jcomm.api.spi.Provider;
import io.jcomm.api.Availability;

/**
 * A transport plug-in of the transfer engine, found with {@link java.util.ServiceLoader} (a
 * {@code META-INF/services/io.jcomm.transfer.spi.TransportProvider} entry): this artifact brings
 * {@code shm} and {@code tcp}; an RDMA or NIXL binding comes as its own artifact.
 *
 * <p>An agent opens every available provider (or those its options name), publishes each
 * transport's {@link Transport#endpoint()} in the store, and for each transfer picks the transport of
 * highest {@link #priority()} that {@link Transport#reaches} the remote range.
 */
public interface TransportProvider extends Provider {

    /** The transport's name, e.g. {@code tcp}: a short {@code [a-z0-9_-]} word, the key of its endpoint. */
    @Override
    String name();

    /** Preference when several transports reach a range: higher first ({@code shm} 100, {@code tcp} 10). */
    @Override
    int priority();

    /** Whether the transport can run in this process, and why (not). Cheap; called once per agent. */
    @Override
    Availability availability();

    /**
     * Opens the transport for one agent: starts listening if it serves remote requests.
     *
     * @throws io.jcomm.api.CommException when it cannot start
     */
    Transport open(TransportContext context);
}
