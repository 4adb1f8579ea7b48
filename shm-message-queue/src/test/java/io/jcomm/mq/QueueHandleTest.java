package io.jcomm.mq;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.jcomm.api.ProtocolException;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The queue handle's bytes: exact round trips; truncated, padded, lying and random bytes refused. */
class QueueHandleTest {

    private static QueueHandle remote() {
        byte[] key = new byte[32];
        Arrays.fill(key, (byte) 7);
        return new QueueHandle(0x1234_5678_9abc_def0L, "tp:\u00e9\u4e2d", 0, "hostA", 11, 12, 13, 14, "10.0.0.1:4000",
                "10.0.0.1:4001", 1 << 16, 1 << 20, key, List.of(1, 2), List.of(3, 65_535));
    }

    @Test
    void handlesRoundTrip() {
        QueueHandle h = remote();
        QueueHandle back = QueueHandle.decode(h.encode());
        assertEquals(h, back);
        assertArrayEquals(h.authKey(), back.authKey());
        assertEquals(List.of(3, 65_535), back.remoteReaders());
        QueueHandle local = new QueueHandle(-1L, "g", 2, "h", 1, 2, 3, 0, null, null, 0, 0, null, List.of(0, 1), List.of());
        assertEquals(local, QueueHandle.decode(local.encode()));
        assertEquals(0, QueueHandle.decode(local.encode()).authKey().length);
    }

    @Test
    void malformedHandlesAreRefused() {
        byte[] b = remote().encode();
        for (int cut = 0; cut < b.length; cut++) {
            byte[] t = Arrays.copyOf(b, cut);
            assertThrows(ProtocolException.class, () -> QueueHandle.decode(t), "truncated at " + cut);
        }
        assertThrows(ProtocolException.class, () -> QueueHandle.decode(Arrays.copyOf(b, b.length + 1)), "trailing byte");
        byte[] kind = b.clone();
        kind[0] = 'P';
        assertThrows(ProtocolException.class, () -> QueueHandle.decode(kind));
        // the group name's length (right after kind and queue id) lies: negative, huge, past the end
        for (int len : new int[] {-1, Integer.MAX_VALUE, b.length}) {
            byte[] lie = b.clone();
            java.nio.ByteBuffer.wrap(lie).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(9, len);
            assertThrows(ProtocolException.class, () -> QueueHandle.decode(lie), "length " + len);
        }
        // a 31-byte key is decoded, then refused by the handle's own checks
        QueueHandle h = remote();
        byte[] good = h.encode();
        int keyAt = good.length - (4 + 32) - (4 + 8) - (4 + 8);
        byte[] shortKey = new byte[good.length - 1];
        System.arraycopy(good, 0, shortKey, 0, keyAt);
        java.nio.ByteBuffer.wrap(shortKey).order(java.nio.ByteOrder.LITTLE_ENDIAN).putInt(keyAt, 31);
        System.arraycopy(good, keyAt + 4, shortKey, keyAt + 4, 31);
        System.arraycopy(good, keyAt + 4 + 32, shortKey, keyAt + 4 + 31, good.length - keyAt - 4 - 32);
        ProtocolException e = assertThrows(ProtocolException.class, () -> QueueHandle.decode(shortKey));
        assertEquals(true, e.getMessage().contains("32 bytes"), e.getMessage());
        Random rnd = new Random(5);
        for (int i = 0; i < 5000; i++) {
            byte[] junk = new byte[rnd.nextInt(120)];
            rnd.nextBytes(junk);
            if (junk.length > 0 && rnd.nextBoolean()) {
                junk[0] = 'H';
            }
            try {
                QueueHandle.decode(junk);
            } catch (ProtocolException expected) {
                // the normal outcome; anything else fails the test
            }
        }
    }
}
