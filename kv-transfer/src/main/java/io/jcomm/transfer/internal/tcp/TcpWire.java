package io.jcomm.transfer.internal.tcp;

import io.jcomm.runtime.TokenProof;
import java.io.EOFException;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;

/**
 * The tcp transport's wire format (little-endian).
 *
 * <pre>
 * handshake  C: HELLO     magic u32, version u32, name (u16 + ASCII), nonce[32], hasToken u8
 *            S: CHALLENGE magic u32, status u32, name (u16 + ASCII), nonce[32], mac[32], detail (u16 + UTF-8)
 *            C: AUTH      magic u32, mac[32]
 *            S: VERDICT   magic u32, status u32
 * request    type u32 (1 write, 2 read, 3 notify, 4 heartbeat), notificationLength u32, requestId u64, regionId u32,
 *            reserved u32, generation u64, offset u64, length u64; notification bytes; for a write the
 *            data (length bytes, at most {@link io.jcomm.transfer.TransferOptions#TCP_CHUNK_BYTES_MAX})
 * response   magic u32, status u32 (0 ok, else a refusal reason), requestId u64, detailLength u32,
 *            reserved u32; detail (UTF-8, at most {@value #MAX_DETAIL}); for a granted read the data
 * </pre>
 */
final class TcpWire {

    static final int HELLO = 0x4f4c4548;
    static final int CHALLENGE = 0x4c414843;
    static final int AUTH = 0x48545541;
    static final int VERDICT = 0x54434456;
    static final int RESPONSE = 0x50534552;
    static final int VERSION = 2;
    static final int WRITE = 1;
    static final int READ = 2;
    static final int NOTIFY = 3;
    static final int PING = 4;
    static final int REQUEST_HEADER = 48;
    static final int RESPONSE_HEADER = 24;
    static final int MAX_DETAIL = 1024;
    static final int MAX_NAME = 256;
    static final int STATUS_OK = 0;

    private TcpWire() {
    }

    /** Fills {@code b} from {@code ch}; false on a clean end of stream before the first byte. */
    static boolean readFully(SocketChannel ch, ByteBuffer b) throws IOException {
        boolean first = true;
        while (b.hasRemaining()) {
            int n = ch.read(b);
            if (n < 0) {
                if (first) {
                    return false;
                }
                throw new EOFException("connection closed mid-message");
            }
            first = false;
        }
        return true;
    }

    static void writeFully(SocketChannel ch, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            ch.write(b);
        }
    }

    /**
     * A side's proof that it holds the job token ({@link TokenProof}): HMAC-SHA256 under
     * {@code "jcomm-transfer/" + role} ({@code client} or {@code server}) over both nonces and both agents'
     * names, so it binds this connection and these two agents; all zeros without a token.
     */
    static byte[] proof(byte[] token, String role, byte[] clientNonce, byte[] serverNonce, String client, String server) {
        if (token == null) {
            return new byte[TokenProof.PROOF_BYTES];
        }
        return TokenProof.proof(token, "jcomm-transfer/" + role, clientNonce, serverNonce,
                client.getBytes(StandardCharsets.US_ASCII), new byte[] {0}, server.getBytes(StandardCharsets.US_ASCII));
    }
}
