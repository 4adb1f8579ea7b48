package io.jcomm.transfer;

/** Where registered memory lives; it decides which transports can reach it. */
public enum MemoryKind {
    /** A Java heap buffer ({@code ByteBuffer.wrap}); reached over tcp. */
    HEAP(0),
    /** A direct buffer (e.g. a host {@link io.jcomm.api.Tensor}); reached over tcp. */
    OFF_HEAP(1),
    /**
     * A shared-memory file made by {@link TransferAgent#allocateShared}: an agent on the same host
     * copies straight into or out of it (shm transport); other hosts reach it over tcp.
     */
    SHARED(2),
    /**
     * A device tensor registered through its device provider's {@link io.jcomm.api.device.DeviceMemory}
     * ({@link TransferAgent#register(io.jcomm.api.Tensor, java.util.Set)}); reached over tcp, its bytes pass
     * through a host staging buffer of the same size that the agent keeps.
     */
    DEVICE(3);

    private final int code;

    MemoryKind(int code) {
        this.code = code;
    }

    /** The wire code. */
    public int code() {
        return code;
    }

    /** The kind of wire code {@code code}, or null if there is none. */
    public static MemoryKind ofCode(int code) {
        for (MemoryKind k : values()) {
            if (k.code == code) {
                return k;
            }
        }
        return null;
    }
}
