package io.jcomm.cpu.store.internal;

import io.jcomm.runtime.TokenProof;
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

    // ---- member liveness (jcomm extension; only on connections that passed the probe) ----

    /**
     * Member declaration: a CHECK of exactly three keys, this one first, then the job id (1 to
     * {@link io.jcomm.api.DistributedConfig#MAX_JOB_ID_BYTES} bytes of UTF-8 without control
     * characters) and the rank (4 bytes, u32 little-endian, at most {@link Integer#MAX_VALUE}). A jcomm
     * server answers READY and from then on treats an end of the connection without a goodbye as the
     * death of that rank of that job. Sent only after the probe was answered READY, so a torch server
     * never sees it (a torch server would answer NOT_READY, as an older jcomm server does).
     */
    public static final byte[] MEMBER_KEY = "\0jcomm-member/v1".getBytes(StandardCharsets.US_ASCII);

    /**
     * Goodbye: a CHECK of exactly this one key, the last thing a declared client sends before it
     * closes the connection on purpose. No reply. The server also recognises it at the end of the
     * unprocessed input when the connection ends (a goodbye held behind a pending WAIT).
     */
    public static final byte[] GOODBYE_KEY = "\0jcomm-goodbye/v1".getBytes(StandardCharsets.US_ASCII);

    /**
     * Dead ranks: a CHECK of exactly this one key on a declared connection is answered with a u32 count
     * and that many i32 ranks, little-endian: every rank of the connection's job that left without a
     * goodbye so far, sorted (an undeclared jcomm connection gets a count of 0).
     */
    public static final byte[] DEAD_KEY = "\0jcomm-dead/v1".getBytes(StandardCharsets.US_ASCII);

    /** Length of the rank field of a member declaration. */
    public static final int MEMBER_RANK_BYTES = 4;

    /**
     * Reply to a WAIT of a declared client, in place of STOP_WAITING, when a rank of its job left
     * without a goodbye and a key of the WAIT is missing: this byte, then the dead rank as u32
     * little-endian; then the server closes the connection. Only a declared client ever receives it.
     */
    public static final int WAIT_MEMBER_FAILED = 0xFD;

    /** The goodbye frame in {@code numbering} (CHECK, one key). */
    public static byte[] goodbyeFrame(Numbering numbering) {
        byte[] f = new byte[1 + 8 + 8 + GOODBYE_KEY.length];
        f[0] = (byte) numbering.code(Op.CHECK);
        f[1] = 1;
        f[9] = (byte) GOODBYE_KEY.length;
        System.arraycopy(GOODBYE_KEY, 0, f, 17, GOODBYE_KEY.length);
        return f;
    }

    // ---- durable stores and request ids (jcomm extension; only on connections that passed the probe) ----

    /**
     * Durability query: a CHECK of exactly this one key is answered {@link #CHECK_READY} by a server
     * that keeps its keys in a data directory (they survive its restart), {@link #DURABLE_NO} by one
     * that keeps them in memory only; both understand request ids ({@link #REQUEST_KEY}). An older
     * jcomm server or a torch server answers NOT_READY: no request ids (so does a server whose
     * {@code maxKeyBytes} is below {@link #REQUEST_ID_BYTES}).
     */
    public static final byte[] DURABLE_KEY = "\0jcomm-dur/v1".getBytes(StandardCharsets.US_ASCII);

    /** Reply to the durability query of a server in memory only that understands request ids. */
    public static final int DURABLE_NO = 2;

    /**
     * Request id: a CHECK of exactly two keys, this one first, then {@link #REQUEST_ID_BYTES} bytes
     * (a 16-byte client id and a u64 little-endian sequence number). No reply of its own; the next
     * command must be a change (SET, ADD, COMPARE_SET, DELETE_KEY, APPEND, MULTI_SET), and its reply is
     * preceded by a status byte: {@link #REQUEST_OK} then the command's usual reply (none for SET,
     * APPEND and MULTI_SET), or {@link #REQUEST_REFUSED}, a u32 length and that many bytes of UTF-8 (at
     * most {@link #MAX_REFUSAL_BYTES}) saying why the change was not made; the connection stays open.
     * A request id whose change the server made already (a retry after a lost reply) is answered with
     * the first outcome and not applied again.
     */
    public static final byte[] REQUEST_KEY = "\0jcomm-req/v1".getBytes(StandardCharsets.US_ASCII);

    public static final int REQUEST_ID_BYTES = 16 + 8;
    public static final int REQUEST_OK = 0;
    public static final int REQUEST_REFUSED = 0xFE;
    public static final int MAX_REFUSAL_BYTES = 4096;

    /** Counter key of torch's {@code world_size} rendezvous (sent without the "/" prefix). */
    public static final byte[] INIT_KEY = "init/".getBytes(StandardCharsets.US_ASCII);

    // ---- job-token handshake (jcomm extension; see TcpStoreServer) ----

    /** First byte of every authentication message; no torch dialect uses this command byte. */
    public static final int AUTH_MARKER = 0xFA;
    /** Client hello: AUTH_MARKER, AUTH_MAGIC (4 bytes), client nonce. */
    public static final byte[] AUTH_MAGIC = {'J', 'C', 'S', '1'};
    public static final int NONCE_BYTES = TokenProof.NONCE_BYTES;
    public static final int MAC_BYTES = TokenProof.PROOF_BYTES;
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

    /*
     * The job-token challenge-response (a jcomm extension to the TCPStore protocol, TokenProof), mutual and
     * replay-resistant, with a label per direction:
     *
     * C -> S  FA 'J' 'C' 'S' '1' clientNonce[32]
     * S -> C  FA 00 serverNonce[32] HMAC(token, "jcomm-store-server-v1" | clientNonce | serverNonce)
     * C -> S  HMAC(token, "jcomm-store-client-v1" | serverNonce | clientNonce)   (the client checked the server first)
     * S -> C  00                      (or FA 01 and close: wrong token)
     *
     * A server with a token answers anything else as the first bytes with FA 03 and closes; a server without
     * a token answers a hello with FA 02 and closes.
     */

    /** The server's proof. */
    public static byte[] serverProof(byte[] token, byte[] clientNonce, byte[] serverNonce) {
        return TokenProof.proof(token, SERVER_LABEL, clientNonce, serverNonce);
    }

    /** The client's proof. */
    public static byte[] clientProof(byte[] token, byte[] clientNonce, byte[] serverNonce) {
        return TokenProof.proof(token, CLIENT_LABEL, serverNonce, clientNonce);
    }

    private Wire() {
    }
}
