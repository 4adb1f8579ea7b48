package io.jcomm.mq;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class MessageQueueOptionsTest {

    @Test
    void defaultsAndDerivedFrameSize() {
        MessageQueueOptions d = MessageQueueOptions.defaults();
        assertEquals(64 << 20, d.maxMessageBytes());
        assertEquals(4 << 20, d.ipcTermLength());
        assertEquals(65504, d.ipcMtu());
        MessageQueueOptions small = MessageQueueOptions.builder().ipcTermLength(64 * 1024).build();
        assertEquals(8192, small.ipcMtu(), "term/8");
        assertEquals(65504, small.toBuilder().ipcTermLength(4 << 20).build().ipcMtu(), "a derived MTU stays derived");
        assertEquals(16384, MessageQueueOptions.builder().ipcMtu(16384).build().toBuilder().build().ipcMtu(),
                "an explicit MTU is kept");
    }

    @Test
    void invalidValuesAreRefusedWithTheirName() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> MessageQueueOptions.builder().ipcTermLength(3 << 20).build());
        assertTrue(e.getMessage().contains("ipcTermLength"), e.getMessage());
        assertThrows(IllegalArgumentException.class, () -> MessageQueueOptions.builder().maxMessageBytes(-1).build());
        assertThrows(IllegalArgumentException.class, () -> MessageQueueOptions.builder().udpMtu(1000).build());
        assertThrows(IllegalArgumentException.class, () -> MessageQueueOptions.builder().ackInterval(0).build());
        assertThrows(IllegalArgumentException.class, () -> MessageQueueOptions.builder().ipcTermLength(64 * 1024)
                .ipcMtu(65504).build());
    }

    @Test
    void hostIdComesFromTheOptionFirst() {
        assertEquals("h1", MessageQueueOptions.builder().hostId("h1").build().hostId());
        assertTrue(!MessageQueueOptions.defaults().hostId().isEmpty());
    }
}
