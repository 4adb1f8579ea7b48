package io.jcomm.transfer;

import io.jcomm.api.OpContext;
import io.jcomm.api.ProtocolException;

/**
 * The owner of a remote region refused a transfer: nothing was written into its memory, and a
 * refused read returned nothing. The {@link #reason()} says why. Raised by the owner's checks (for
 * tcp the owner's process, for shm the header the owner keeps in the shared file), never guessed
 * by the initiator.
 */
public class TransferRefusedException extends ProtocolException {

    private static final long serialVersionUID = 1L;

    /** Why a transfer was refused. */
    public enum Reason {
        /** Offset and length reach outside what the owner registered. */
        OUT_OF_RANGE(1),
        /** The region does not grant the access (a write to a read-only region, or the reverse). */
        PERMISSION(2),
        /** The region was deregistered (or replaced) since the descriptor was made: its generation differs. */
        STALE(3),
        /** The owner's notification queue stayed full past its offer timeout (the data was written). */
        NOTIFICATION_QUEUE_FULL(4),
        /** The request itself was malformed (a length over the bounds of the wire protocol). */
        MALFORMED(5),
        /**
         * The owner's device provider failed to copy between a device region and its host staging buffer
         * (the detail has the library's error); for a write, the device memory may hold part of the bytes.
         */
        DEVICE(6);

        private final int code;

        Reason(int code) {
            this.code = code;
        }

        /** The wire code. */
        public int code() {
            return code;
        }

        /** The reason of wire code {@code code}, {@link #MALFORMED} for an unknown code. */
        public static Reason ofCode(int code) {
            for (Reason r : values()) {
                if (r.code == code) {
                    return r;
                }
            }
            return MALFORMED;
        }
    }

    private final Reason reason;

    public TransferRefusedException(OpContext context, Reason reason, String detail) {
        this(context, reason, detail, null);
    }

    public TransferRefusedException(OpContext context, Reason reason, String detail, Throwable cause) {
        super(context, reason + ": " + detail, cause);
        this.reason = reason;
    }

    /** Why the owner refused. */
    public Reason reason() {
        return reason;
    }
}
