package io.jcomm.transfer;

import java.util.Arrays;
import java.util.Objects;

/**
 * A small message one agent delivered to another, after the data of the write it came with (if
 * any) was in the receiver's memory: how a decode agent learns that a request's blocks arrived.
 *
 * @param from    the sending agent's name
 * @param payload the bytes, at most {@link TransferOptions#maxNotificationBytes()}
 */
public record Notification(String from, byte[] payload) {

    public Notification {
        Objects.requireNonNull(from, "from");
        payload = payload.clone();
    }

    /** A copy of the payload. */
    @Override
    public byte[] payload() {
        return payload.clone();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Notification n && n.from.equals(from) && Arrays.equals(n.payload, payload);
    }

    @Override
    public int hashCode() {
        return from.hashCode() * 31 + Arrays.hashCode(payload);
    }

    @Override
    public String toString() {
        return "Notification[from=" + from + ", " + payload.length + " bytes]";
    }
}
