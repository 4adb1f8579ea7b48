package io.jcomm.cpu.store;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.jcomm.cpu.store.internal.StoreEngineAccess;
import io.jcomm.cpu.store.internal.StoreFault;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** ADD's integer parsing follows torch's {@code std::stoll}. */
class StoreEngineTest {

    private static long parse(String s) {
        return StoreEngineAccess.parseLong(s.getBytes(StandardCharsets.US_ASCII));
    }

    @Test
    void parsesLikeStoll() {
        assertEquals(42, parse("42"));
        assertEquals(-42, parse("-42"));
        assertEquals(7, parse("+7"));
        assertEquals(12, parse("  \t12"));
        assertEquals(12, parse("12abc"));
        assertEquals(Long.MAX_VALUE, parse("9223372036854775807"));
        assertEquals(Long.MIN_VALUE, parse("-9223372036854775808"));
        assertThrows(StoreFault.class, () -> parse("9223372036854775808"));
        assertThrows(StoreFault.class, () -> parse("-9223372036854775809"));
        assertThrows(StoreFault.class, () -> parse("abc"));
        assertThrows(StoreFault.class, () -> parse(""));
        assertThrows(StoreFault.class, () -> parse("-"));
    }

    @Test
    void formatsDecimal() {
        for (long v : new long[] {0, 9, 10, -1, Long.MIN_VALUE, Long.MAX_VALUE, 1234567}) {
            assertEquals(Long.toString(v), new String(StoreEngineAccess.decimal(v), StandardCharsets.US_ASCII));
        }
    }
}
