package io.jcomm.mq.internal;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.jcomm.api.ProtocolException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The queue handshake's records: exact round trips, and every malformed or hostile form refused. */
class HandshakeTest {

    @Test
    void recordsRoundTrip() {
        Handshake.Peer p = new Handshake.Peer("host-\u00e9\u4e2d", 123_456_789_012L);
        assertEquals(p, Handshake.decode(Handshake.encode(p), Handshake.Peer.class));
        Handshake.Step ok = Handshake.Step.ok("/dev/shm/jcomm-aeron-x", new byte[] {1, 2, 3});
        Handshake.Step back = Handshake.decode(Handshake.encode(ok), Handshake.Step.class);
        assertEquals(ok.text(), back.text());
        assertEquals("", back.error());
        assertArrayEquals(ok.payload(), back.payload());
        Handshake.Step failed = Handshake.Step.failed(new IllegalStateException("no \u00fcmlaut driver"));
        Handshake.Step f = Handshake.decode(Handshake.encode(failed), Handshake.Step.class);
        assertEquals("IllegalStateException: no \u00fcmlaut driver", f.error());
        assertEquals(0, f.payload().length);
        Handshake.Step big = Handshake.Step.ok("t".repeat(4096), new byte[1 << 20]);
        assertEquals(1 << 20, Handshake.decode(Handshake.encode(big), Handshake.Step.class).payload().length);
        assertThrows(IllegalArgumentException.class, () -> Handshake.encode("a string"));
    }

    @Test
    void malformedRecordsAreRefused() {
        byte[] peer = Handshake.encode(new Handshake.Peer("h", 7));
        byte[] step = Handshake.encode(Handshake.Step.ok("text", new byte[] {9}));
        assertThrows(ProtocolException.class, () -> Handshake.decode(new byte[0], Handshake.Peer.class));
        assertThrows(ProtocolException.class, () -> Handshake.decode(peer, Handshake.Step.class), "kind mismatch");
        assertThrows(ProtocolException.class, () -> Handshake.decode(step, Handshake.Peer.class), "kind mismatch");
        for (int cut = 1; cut < peer.length; cut++) {
            byte[] b = Arrays.copyOf(peer, cut);
            assertThrows(ProtocolException.class, () -> Handshake.decode(b, Handshake.Peer.class), "truncated at " + cut);
        }
        for (int cut = 1; cut < step.length; cut++) {
            byte[] b = Arrays.copyOf(step, cut);
            assertThrows(ProtocolException.class, () -> Handshake.decode(b, Handshake.Step.class), "truncated at " + cut);
        }
        assertThrows(ProtocolException.class, () -> Handshake.decode(Arrays.copyOf(peer, peer.length + 1),
                Handshake.Peer.class), "trailing byte");
        // lengths that lie: negative, beyond what is left, beyond the record's limits (nothing allocated for them)
        ByteBuffer lie = ByteBuffer.allocate(13).order(ByteOrder.LITTLE_ENDIAN).put((byte) 'S').putInt(-1).putInt(0).putInt(0);
        assertThrows(ProtocolException.class, () -> Handshake.decode(lie.array(), Handshake.Step.class));
        ByteBuffer huge = ByteBuffer.allocate(13).order(ByteOrder.LITTLE_ENDIAN).put((byte) 'S').putInt(0).putInt(0)
                .putInt(Integer.MAX_VALUE);
        assertThrows(ProtocolException.class, () -> Handshake.decode(huge.array(), Handshake.Step.class));
        ByteBuffer empty = ByteBuffer.allocate(11).order(ByteOrder.LITTLE_ENDIAN).put((byte) 'P').putShort((short) 0).putLong(1);
        assertThrows(ProtocolException.class, () -> Handshake.decode(empty.array(), Handshake.Peer.class), "empty host id");
        ByteBuffer utf = ByteBuffer.allocate(13).order(ByteOrder.LITTLE_ENDIAN).put((byte) 'P').putShort((short) 2)
                .put((byte) 0xc3).put((byte) 0x28).putLong(1);
        assertThrows(ProtocolException.class, () -> Handshake.decode(utf.array(), Handshake.Peer.class), "bad UTF-8");
        Random rnd = new Random(3);
        for (int i = 0; i < 5000; i++) {
            byte[] junk = new byte[rnd.nextInt(40)];
            rnd.nextBytes(junk);
            try {
                Class<?> type = i % 2 == 0 ? Handshake.Peer.class : Handshake.Step.class;
                Handshake.decode(junk, type);
            } catch (ProtocolException expected) {
                // the normal outcome; anything else fails the test
            }
        }
    }
}
