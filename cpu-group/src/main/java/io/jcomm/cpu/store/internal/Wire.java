package io.jcomm.cpu.store.internal;

import java.nio.charset.StandardCharsets;

/**
 * Constants of the TCPStore wire protocol shared by the server and the client. Integers are
 * little-endian (torch sends host order; every platform torch ships on is little-endian).
 */
public final class Wire {

    /** u32 sent after VALIDATE by torch 2.2+ clients: bytes {@code CE F7 85 3C}. */
    public static final int VALIDATION_MAGIC = 0x3C85F7CE;

    public static final int CHECK_READY = 0;
    public static final int CHECK_NOT_READY = 1;
    public static final int WAIT_STOP_WAITING = 0;
    public static final int WAIT_CANCELED = 1;

    /** torch 1.13 watch notifications (callback connection). */
    public static final int WATCH_KEY_UPDATED = 0;
    public static final int WATCH_KEY_CREATED = 1;
    public static final int WATCH_KEY_DELETED = 2;
    public static final int WATCH_CALLBACK_REGISTERED = 3;

    /**
     * Key of the jcomm capability probe: a CHECK of exactly this one key. A jcomm server answers
     * READY and from then on treats the connection as a jcomm client (2.1 numbering on a legacy
     * connection, commands after a pending WAIT are queued rather than dropping the wait). A torch
     * server answers NOT_READY (no torch client ever sends a key starting with a NUL byte), so the
     * probe is harmless there.
     */
    public static final byte[] PROBE_KEY = "\0jcomm-store/v1".getBytes(StandardCharsets.US_ASCII);

    /** Counter key of torch's {@code world_size} rendezvous (sent without the "/" prefix). */
    public static final byte[] INIT_KEY = "init/".getBytes(StandardCharsets.US_ASCII);

    // ---- job-token handshake (jcomm extension; see TcpStoreServer) ----

    /** First byte of every authentication message; no torch dialect uses this command byte. */
    public static final int AUTH_MARKER = 0xFA;
    /** Client hello: AUTH_MARKER, AUTH_MAGIC (4 bytes), client nonce. */
    public static final byte[] AUTH_MAGIC = {'J', 'C', 'S', '1'};
    public static final int NONCE_BYTES = 32;
    public static final int MAC_BYTES = 32;
    public static final int AUTH_HELLO_BYTES = 1 + 4 + NONCE_BYTES;
    /** Server status after AUTH_MARKER. */
    public static final int AUTH_CHALLENGE = 0;
    public static final int AUTH_REFUSED = 1;
    public static final int AUTH_NOT_CONFIGURED = 2;
    public static final int AUTH_REQUIRED = 3;
    /** Final byte after a good client proof. */
    public static final int AUTH_OK = 0;

    public static final String SERVER_LABEL = "jcomm-store-server-v1";
    public static final String CLIENT_LABEL = "jcomm-store-client-v1";

    private Wire() {
    }
}
