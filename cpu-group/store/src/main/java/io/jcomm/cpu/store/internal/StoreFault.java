package io.jcomm.cpu.store.internal;

/**
 * A request the server refuses: malformed or oversized input, an unknown command, a GET of a
 * missing key, ADD on a non-integer value, a full store. The server closes only the offending
 * connection and logs the message. Stackless: faults are expected input, not bugs.
 */
public final class StoreFault extends RuntimeException {

    private static final long serialVersionUID = 1L;

    public StoreFault(String message) {
        super(message, null, false, false);
    }
}
