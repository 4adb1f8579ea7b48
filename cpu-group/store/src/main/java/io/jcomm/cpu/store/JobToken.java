package io.jcomm.cpu.store;

import io.jcomm.api.StoreException;
import java.io.IOException;
import java.nio.file.Path;
import java.security.SecureRandom;
import java.util.HexFormat;

/**
 * Reads and makes job tokens: the shared secret with which a {@link TcpStoreServer} authenticates
 * its clients (and they it). A token file holds the token as text or bytes; trailing white space
 * (a final newline) is ignored. Tokens must be 16 to 4096 bytes long.
 */
public final class JobToken {

    public static final int MIN_BYTES = io.jcomm.runtime.TokenFiles.MIN_BYTES;
    public static final int MAX_BYTES = io.jcomm.runtime.TokenFiles.MAX_BYTES;

    private JobToken() {
    }

    /**
     * Reads a token file.
     *
     * @throws StoreException when the file cannot be read or the token is too short or too long
     */
    public static byte[] read(Path file) {
        byte[] b;
        try {
            b = io.jcomm.runtime.TokenFiles.read(file);
        } catch (IllegalArgumentException e) {
            throw new StoreException(e.getMessage());
        } catch (IOException e) {
            throw new StoreException(io.jcomm.api.OpContext.of("store", -1, "readToken"),
                    "cannot read job token file " + file + ": " + e, e);
        }
        return check(b, "job token file " + file);
    }

    /** Validates a token given in code. Returns a copy. */
    public static byte[] check(byte[] token, String what) {
        if (token.length < MIN_BYTES || token.length > MAX_BYTES) {
            throw new StoreException(what + ": a job token must have " + MIN_BYTES + ".." + MAX_BYTES
                    + " bytes, got " + token.length);
        }
        return token.clone();
    }

    /** A fresh random token: 32 random bytes as 64 hex characters. */
    public static String generate() {
        byte[] b = new byte[32];
        new SecureRandom().nextBytes(b);
        return HexFormat.of().formatHex(b);
    }
}
