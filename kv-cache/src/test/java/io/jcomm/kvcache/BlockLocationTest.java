package io.jcomm.kvcache;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import io.jcomm.api.ProtocolException;
import java.nio.ByteBuffer;
import java.util.Random;
import org.junit.jupiter.api.Test;

class BlockLocationTest {

    @Test
    void roundTrips() {
        BlockLocation l = IndexWorker.location("job-a.rank-1", 9, new BlockOwner(1234, 99));
        assertEquals(l, BlockLocation.decode(l.encode()));
        assertEquals(9, l.headChecksum(0));
    }

    @Test
    void neverTrustsBytes() {
        byte[] good = IndexWorker.location("x", 3, new BlockOwner(77, 1)).encode();
        Random r = new Random(44);
        int refused = 0;
        for (int i = 0; i < 20_000; i++) {
            byte[] b = good.clone();
            int flips = 1 + r.nextInt(4);
            for (int f = 0; f < flips; f++) {
                b[r.nextInt(b.length)] = (byte) r.nextInt(256);
            }
            if (r.nextInt(4) == 0) {
                b = java.util.Arrays.copyOf(b, r.nextInt(b.length + 8));
            }
            try {
                BlockLocation.decode(b);
            } catch (ProtocolException e) {
                refused++;
            }
        }
        assertEquals(true, refused > 1000, refused + " refused");
        assertThrows(ProtocolException.class, () -> BlockLocation.decode(new byte[BlockLocation.MAX_ENCODED_BYTES + 1]));
        ByteBuffer huge = ByteBuffer.allocate(8).put((byte) 1).putShort((short) -1);
        assertThrows(ProtocolException.class, () -> BlockLocation.decode(huge.flip()));
    }
}
