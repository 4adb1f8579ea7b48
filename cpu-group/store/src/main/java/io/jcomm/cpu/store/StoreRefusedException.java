package io.jcomm.cpu.store;

import io.jcomm.api.OpContext;
import io.jcomm.api.StoreException;

/**
 * A jcomm store server refused a change and said why: its store is full ({@code maxStoreBytes}), its
 * data file is full ({@code maxDataBytes}) or cannot be written, or an {@code add} met a value that is
 * not an integer. The change was not made; the connection stays usable. Sent instead of closing the
 * connection to clients that tag their changes (a client that rides over restarts, see
 * {@link TcpStoreConfig.Reconnect}); other clients see the connection closed, as with torch's server.
 */
public final class StoreRefusedException extends StoreException {

    private static final long serialVersionUID = 1L;

    public StoreRefusedException(OpContext context, String detail) {
        super(context, detail);
    }
}
