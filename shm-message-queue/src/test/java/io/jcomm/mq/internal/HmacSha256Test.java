package io.jcomm.mq.internal;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.Random;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

class HmacSha256Test {

    private static byte[] jdk(byte[] key, byte[] msg) throws Exception {
        Mac m = Mac.getInstance("HmacSHA256");
        m.init(new SecretKeySpec(key, "HmacSHA256"));
        return m.doFinal(msg);
    }

    @Test
    void matchesTheJdkOnHeapAndDirectBuffersInPieces() throws Exception {
        Random rnd = new Random(42);
        for (int keyLen : new int[] {1, 32, 64, 65, 200}) {
            for (int len : new int[] {0, 1, 55, 64, 4095, 4096, 10_000}) {
                byte[] key = new byte[keyLen];
                byte[] msg = new byte[len];
                rnd.nextBytes(key);
                rnd.nextBytes(msg);
                byte[] expected = jdk(key, msg);
                HmacSha256 h = new HmacSha256(key);
                UnsafeBuffer direct = new UnsafeBuffer(ByteBuffer.allocateDirect(len + 64));
                direct.putBytes(7, msg);
                int half = len / 3;
                h.update(direct, 7, half);
                h.update(new UnsafeBuffer(msg), half, len - half);
                byte[] tag = new byte[32];
                h.finish(tag, 0);
                assertArrayEquals(expected, tag, "key " + keyLen + " len " + len);
                // reusable: the same instance again, heap only
                h.update(msg, 0, len);
                UnsafeBuffer out = new UnsafeBuffer(new byte[40]);
                h.finish(out, 8);
                byte[] tag2 = new byte[32];
                out.getBytes(8, tag2);
                assertArrayEquals(expected, tag2);
            }
        }
    }

    @Test
    void verifyDetectsATamperedMessageOrTag() {
        byte[] key = new byte[32];
        HmacSha256 h = new HmacSha256(key);
        UnsafeBuffer b = new UnsafeBuffer(new byte[64]);
        b.putLong(0, 123456789L);
        h.update(b, 0, 32);
        h.finish(b, 32);
        h.update(b, 0, 32);
        assertTrue(h.verify(b, 32));
        b.putByte(3, (byte) 1);
        h.update(b, 0, 32);
        assertFalse(h.verify(b, 32));
        b.putByte(3, (byte) 0);
        b.putByte(40, (byte) (b.getByte(40) ^ 1));
        h.update(b, 0, 32);
        assertFalse(h.verify(b, 32));
        HmacSha256 other = new HmacSha256(new byte[] {1});
        b.putByte(40, (byte) (b.getByte(40) ^ 1));
        other.update(b, 0, 32);
        assertFalse(other.verify(b, 32));
    }
}
