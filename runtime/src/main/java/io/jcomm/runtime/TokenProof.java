package io.jcomm.runtime;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The job token's challenge-response, shared by every jcomm protocol that authenticates a connection (the
 * store, the transfer engine): each side sends a fresh random nonce and proves it holds the token with
 * HMAC-SHA256 over a label and both nonces (and whatever else the protocol binds). The label differs per
 * protocol and direction, so that a proof can be neither replayed to another connection (fresh nonces) nor
 * reflected back to its sender nor carried to another protocol; the token never crosses the wire.
 *
 * <p>Stateless and thread safe.
 */
public final class TokenProof {

    /** Bytes of a nonce. */
    public static final int NONCE_BYTES = 32;
    /** Bytes of a proof (HMAC-SHA256). */
    public static final int PROOF_BYTES = 32;

    private TokenProof() {
    }

    /** A fresh nonce. */
    public static byte[] nonce(SecureRandom random) {
        byte[] n = new byte[NONCE_BYTES];
        random.nextBytes(n);
        return n;
    }

    /** HMAC-SHA256(token, ASCII(label) | parts...). */
    public static byte[] proof(byte[] token, String label, byte[]... parts) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(token, "HmacSHA256"));
            mac.update(label.getBytes(StandardCharsets.US_ASCII));
            for (byte[] p : parts) {
                mac.update(p);
            }
            return mac.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 unavailable", e);
        }
    }

    /** Whether a received proof equals the expected one, in constant time. */
    public static boolean matches(byte[] expected, byte[] received) {
        return MessageDigest.isEqual(expected, received);
    }
}
