package io.jcomm.api.ray;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class ActorIdTest {

    @Test
    void hexAndAsciiWireFormRoundTrip() {
        String hex = "0123456789abcdef0011223344556677";
        ActorId id = ActorId.parse(hex.toUpperCase());
        assertEquals(0x0123456789abcdefL, id.high());
        assertEquals(hex, id.toHex());
        byte[] wire = id.toAsciiBytes();
        assertArrayEquals(hex.getBytes(StandardCharsets.US_ASCII), wire);
        assertEquals((byte) '0', wire[0]);
        byte[] two = new byte[64];
        System.arraycopy(wire, 0, two, 32, 32);
        assertEquals(id, ActorId.fromAsciiBytes(two, 32));
    }

    @Test
    void rejectsMalformedIds() {
        assertThrows(IllegalArgumentException.class, () -> ActorId.parse("abc"));
        assertThrows(IllegalArgumentException.class, () -> ActorId.parse("g123456789abcdef0011223344556677"));
        assertThrows(IllegalArgumentException.class, () -> ActorId.fromAsciiBytes(new byte[40], 10));
    }

    @Test
    void communicatorIdsAreUnique32Hex() {
        String a = Communicator.generateCommunicatorId();
        assertEquals(32, a.length());
        assertEquals(a, ActorId.parse(a).toHex());
        assertNotEquals(a, Communicator.generateCommunicatorId());
    }
}
