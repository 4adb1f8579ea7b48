package io.jcomm.mq.internal;

import io.jcomm.api.ProtocolException;
import io.jcomm.cpu.codec.ForyCodec;

/**
 * Records exchanged over the CPU group while a queue is created, encoded with the queue's own
 * registered Fory codec and carried as {@code byte[]} so that the application's codec needs no
 * registration for them.
 */
public final class Handshake {

    /** Who a rank is: its host id and pid. */
    public record Peer(String hostId, long pid) {
        public Peer {
            if (hostId == null || hostId.isEmpty() || hostId.length() > 512) {
                throw new ProtocolException("invalid host id");
            }
        }
    }

    /**
     * One step's outcome on one rank: an error (empty if none), a text value (e.g. a directory) and
     * a binary value (e.g. an encoded handle).
     */
    public record Step(String error, String text, byte[] payload) {
        public Step {
            error = error == null ? "" : error;
            text = text == null ? "" : text;
            payload = payload == null ? new byte[0] : payload;
            if (error.length() > 8192 || text.length() > 4096 || payload.length > (1 << 20)) {
                throw new ProtocolException("handshake step too large");
            }
        }

        public static Step ok(String text, byte[] payload) {
            return new Step("", text, payload);
        }

        public static Step failed(Throwable t) {
            String m = t.getMessage();
            return new Step(t.getClass().getSimpleName() + ": " + (m == null ? "" : m), "", null);
        }

        public boolean isError() {
            return !error.isEmpty();
        }
    }

    private static final ForyCodec CODEC = ForyCodec.builder().register(Peer.class, Step.class).build();

    private Handshake() {
    }

    public static byte[] encode(Object record) {
        return CODEC.encode(record);
    }

    public static <T> T decode(byte[] bytes, Class<T> type) {
        T v = CODEC.decode(bytes, type);
        if (v == null) {
            throw new ProtocolException("empty handshake record");
        }
        return v;
    }
}
