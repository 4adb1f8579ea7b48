package io.jcomm.mq.internal;

import static io.jcomm.mq.internal.Frames.BEGIN;
import static io.jcomm.mq.internal.Frames.END;
import static io.jcomm.mq.internal.Frames.HEADER_LENGTH;
import static io.jcomm.mq.internal.Frames.MAC;
import static io.jcomm.mq.internal.Frames.OBJECT;
import static java.nio.ByteOrder.LITTLE_ENDIAN;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.OpContext;
import io.jcomm.api.ProtocolException;
import java.util.Random;
import org.agrona.concurrent.UnsafeBuffer;
import org.junit.jupiter.api.Test;

class MessageAssemblerTest {

    private static final byte[] KEY = new byte[32];

    /** Builds frames exactly as the writer does. */
    private static final class Frames {
        final HmacSha256 mac;
        Frames(boolean authenticated) {
            mac = authenticated ? new HmacSha256(KEY) : null;
        }

        UnsafeBuffer frame(byte type, int flags, int total, long seq, int off, byte[] chunk) {
            boolean end = (flags & END) != 0;
            int len = HEADER_LENGTH + chunk.length + (mac != null && end ? 32 : 0);
            UnsafeBuffer b = new UnsafeBuffer(new byte[len + 16]);
            int o = 8; // not at offset 0, like in a term buffer
            UnsafeBuffer f = new UnsafeBuffer(b, o, len);
            f.putByte(0, type);
            f.putByte(1, (byte) (flags | (mac != null ? MAC : 0)));
            f.putShort(2, io.jcomm.mq.internal.Frames.VERSION, LITTLE_ENDIAN);
            f.putInt(4, total, LITTLE_ENDIAN);
            f.putLong(8, seq, LITTLE_ENDIAN);
            f.putInt(16, off, LITTLE_ENDIAN);
            f.putInt(20, chunk.length, LITTLE_ENDIAN);
            f.putBytes(HEADER_LENGTH, chunk);
            if (mac != null) {
                if ((flags & BEGIN) != 0) {
                    mac.reset();
                }
                mac.update(f, 0, HEADER_LENGTH + chunk.length);
                if (end) {
                    mac.finish(f, HEADER_LENGTH + chunk.length);
                }
            }
            return f;
        }
    }

    private static MessageAssembler assembler(int max, boolean mac) {
        return new MessageAssembler(OpContext.of("g", 1, "dequeue"), max, mac ? new HmacSha256(KEY) : null);
    }

    private static int feed(MessageAssembler a, UnsafeBuffer f) {
        return a.onFrame(f, 0, f.capacity());
    }

    private static byte[] bytes(int n, int seed) {
        byte[] b = new byte[n];
        new Random(seed).nextBytes(b);
        return b;
    }

    @Test
    void singleFrameMessagesAreExposedInPlace() {
        for (boolean mac : new boolean[] {false, true}) {
            Frames w = new Frames(mac);
            MessageAssembler a = assembler(1000, mac);
            byte[] p = bytes(100, 1);
            UnsafeBuffer f = w.frame(io.jcomm.mq.internal.Frames.DATA, BEGIN | END | OBJECT, 100, 1, 0, p);
            assertEquals(MessageAssembler.MESSAGE, feed(a, f));
            assertTrue(a.inPlace());
            assertTrue(a.isObject());
            assertEquals(1, a.sequence());
            byte[] got = new byte[100];
            a.message().getBytes(0, got);
            assertArrayEquals(p, got);
            assertEquals(f.addressOffset() + HEADER_LENGTH, a.message().addressOffset(), "not a copy");
            assertEquals(0, a.capacity());
            // empty message
            assertEquals(MessageAssembler.MESSAGE, feed(a, w.frame(io.jcomm.mq.internal.Frames.DATA, BEGIN | END, 0, 2, 0, new byte[0])));
            assertEquals(0, a.message().capacity());
            assertFalse(a.isObject());
        }
    }

    @Test
    void multiFrameMessagesAreReassembledIntoOneReusedBuffer() {
        for (boolean mac : new boolean[] {false, true}) {
            Frames w = new Frames(mac);
            MessageAssembler a = assembler(1 << 20, mac);
            for (long seq = 1; seq <= 3; seq++) {
                byte[] p = bytes(250_000, (int) seq);
                int chunk = 65_000;
                for (int off = 0; off < p.length; off += chunk) {
                    int n = Math.min(chunk, p.length - off);
                    byte[] c = new byte[n];
                    System.arraycopy(p, off, c, 0, n);
                    int flags = (off == 0 ? BEGIN : 0) | (off + n == p.length ? END : 0);
                    int r = feed(a, w.frame(io.jcomm.mq.internal.Frames.DATA, flags, p.length, seq, off, c));
                    assertEquals(off + n == p.length ? MessageAssembler.MESSAGE : MessageAssembler.INCOMPLETE, r);
                }
                assertFalse(a.inPlace());
                byte[] got = new byte[p.length];
                a.message().getBytes(0, got);
                assertArrayEquals(p, got);
                assertEquals(250_000, a.capacity(), "buffer grown once, then reused");
            }
        }
    }

    private static void assertBad(MessageAssembler a, UnsafeBuffer f, String fragment) {
        ProtocolException e = assertThrows(ProtocolException.class, () -> feed(a, f));
        assertTrue(e.getMessage().contains(fragment), e.getMessage());
        assertTrue(e.getMessage().contains("group=g rank=1"), e.getMessage());
    }

    @Test
    void garbageIsRejectedBeforeAnythingIsAllocated() {
        Frames w = new Frames(false);
        byte data = io.jcomm.mq.internal.Frames.DATA;
        assertBad(assembler(1000, false), new UnsafeBuffer(new byte[10]), "shorter than the 24-byte header");
        UnsafeBuffer junk = new UnsafeBuffer(bytes(64, 7));
        assertThrows(ProtocolException.class, () -> feed(assembler(1000, false), junk));
        UnsafeBuffer v = w.frame(data, BEGIN | END, 1, 1, 0, new byte[1]);
        v.putShort(2, (short) 99, LITTLE_ENDIAN);
        assertBad(assembler(1000, false), v, "version 99");
        assertBad(assembler(1000, false), w.frame((byte) 77, BEGIN | END, 1, 1, 0, new byte[1]), "unknown frame type 77");
        MessageAssembler huge = assembler(1000, false);
        assertBad(huge, w.frame(data, BEGIN, Integer.MAX_VALUE, 1, 0, new byte[10]), "exceeds the maximum of 1000");
        assertEquals(0, huge.capacity(), "nothing allocated for an oversized announcement");
        assertBad(assembler(1000, false), w.frame(data, BEGIN, -5, 1, 0, new byte[10]), "exceeds the maximum");
        assertBad(assembler(1000, false), w.frame(data, BEGIN | END, 1, 5, 0, new byte[1]), "sequence 5 out of order, expected 1");
        assertBad(assembler(1000, false), w.frame(data, END, 10, 1, 5, new byte[5]), "without its first chunk");
        UnsafeBuffer lying = w.frame(data, BEGIN | END, 4, 1, 0, new byte[4]);
        lying.putInt(20, 1000, LITTLE_ENDIAN);
        assertBad(assembler(1000, false), lying, "does not match the frame length");
        MessageAssembler gap = assembler(1000, false);
        feed(gap, w.frame(data, BEGIN, 100, 1, 0, new byte[50]));
        assertBad(gap, w.frame(data, END, 100, 1, 60, new byte[40]), "does not continue message 1 at 50");
        MessageAssembler overlong = assembler(1000, false);
        feed(overlong, w.frame(data, BEGIN, 100, 1, 0, new byte[50]));
        assertBad(overlong, w.frame(data, 0, 100, 1, 50, new byte[60]), "does not continue");
        MessageAssembler early = assembler(1000, false);
        feed(early, w.frame(data, BEGIN, 100, 1, 0, new byte[50]));
        assertBad(early, w.frame(data, BEGIN | END, 1, 2, 0, new byte[1]), "started before message 1 ended");
        assertBad(assembler(1000, false), w.frame(data, BEGIN | END, 10, 1, 0, new byte[4]), "inconsistent with total 10");
    }

    @Test
    void authenticationFailuresAreRejected() {
        Frames good = new Frames(true);
        byte data = io.jcomm.mq.internal.Frames.DATA;
        assertBad(assembler(1000, true), new Frames(false).frame(data, BEGIN | END, 1, 1, 0, new byte[1]),
                "unauthenticated frame on an authenticated stream");
        assertBad(assembler(1000, false), good.frame(data, BEGIN | END, 1, 1, 0, new byte[1]), "unexpected MAC flag");
        UnsafeBuffer tampered = good.frame(data, BEGIN | END, 3, 1, 0, new byte[] {1, 2, 3});
        tampered.putByte(HEADER_LENGTH + 1, (byte) 42);
        assertBad(assembler(1000, true), tampered, "fails authentication");
        MessageAssembler multi = assembler(1000, true);
        assertEquals(MessageAssembler.INCOMPLETE, feed(multi, good.frame(data, BEGIN, 6, 1, 0, new byte[] {1, 2, 3})));
        UnsafeBuffer last = good.frame(data, END, 6, 1, 3, new byte[] {4, 5, 6});
        last.putByte(last.capacity() - 1, (byte) (last.getByte(last.capacity() - 1) ^ 1));
        assertBad(multi, last, "fails authentication");
        UnsafeBuffer genuine = new Frames(true).frame(data, BEGIN | END, 1, 1, 0, new byte[1]);
        assertEquals(MessageAssembler.MESSAGE, feed(assembler(1000, true), genuine), "same key verifies");
        byte[] otherKey = new byte[32];
        otherKey[0] = 1;
        MessageAssembler otherReader = new MessageAssembler(OpContext.of("g", 1, "dequeue"), 1000, new HmacSha256(otherKey));
        assertBad(otherReader, new Frames(true).frame(data, BEGIN | END, 1, 1, 0, new byte[1]), "fails authentication");
    }

    @Test
    void closeFrameEndsTheStream() {
        Frames w = new Frames(true);
        MessageAssembler a = assembler(1000, true);
        assertEquals(MessageAssembler.MESSAGE, feed(a, w.frame(io.jcomm.mq.internal.Frames.DATA, BEGIN | END, 1, 1, 0, new byte[1])));
        assertEquals(MessageAssembler.CLOSED, feed(a, w.frame(io.jcomm.mq.internal.Frames.CLOSE, BEGIN | END, 0, 2, 0, new byte[0])));
        MessageAssembler b = assembler(1000, true);
        assertBad(b, w.frame(io.jcomm.mq.internal.Frames.CLOSE, BEGIN | END, 0, 7, 0, new byte[0]), "close frame has sequence 7");
    }
}
