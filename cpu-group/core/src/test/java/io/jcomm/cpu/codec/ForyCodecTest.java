package io.jcomm.cpu.codec;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.ProtocolException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

class ForyCodecTest {

    public record Meta(String key, long[] shape, int dtype) {
    }

    public record Other(int x) {
    }

    public static final class NotRegistered {
        public int v = 7;
    }

    @Test
    void registeredRecordsAndBuiltinsRoundTrip() {
        ForyCodec c = ForyCodec.builder().register(Meta.class).build();
        Meta m = new Meta("hidden", new long[] {2, 3}, 3);
        Meta back = c.decode(c.encode(m), Meta.class);
        assertEquals("hidden", back.key());
        assertArrayEquals(new long[] {2, 3}, back.shape());
        assertEquals("hello", c.decode(c.encode("hello"), String.class));
        assertEquals(42L, c.decode(c.encode(42L), Long.class));
        Map<String, Object> map = new HashMap<>();
        map.put("a", 1);
        map.put("b", List.of(1, 2));
        assertEquals(1, c.decode(c.encode(map), Map.class).get("a"));
        List<Object> list = new ArrayList<>();
        list.add(m);
        assertEquals(m.key(), ((Meta) c.decode(c.encode(list), List.class).get(0)).key());
        assertNull(c.decode(c.encode(null), Object.class));
        // a Fory value far larger than its first buffer, after the form byte
        List<Long> big = new ArrayList<>();
        for (long i = 0; i < 10_000; i++) {
            big.add(i * 1_000_003L);
        }
        byte[] bigBytes = c.encode(big);
        assertEquals(Scalars.FORY, bigBytes[0]);
        assertEquals(big, c.decode(bigBytes, List.class));
        byte[] framed = new byte[100];
        byte[] enc = c.encode("x");
        System.arraycopy(enc, 0, framed, 10, enc.length);
        assertEquals("x", c.decode(framed, 10, enc.length, String.class));
    }

    /** Fory is made at first use: threads that all use a new codec at once share one, with the registrations. */
    @Test
    void aNewCodecUsedByManyThreadsAtOnceWorksForEach() throws Exception {
        ForyCodec c = ForyCodec.builder().register(Meta.class, Other.class).build();
        int n = 8;
        CountDownLatch start = new CountDownLatch(1);
        List<Future<Other>> results = new ArrayList<>();
        ExecutorService pool = Executors.newFixedThreadPool(n);
        try {
            for (int i = 0; i < n; i++) {
                int x = i;
                results.add(pool.submit(() -> {
                    start.await();
                    return c.decode(c.encode(new Other(x)), Other.class);
                }));
            }
            start.countDown();
            for (int i = 0; i < n; i++) {
                assertEquals(i, results.get(i).get(30, TimeUnit.SECONDS).x());
            }
        } finally {
            pool.shutdownNow();
        }
        assertThrows(IllegalArgumentException.class, () -> c.encode(new NotRegistered()), "registration is still required");
    }

    @Test
    void idsDependOnTheSetNotTheOrder() {
        ForyCodec a = ForyCodec.builder().register(Meta.class, Other.class).build();
        ForyCodec b = ForyCodec.builder().register(Other.class).register(Meta.class).build();
        assertEquals(a.fingerprint(), b.fingerprint());
        assertEquals(5, b.decode(a.encode(new Other(5)), Other.class).x());
        assertNotEquals(a.fingerprint(), ForyCodec.defaults().fingerprint());
    }

    @Test
    void unregisteredTypesAreRejectedBothWays() {
        ForyCodec c = ForyCodec.builder().register(Meta.class).build();
        assertThrows(IllegalArgumentException.class, () -> c.encode(new NotRegistered()));
        ForyCodec sender = ForyCodec.builder().register(Meta.class, NotRegistered.class).build();
        byte[] bytes = sender.encode(new NotRegistered());
        ProtocolException e = assertThrows(ProtocolException.class, () -> c.decode(bytes, Object.class));
        assertTrue(e.getMessage().contains("payload"), e.getMessage());
    }

    @Test
    void wrongExpectedTypeAndGarbageAreRejected() {
        ForyCodec c = ForyCodec.builder().register(Meta.class, Other.class).build();
        byte[] other = c.encode(new Other(1));
        ProtocolException e = assertThrows(ProtocolException.class, () -> c.decode(other, Meta.class));
        assertTrue(e.getMessage().contains("expected"), e.getMessage());
        Random rnd = new Random(1);
        for (int i = 0; i < 2000; i++) {
            byte[] junk = new byte[1 + rnd.nextInt(64)];
            rnd.nextBytes(junk);
            try {
                Object v = c.decode(junk, Object.class);
                // rare junk happens to be a valid small value; it must be a harmless built-in
                assertTrue(v == null || v.getClass().getName().startsWith("java.")
                        || v.getClass().isArray() && v.getClass().getComponentType().isPrimitive()
                        || v instanceof Meta || v instanceof Other, () -> String.valueOf(v.getClass()));
            } catch (ProtocolException expected) {
                // the normal outcome
            }
        }
        assertThrows(ProtocolException.class, () -> c.decode(new byte[0], Object.class));
        assertThrows(IllegalArgumentException.class, () -> c.decode(new byte[4], 2, 5, Object.class));
        assertThrows(ProtocolException.class, () -> c.decode(new byte[] {Scalars.FORY}, Object.class));
    }

    @Test
    void metadataValuesRoundTripWithoutMakingFory() {
        ForyCodec c = ForyCodec.defaults();
        Object[] values = {null, "", "req-7", "naïve \u4e2d\ud83d\ude00", Long.MIN_VALUE, -1L, 42, Integer.MAX_VALUE, -0.0,
            Double.NaN, Double.longBitsToDouble(0x7ff8_0000_dead_beefL), 1.5f, Float.NEGATIVE_INFINITY, true, false,
            (short) -3, (byte) -128, 'x', '\uffff', new byte[0], new byte[] {1, -2, 3}, new long[] {Long.MAX_VALUE, -5},
            new int[] {7, -8, 0}, new double[] {Math.PI, -0.0}, new float[0], new float[] {2.5f}};
        for (Object v : values) {
            byte[] b = c.encode(v);
            Object back = c.decode(b, Object.class);
            if (v instanceof Double && ((Double) v).isNaN()) {
                assertEquals(Double.doubleToRawLongBits((Double) v), Double.doubleToRawLongBits((Double) back), "NaN bits");
            } else if (v != null && v.getClass().isArray()) {
                assertTrue(java.util.Objects.deepEquals(v, back), () -> v.getClass() + " " + java.util.Arrays.deepToString(
                        new Object[] {v, back}));
            } else {
                assertEquals(v, back);
            }
            // at an offset inside a larger buffer too
            byte[] framed = new byte[b.length + 5];
            System.arraycopy(b, 0, framed, 3, b.length);
            assertTrue(java.util.Objects.deepEquals(v instanceof Double && ((Double) v).isNaN() ? null : v,
                    v instanceof Double && ((Double) v).isNaN() ? null : c.decode(framed, 3, b.length, Object.class)));
        }
        assertEquals(12L, c.decode(c.encode(12L), Long.class));
        assertEquals(12L, c.decode(c.encode(12L), Number.class));
        ProtocolException e = assertThrows(ProtocolException.class, () -> c.decode(c.encode(12L), String.class));
        assertTrue(e.getMessage().contains("expected java.lang.String"), e.getMessage());
        assertFalse(c.foryMade(), "metadata values made Fory");
        // a string UTF-8 cannot carry unchanged (an unpaired surrogate) and anything else go through Fory
        String broken = "a\ud800b";
        assertEquals(broken, c.decode(c.encode(broken), String.class));
        assertTrue(c.foryMade());
        assertEquals(java.util.List.of(1L, "x"), c.decode(c.encode(java.util.List.of(1L, "x")), Object.class));
    }

    @Test
    void malformedMetadataValuesAreRejected() {
        ForyCodec c = ForyCodec.defaults();
        byte[][] bad = {
            {Scalars.NULL, 0}, {Scalars.LONG, 1, 2, 3}, {Scalars.LONG, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {Scalars.INT},
            {Scalars.DOUBLE, 0, 0, 0, 0}, {Scalars.FLOAT, 0, 0, 0, 0, 0}, {Scalars.BOOLEAN, 2}, {Scalars.BOOLEAN},
            {Scalars.SHORT, 1}, {Scalars.BYTE}, {Scalars.CHAR, 1, 2, 3}, {Scalars.LONGS, 1, 2, 3}, {Scalars.INTS, 1, 2, 3},
            {Scalars.DOUBLES, 1}, {Scalars.FLOATS, 1, 2}, {Scalars.STRING, (byte) 0xc3}, {Scalars.STRING, (byte) 0xff, 'a'},
            {Scalars.STRING, (byte) 0xed, (byte) 0xa0, (byte) 0x80}, {16}, {(byte) 0x80, 1}, {-1}};
        for (byte[] b : bad) {
            assertThrows(ProtocolException.class, () -> c.decode(b, Object.class), () -> java.util.Arrays.toString(b));
        }
        assertFalse(c.foryMade(), "rejecting malformed metadata made Fory");
    }

    @Test
    void theFingerprintNeedsNoSecurityProvider() throws Exception {
        // groups compare fingerprints at creation, before anything else needs the JDK's providers
        String out = io.jcomm.testkit.ChildJvm.classLoads(FingerprintChild.class, List.of("-Xshare:off"));
        assertTrue(out.matches("(?s).*child: [0-9a-f]{16} [0-9a-f]{16} true.*"), out);
        assertFalse(out.contains("sun.security.jca.Providers "), "the security providers were set up");
        assertFalse(out.contains("java.security.MessageDigest "), "a digest was made");
    }

    /** Prints the fingerprints of two registrations and whether they differ. */
    public static final class FingerprintChild {
        public static void main(String[] args) {
            String a = ForyCodec.defaults().fingerprint().orElseThrow();
            String b = ForyCodec.builder().register(Meta.class).build().fingerprint().orElseThrow();
            System.out.println("child: " + a + " " + b + " " + !a.equals(b));
        }
    }
}
