package io.jcomm.api.device;

import io.jcomm.api.Tensor;
import java.util.Objects;

/**
 * One send or receive inside a batched point-to-point call
 * ({@link DeviceCommunicator#batchP2P}), like torch's {@code P2POp}.
 *
 * @param kind   send or receive
 * @param tensor the data (send) or destination (receive)
 * @param peer   the peer's group-local rank
 */
public record P2POp(Kind kind, Tensor tensor, int peer) {

    /** Direction of a {@link P2POp}. */
    public enum Kind { SEND, RECV }

    public P2POp {
        Objects.requireNonNull(kind, "kind");
        Objects.requireNonNull(tensor, "tensor");
    }

    public static P2POp send(Tensor tensor, int peer) {
        return new P2POp(Kind.SEND, tensor, peer);
    }

    public static P2POp recv(Tensor tensor, int peer) {
        return new P2POp(Kind.RECV, tensor, peer);
    }
}
