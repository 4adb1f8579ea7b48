package io.jcomm.mq.internal;

import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Arrays;
import org.agrona.DirectBuffer;
import org.agrona.MutableDirectBuffer;

/**
 * HMAC-SHA256 (RFC 2104) over Agrona buffers without allocating per message: the JDK's
 * {@code javax.crypto.Mac} allocates in {@code doFinal(byte[], int)} and when fed direct memory, so
 * this class drives two {@link MessageDigest}s directly and copies direct memory through one
 * scratch array. Checked against {@code javax.crypto.Mac} in the tests. Not thread safe.
 */
public final class HmacSha256 {

    /** Tag length in bytes. */
    public static final int LENGTH = 32;
    private static final int BLOCK = 64;
    private static final int SCRATCH = 4096;

    private final MessageDigest inner;
    private final MessageDigest outer;
    private final byte[] ipad = new byte[BLOCK];
    private final byte[] opad = new byte[BLOCK];
    private final byte[] scratch = new byte[SCRATCH];
    private final byte[] innerHash = new byte[LENGTH];
    private final byte[] tag = new byte[LENGTH];
    private final byte[] received = new byte[LENGTH];

    public HmacSha256(byte[] key) {
        try {
            inner = MessageDigest.getInstance("SHA-256");
            outer = MessageDigest.getInstance("SHA-256");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 not available", e);
        }
        byte[] k = key.length > BLOCK ? inner.digest(key) : key;
        for (int i = 0; i < BLOCK; i++) {
            byte b = i < k.length ? k[i] : 0;
            ipad[i] = (byte) (b ^ 0x36);
            opad[i] = (byte) (b ^ 0x5c);
        }
        reset();
    }

    /** Starts a new tag. */
    public void reset() {
        inner.reset();
        inner.update(ipad, 0, BLOCK);
    }

    public void update(byte[] b, int off, int len) {
        inner.update(b, off, len);
    }

    public void update(DirectBuffer buffer, int index, int length) {
        byte[] array = buffer.byteArray();
        if (array != null) {
            inner.update(array, (int) (buffer.addressOffset() - org.agrona.BufferUtil.ARRAY_BASE_OFFSET) + index, length);
            return;
        }
        int done = 0;
        while (done < length) {
            int n = Math.min(SCRATCH, length - done);
            buffer.getBytes(index + done, scratch, 0, n);
            inner.update(scratch, 0, n);
            done += n;
        }
    }

    private void finish() {
        try {
            inner.digest(innerHash, 0, LENGTH);
            outer.reset();
            outer.update(opad, 0, BLOCK);
            outer.update(innerHash, 0, LENGTH);
            outer.digest(tag, 0, LENGTH);
        } catch (java.security.DigestException e) {
            throw new IllegalStateException(e);
        }
        reset();
    }

    /** Writes the tag of everything updated since the last reset to {@code out} and resets. */
    public void finish(MutableDirectBuffer out, int index) {
        finish();
        out.putBytes(index, tag, 0, LENGTH);
    }

    /** Writes the tag to {@code out} and resets. */
    public void finish(byte[] out, int offset) {
        finish();
        System.arraycopy(tag, 0, out, offset, LENGTH);
    }

    /**
     * Compares (in constant time) the tag of everything updated since the last reset with the
     * {@value #LENGTH} bytes at {@code index}, and resets.
     */
    public boolean verify(DirectBuffer buffer, int index) {
        finish();
        buffer.getBytes(index, received, 0, LENGTH);
        boolean ok = MessageDigest.isEqual(tag, received);
        Arrays.fill(received, (byte) 0);
        return ok;
    }
}
