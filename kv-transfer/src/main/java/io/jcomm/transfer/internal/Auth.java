package io.jcomm.transfer.internal;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Mutual authentication with the job token: each side proves it holds the token with an HMAC-SHA256
 * over both nonces and both names, under a role label, so the token never crosses the wire and a
 * proof cannot be replayed to another connection or reflected back.
 */
public final class Auth {

    public static final int NONCE_BYTES = 32;
    public static final int MAC_BYTES = 32;

    private Auth() {
    }

    public static byte[] mac(byte[] token, String role, byte[] clientNonce, byte[] serverNonce, String client, String server) {
        if (token == null) {
            return new byte[MAC_BYTES];
        }
        try {
            Mac m = Mac.getInstance("HmacSHA256");
            m.init(new SecretKeySpec(token, "HmacSHA256"));
            m.update(("jcomm-transfer/" + role).getBytes(StandardCharsets.US_ASCII));
            m.update(clientNonce);
            m.update(serverNonce);
            m.update(client.getBytes(StandardCharsets.US_ASCII));
            m.update((byte) 0);
            m.update(server.getBytes(StandardCharsets.US_ASCII));
            return m.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 unavailable", e);
        }
    }

    public static boolean equal(byte[] a, byte[] b) {
        return MessageDigest.isEqual(a, b);
    }
}
