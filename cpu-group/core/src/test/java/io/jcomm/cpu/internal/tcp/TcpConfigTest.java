package io.jcomm.cpu.internal.tcp;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.cpu.TcpOptions;
import java.util.Map;
import org.junit.jupiter.api.Test;

/** TcpConfig is TcpOptions' effective values, with the defaults the backend always had. */
class TcpConfigTest {

    @Test
    void defaults() {
        TcpConfig c = new TcpConfig(TcpOptions.builder().build());
        assertEquals("auto", c.transport);
        assertEquals(5_000, c.spinNanos);
        assertEquals(1 << 20, c.segmentBytes);
        assertEquals(64 << 10, c.smallBytes);
        assertEquals(256L << 20, c.maxUnexpectedBytes);
        assertEquals(4L << 20, c.sendBudgetBytes);
        assertEquals(64, c.sendBudgetMessages);
        assertEquals(0, c.socketBufferBytes);
        assertTrue(c.shm);
        assertEquals(64 << 10, c.shmThresholdBytes);
        assertEquals(4 << 20, c.shmRingBytes);
        assertEquals("/dev/shm", c.shmDir);
        assertEquals(16 << 20, c.shmStagingBytes);
        assertEquals(256 << 10, c.shmCollectiveMinBytes);
        assertNull(c.hostId);
        assertFalse(c.freshNamespace);
    }

    @Test
    void textOptionsAreReadThroughTcpOptions() {
        TcpConfig c = new TcpConfig(TcpOptions.fromMap(Map.of(TcpOptions.TRANSPORT, "NIO", TcpOptions.SPIN_MICROS, "7",
                TcpOptions.SHM, "false", TcpOptions.SHM_STAGING_BYTES, "20000", TcpOptions.SHM_DIR, "/tmp/x",
                TcpOptions.HOST_ID, "h", TcpOptions.FRESH_NAMESPACE, "true", "gloo.devices", "2")));
        assertEquals("nio", c.transport);
        assertEquals(7_000, c.spinNanos);
        assertFalse(c.shm);
        assertEquals(16384, c.shmStagingBytes, "rounded down to 16 KiB");
        assertEquals("/tmp/x", c.shmDir);
        assertEquals("h", c.hostId);
        assertTrue(c.freshNamespace);
        assertTrue(new TcpConfig(TcpOptions.builder().shm(TcpOptions.Shm.ON).build()).shm);
    }

    @Test
    void theSmallestSendBudgetIsOneFrameHeader() {
        assertEquals(Frame.SIZE, new TcpConfig(TcpOptions.builder().sendBudgetBytes(Frame.SIZE).build()).sendBudgetBytes);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TcpOptions.builder().sendBudgetBytes(Frame.SIZE - 1).build());
        assertTrue(e.getMessage().startsWith(TcpOptions.SEND_BUDGET_BYTES), e.getMessage());
    }
}
