package io.jcomm.runtime;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.runtime.shm.ShmFiles;
import io.jcomm.testkit.ChildJvm;
import java.nio.charset.StandardCharsets;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@link Entropy} and {@link Fnv1a}: random bytes and a hash without the JDK's security providers,
 * whose set-up every rank paid before its groups were ready.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class EntropyTest {

    @Test
    void bytesAreFilledAndDoNotRepeat() {
        Set<Long> seen = new HashSet<>();
        for (int i = 0; i < 1000; i++) {
            assertTrue(seen.add(Entropy.nextLong()), "a 64-bit value repeated within 1000 draws");
        }
        byte[] a = new byte[64];
        byte[] b = new byte[64];
        Entropy.nextBytes(a);
        Entropy.nextBytes(b);
        assertFalse(java.util.Arrays.equals(a, b));
        assertFalse(java.util.Arrays.equals(a, new byte[64]), "not filled");
        Entropy.nextBytes(new byte[0]);
        // every bit position takes both values over 1000 draws
        long ones = 0;
        long zeros = 0;
        for (int i = 0; i < 1000; i++) {
            long v = Entropy.nextLong();
            ones |= v;
            zeros |= ~v;
        }
        assertEquals(-1L, ones);
        assertEquals(-1L, zeros);
    }

    @Test
    void boundedIntsStayInTheirRange() {
        Set<Integer> seen = new HashSet<>();
        for (int i = 0; i < 2000; i++) {
            int v = Entropy.nextInt(7);
            assertTrue(v >= 0 && v < 7, "out of range: " + v);
            seen.add(v);
        }
        assertEquals(7, seen.size(), "every value of [0, 7) drawn in 2000 tries");
        assertEquals(0, Entropy.nextInt(1));
        assertThrows(IllegalArgumentException.class, () -> Entropy.nextInt(0));
    }

    @Test
    void fnv1aMatchesTheReferenceValues() {
        // the FNV test vectors of the algorithm's authors (64-bit FNV-1a)
        assertEquals("cbf29ce484222325", Fnv1a.hex(Fnv1a.update(Fnv1a.EMPTY, new byte[0])));
        assertEquals("af63dc4c8601ec8c", Fnv1a.hex(Fnv1a.update(Fnv1a.EMPTY, "a".getBytes(StandardCharsets.US_ASCII))));
        assertEquals("85944171f73967e8", Fnv1a.hex(Fnv1a.update(Fnv1a.EMPTY, "foobar".getBytes(StandardCharsets.US_ASCII))));
        long byByte = Fnv1a.EMPTY;
        for (byte x : "foobar".getBytes(StandardCharsets.US_ASCII)) {
            byByte = Fnv1a.update(byByte, x);
        }
        assertEquals("85944171f73967e8", Fnv1a.hex(byByte));
        assertEquals(16, Fnv1a.hex(1).length());
        assertNotEquals(Fnv1a.update(Fnv1a.EMPTY, new byte[] {1, 2}), Fnv1a.update(Fnv1a.EMPTY, new byte[] {2, 1}));
    }

    @Test
    void noSecurityProviderIsSetUp() throws Exception {
        String out = ChildJvm.classLoads(Child.class, List.of("-Xshare:off"));
        assertTrue(out.contains("child: ok"), out);
        assertFalse(out.contains("sun.security.jca.Providers "), "the security providers were set up");
        assertFalse(out.contains("java.security.SecureRandom "), "a SecureRandom was made");
    }

    /** Draws random values and names shared-memory files as the start path does, then says so. */
    public static final class Child {
        public static void main(String[] args) {
            long x = Entropy.nextLong() ^ Entropy.nextInt(100);
            String name = ShmFiles.ownedName("jcomm-t-", "tag");
            System.out.println("child: " + (name.startsWith("jcomm-t-tag-") && x == x ? "ok" : "bad " + name));
        }
    }
}
