package io.jcomm.api;

/**
 * Turns registered objects into bytes and back, for object collectives and message queues.
 *
 * <p>Contract for implementations: only types registered with the codec are accepted on either
 * side. Encoding a value of a type the codec cannot encode throws {@link IllegalArgumentException}
 * (the caller's value, not a communication failure). Decoding bytes that name an unregistered type,
 * that are malformed, or that decode to a type other than the expected one throws
 * {@link ProtocolException} (the bytes came from a peer) and never instantiates anything else.
 * Java serialization ({@code ObjectInputStream}) is never used. Implementations are thread safe.
 */
public interface ObjectCodec {

    /**
     * Encodes {@code value}.
     *
     * @throws IllegalArgumentException if the value's type is not registered (or cannot be encoded)
     */
    byte[] encode(Object value);

    /**
     * Decodes {@code length} bytes at {@code offset} and checks the result is an instance of
     * {@code expected} (or {@code null}).
     *
     * @throws ProtocolException on malformed input, an unregistered type, or a type mismatch
     * @throws IllegalArgumentException if {@code offset} and {@code length} do not lie within {@code bytes}
     */
    <T> T decode(byte[] bytes, int offset, int length, Class<T> expected);

    default <T> T decode(byte[] bytes, Class<T> expected) {
        return decode(bytes, 0, bytes.length, expected);
    }

    /**
     * A short ASCII summary (at most 200 characters) of what this codec can decode, equal on two ranks
     * exactly when they can read each other's bytes (e.g. a digest of the registered types and their
     * ids); groups compare it across their members when they are made, and fail with a clear error
     * instead of a mysterious decode failure later. Empty: this codec cannot tell, nothing is compared.
     */
    default java.util.Optional<String> fingerprint() {
        return java.util.Optional.empty();
    }

    /** How many types are registered, for that error message (-1: not known). */
    default int registeredTypeCount() {
        return -1;
    }
}
