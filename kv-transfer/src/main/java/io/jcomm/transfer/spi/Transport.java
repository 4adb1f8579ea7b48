package io.jcomm.transfer.spi;

import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.UnsupportedByBackendException;
import io.jcomm.transfer.RemoteDescriptor;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * One agent's instance of a transport. Thread safe: the agent calls it from any thread.
 *
 * <p>Contract of the transfer methods: they do not block beyond a bounded hand-off (a shared-memory
 * copy may be done in the calling thread); the returned future completes when the transport is done
 * with every local buffer (so the agent may release them) and fails with a typed
 * {@link io.jcomm.api.CommException}: {@link io.jcomm.transfer.TransferRefusedException} when the
 * owner refused (nothing written), {@link io.jcomm.api.PeerFailureException} when the peer died or its
 * connection broke, {@link io.jcomm.api.CommTimeoutException} when the deadline passed (the transport
 * enforces it, within tens of milliseconds). The owner side checks every request against the
 * regions of {@link TransportContext#acquire}.
 */
public interface Transport extends AutoCloseable {

    /** The provider's name. */
    String name();

    /** What a peer needs to reach this agent through this transport (at most 1 KiB), published in the store. */
    byte[] endpoint();

    /** Whether this transport can carry a transfer between this agent and {@code remote} of {@code peer}. */
    boolean reaches(PeerInfo peer, RemoteDescriptor remote);

    /** Whether {@link #write} can deliver a notification with the data, and {@link #notify} exists. */
    boolean carriesNotifications();

    /**
     * Copies each segment's local bytes into its remote range, then (if {@code notification} is not
     * null) delivers the notification after all of the data.
     */
    CompletableFuture<Void> write(PeerInfo peer, List<Segment> segments, byte[] notification, Deadline deadline);

    /** Copies each segment's remote range into its local bytes. */
    CompletableFuture<Void> read(PeerInfo peer, List<Segment> segments, Deadline deadline);

    /** Delivers a notification alone. */
    default CompletableFuture<Void> notify(PeerInfo peer, byte[] notification, Deadline deadline) {
        return CompletableFuture.failedFuture(new UnsupportedByBackendException(
                OpContext.of("transfer", -1, "notify"), name(), "notify"));
    }

    /** Drops connections and mappings to {@code agent} (it failed or went away); in-flight transfers to it fail. */
    void forget(String agent);

    /** Stops serving, fails what is in flight with {@link io.jcomm.api.CommClosedException}. Idempotent. */
    @Override
    void close();
}
