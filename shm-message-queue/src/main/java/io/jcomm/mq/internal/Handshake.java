package io.jcomm.mq.internal;

import io.jcomm.api.ProtocolException;
import java.nio.ByteBuffer;

/**
 * Records exchanged over the CPU group while a queue is created, carried as {@code byte[]} so that
 * the application's codec needs no registration for them. Encoded with {@link Wire}: a {@link Peer} is
 * {@code 'P'}, the host id and the pid (i64); a {@link Step} is {@code 'S'}, the error, the text and the
 * payload. Decoding checks every length before it allocates, then the records' own checks apply; every
 * violation is a {@link ProtocolException}. (They were Fory records; making Fory costs a cold JVM about
 * 0.6 s of CPU, which creating a queue no longer pays.)
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

    private static final byte PEER = 'P';
    private static final byte STEP = 'S';
    /** Longest UTF-8 form of the records' strings (3 bytes per char of Java's UTF-16). */
    private static final int MAX_HOST_BYTES = 3 * 512;
    private static final int MAX_ERROR_BYTES = 3 * 8192;
    private static final int MAX_TEXT_BYTES = 3 * 4096;
    private static final int MAX_PAYLOAD_BYTES = 1 << 20;

    private Handshake() {
    }

    /** The bytes of a {@link Peer} or a {@link Step}. */
    public static byte[] encode(Object record) {
        if (record instanceof Peer p) {
            byte[] host = Wire.utf8(p.hostId());
            return Wire.put(Wire.out(PEER, 4 + host.length + 8), host).putLong(p.pid()).array();
        }
        if (record instanceof Step st) {
            byte[] error = Wire.utf8(st.error());
            byte[] text = Wire.utf8(st.text());
            byte[] payload = st.payload();
            ByteBuffer out = Wire.out(STEP, 12 + error.length + text.length + payload.length);
            return Wire.put(Wire.put(Wire.put(out, error), text), payload).array();
        }
        throw new IllegalArgumentException("not a handshake record: " + (record == null ? "null" : record.getClass().getName()));
    }

    /** The record of type {@code type} ({@link Peer} or {@link Step}) in {@code bytes}; {@link ProtocolException} for anything else. */
    public static <T> T decode(byte[] bytes, Class<T> type) {
        if (type == Peer.class) {
            return type.cast(Wire.read(bytes, PEER, "handshake peer", in -> new Peer(
                    Wire.string(in, MAX_HOST_BYTES, "host id"), in.getLong())));
        }
        if (type == Step.class) {
            return type.cast(Wire.read(bytes, STEP, "handshake step", in -> new Step(
                    Wire.string(in, MAX_ERROR_BYTES, "error"), Wire.string(in, MAX_TEXT_BYTES, "text"),
                    Wire.bytes(in, MAX_PAYLOAD_BYTES, "payload"))));
        }
        throw new IllegalArgumentException("not a handshake record type: " + type.getName());
    }
}
