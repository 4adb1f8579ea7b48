package io.jcomm.api;

/**
 * The backend under a group does not implement this operation. Every rank of the group gets it at
 * once, without communicating (the same backend refuses the same call everywhere), and the group stays
 * usable: nothing was sent. Operations added to a backend SPI default to this, so that adding one is
 * additive for the backends that do not have it yet.
 */
public class UnsupportedByBackendException extends BackendException {

    private static final long serialVersionUID = 1L;

    private final String backend;
    private final String operation;

    /**
     * @param context   the group, rank and operation ({@link OpContext#NONE} when the backend does not
     *                  know them; the group re-throws it with its own)
     * @param backend   the backend's name, e.g. {@code tcp}
     * @param operation the operation, e.g. {@code allToAll}
     */
    public UnsupportedByBackendException(OpContext context, String backend, String operation) {
        this(context, backend, operation, null);
    }

    /** The same, with a cause (a group re-throwing its backend's refusal with its own context). */
    public UnsupportedByBackendException(OpContext context, String backend, String operation, Throwable cause) {
        super(context, operation + " is not supported by backend " + backend, cause);
        this.backend = backend;
        this.operation = operation;
    }

    /** The backend's name. */
    public String backend() {
        return backend;
    }

    /** The operation it does not support. */
    public String unsupportedOperation() {
        return operation;
    }
}
