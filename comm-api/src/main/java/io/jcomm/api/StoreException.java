package io.jcomm.api;

/**
 * The rendezvous {@link io.jcomm.api.store.Store} failed: connection lost, server refused, or a
 * reply that does not follow the protocol.
 */
public class StoreException extends CommException {

    private static final long serialVersionUID = 1L;

    public StoreException(OpContext context, String detail, Throwable cause) {
        super(context, detail, cause);
    }

    public StoreException(OpContext context, String detail) {
        super(context, detail, null);
    }

    public StoreException(String detail) {
        super(OpContext.NONE, detail, null);
    }
}
