package io.jcomm.cpu.store.internal;

import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * The job-token challenge-response (a jcomm extension to the TCPStore protocol), mutual and
 * replay-resistant: each side proves knowledge of the token by an HMAC-SHA256 over both sides'
 * fresh random nonces, under a label that differs per direction so that one side's proof can never
 * be replayed as the other's.
 *
 * <pre>
 * C -> S  FA 'J' 'C' 'S' '1' clientNonce[32]
 * S -> C  FA 00 serverNonce[32] HMAC(token, "jcomm-store-server-v1" | clientNonce | serverNonce)
 * C -> S  HMAC(token, "jcomm-store-client-v1" | serverNonce | clientNonce)        (client checked the server first)
 * S -> C  00                      (or FA 01 and close: wrong token)
 * </pre>
 *
 * A server with a token answers anything else as the first bytes with {@code FA 03} and closes; a
 * server without a token answers a hello with {@code FA 02} and closes.
 */
public final class Auth {

    private Auth() {
    }

    public static byte[] nonce(SecureRandom random) {
        byte[] n = new byte[Wire.NONCE_BYTES];
        random.nextBytes(n);
        return n;
    }

    /** HMAC-SHA256(token, label | first | second). */
    public static byte[] mac(byte[] token, String label, byte[] first, byte[] second) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(new SecretKeySpec(token, "HmacSHA256"));
            mac.update(label.getBytes(StandardCharsets.US_ASCII));
            mac.update(first);
            mac.update(second);
            return mac.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 unavailable", e);
        }
    }

    public static byte[] serverProof(byte[] token, byte[] clientNonce, byte[] serverNonce) {
        return mac(token, Wire.SERVER_LABEL, clientNonce, serverNonce);
    }

    public static byte[] clientProof(byte[] token, byte[] clientNonce, byte[] serverNonce) {
        return mac(token, Wire.CLIENT_LABEL, serverNonce, clientNonce);
    }

    /** Constant-time comparison. */
    public static boolean equal(byte[] a, byte[] b) {
        return MessageDigest.isEqual(a, b);
    }
}
