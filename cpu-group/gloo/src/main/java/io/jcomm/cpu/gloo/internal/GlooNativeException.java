package io.jcomm.cpu.gloo.internal;

/**
 * A failure reported by the JNI glue: what kind it was, the peer it concerns (when the message
 * names a connected peer's address) and gloo's own message. Internal: the backend turns it into a
 * typed {@link io.jcomm.api.CommException} with the group, rank and operation.
 */
public final class GlooNativeException extends RuntimeException {

    private static final long serialVersionUID = 1L;

    /** A connection was closed or reset: a peer failed. */
    public static final int KIND_IO = 1;
    /** gloo timed out waiting for a peer (the context is unusable afterwards). */
    public static final int KIND_TIMEOUT = 2;
    /** gloo::EnforceNotMet: an invariant of gloo failed. */
    public static final int KIND_ENFORCE = 3;
    /** The argument check found ranks calling with inconsistent arguments. */
    public static final int KIND_MISMATCH = 4;
    /** A peer closed the group cleanly (it said goodbye before its connections ended). */
    public static final int KIND_CLOSED = 5;
    /** Any other C++ exception. */
    public static final int KIND_OTHER = 6;
    /** The native side rejected an argument (a bug in the Java validation). */
    public static final int KIND_ARGUMENT = 7;

    private final int kind;
    private final int peerRank;

    public GlooNativeException(int kind, int peerRank, String message) {
        super(message);
        this.kind = kind;
        this.peerRank = peerRank;
    }

    public int kind() {
        return kind;
    }

    /** The peer's rank, or {@code -1} when the message names none. */
    public int peerRank() {
        return peerRank;
    }
}
