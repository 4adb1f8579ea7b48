package io.jcomm.transfer;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.ProtocolException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

@Timeout(value = 60, unit = TimeUnit.SECONDS)
class RemoteDescriptorTest {

    private static final RemoteDescriptor D = new RemoteDescriptor("decode-0", 7, 0x1234_5678_9abcL, MemoryKind.SHARED,
            4096, 1 << 20, EnumSet.of(Permission.WRITE));

    @Test
    void roundTripsEveryField() {
        byte[] b = D.encode();
        RemoteDescriptor d = RemoteDescriptor.decode(b);
        assertEquals(D, d);
        assertArrayEquals(b, d.encode());
        assertEquals(Set.of(Permission.WRITE), d.permissions());
        RemoteDescriptor s = d.slice(100, 200);
        assertEquals(4196, s.offset());
        assertEquals(200, s.length());
        assertThrows(IllegalArgumentException.class, () -> d.slice(1, 1 << 20));
        assertThrows(IllegalArgumentException.class, () -> d.slice(-1, 1));
    }

    @Test
    void everyTruncationAndExtensionIsRefused() {
        byte[] b = D.encode();
        for (int n = 0; n < b.length; n++) {
            byte[] cut = Arrays.copyOf(b, n);
            assertThrows(ProtocolException.class, () -> RemoteDescriptor.decode(cut), "truncated to " + n);
        }
        byte[] longer = Arrays.copyOf(b, b.length + 1);
        assertThrows(ProtocolException.class, () -> RemoteDescriptor.decode(longer));
        assertThrows(ProtocolException.class, () -> RemoteDescriptor.decode(new byte[1 << 20]));
        assertThrows(ProtocolException.class, () -> RemoteDescriptor.decode(null));
    }

    @Test
    void hostileFieldsAreRefusedWithoutAllocating() {
        byte[] b = D.encode();
        int nameEnd = 4 + "decode-0".length();
        assertRefused(b, 0, (byte) 9);                  // version
        assertRefused(b, 1, (byte) 7);                  // kind
        assertRefused(b, 1, (byte) -1);
        assertRefused(b, 2, (byte) 4);                  // unknown permission bit
        assertRefused(b, 2, (byte) 0x80);
        assertRefused(b, 3, (byte) 0);                  // empty name
        assertRefused(b, 3, (byte) 200);                // name longer than the bytes
        assertRefused(b, 3, (byte) 255);
        assertRefused(b, 4, (byte) '/');                // a name character that would escape a store key
        assertRefused(b, 4, (byte) 0);
        ByteBuffer w = ByteBuffer.wrap(b.clone()).order(ByteOrder.LITTLE_ENDIAN);
        assertRefusedBytes(w.duplicate().order(ByteOrder.LITTLE_ENDIAN).putInt(nameEnd, -1).array());          // region id
        assertRefusedBytes(copy(b).putLong(nameEnd + 12, -1).array());                                          // offset
        assertRefusedBytes(copy(b).putLong(nameEnd + 20, Long.MIN_VALUE).array());                             // length
        assertRefusedBytes(copy(b).putLong(nameEnd + 12, Long.MAX_VALUE).putLong(nameEnd + 20, 2).array());   // overflow
    }

    @Test
    void randomBytesNeverEscapeAsAnythingButProtocolException() {
        Random r = new Random(42);
        byte[] good = D.encode();
        int accepted = 0;
        for (int i = 0; i < 200_000; i++) {
            byte[] b;
            if (i % 2 == 0) {
                b = new byte[r.nextInt(200)];
                r.nextBytes(b);
            } else {
                b = good.clone();
                for (int k = 0; k < 1 + r.nextInt(3); k++) {
                    b[r.nextInt(b.length)] = (byte) r.nextInt();
                }
            }
            try {
                RemoteDescriptor d = RemoteDescriptor.decode(b);
                assertTrue(d.offset() >= 0 && d.length() >= 0 && d.offset() + d.length() >= 0 && d.regionId() >= 0);
                assertArrayEquals(b, d.encode());
                accepted++;
            } catch (ProtocolException expected) {
                // refused
            }
        }
        assertTrue(accepted > 0, "some single-byte mutations are valid descriptors");
    }

    private static ByteBuffer copy(byte[] b) {
        return ByteBuffer.wrap(b.clone()).order(ByteOrder.LITTLE_ENDIAN);
    }

    private static void assertRefused(byte[] b, int at, byte v) {
        byte[] c = b.clone();
        c[at] = v;
        assertRefusedBytes(c);
    }

    private static void assertRefusedBytes(byte[] c) {
        assertThrows(ProtocolException.class, () -> RemoteDescriptor.decode(c), Arrays.toString(c));
    }
}
