package io.jcomm.runtime;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;

/**
 * Reads a job token file the one way every part of jcomm does (the store's clients and server, the transfer
 * agents): the file's bytes without trailing white space, refusing a file larger than the longest token
 * allows before reading it.
 */
public final class TokenFiles {

    /** Shortest job token, in bytes. */
    public static final int MIN_BYTES = 16;
    /** Longest job token, in bytes. */
    public static final int MAX_BYTES = 4096;

    private TokenFiles() {
    }

    /**
     * @return the token, trailing new lines, carriage returns, spaces and tabs removed (not checked for length)
     * @throws IllegalArgumentException if the file is larger than {@link #MAX_BYTES} plus 64 bytes of white space
     * @throws IOException              if it cannot be read
     */
    public static byte[] read(Path file) throws IOException {
        if (Files.size(file) > MAX_BYTES + 64) {
            throw new IllegalArgumentException("job token file " + file + " is larger than " + MAX_BYTES + " bytes");
        }
        byte[] b = Files.readAllBytes(file);
        int n = b.length;
        while (n > 0 && (b[n - 1] == '\n' || b[n - 1] == '\r' || b[n - 1] == ' ' || b[n - 1] == '\t')) {
            n--;
        }
        return Arrays.copyOf(b, n);
    }
}
