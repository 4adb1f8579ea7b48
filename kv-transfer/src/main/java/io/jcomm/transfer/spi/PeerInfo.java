package io.jcomm.transfer.spi;

import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * What an agent published about itself in the store: its name, host identity, and one endpoint per
 * transport (opaque bytes that transport's {@link Transport#endpoint()} made).
 *
 * @param name      the agent's name
 * @param hostId    its {@link io.jcomm.api.HostIdentity}
 * @param endpoints endpoint bytes by transport name
 */
public record PeerInfo(String name, String hostId, Map<String, byte[]> endpoints) {

    public PeerInfo {
        Objects.requireNonNull(name, "name");
        Objects.requireNonNull(hostId, "hostId");
        endpoints = Map.copyOf(endpoints);
    }

    /** The endpoint of {@code transport}, if the peer has one (a copy). */
    public Optional<byte[]> endpoint(String transport) {
        return Optional.ofNullable(endpoints.get(transport)).map(byte[]::clone);
    }
}
