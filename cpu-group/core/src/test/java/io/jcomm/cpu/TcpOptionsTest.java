package io.jcomm.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.store.InMemoryStore;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Optional;
import java.util.function.Consumer;
import org.junit.jupiter.api.Test;

class TcpOptionsTest {

    private static TcpOptions everything() {
        return TcpOptions.builder().transport(TcpOptions.Transport.NIO).spinMicros(7).segmentBytes(8192)
                .smallBytes(1000).maxUnexpectedBytes(5L << 30).sendBudgetBytes(123_456).sendBudgetMessages(9)
                .socketBufferBytes(65536).shm(TcpOptions.Shm.OFF).shmThresholdBytes(4096).shmRingBytes(1 << 20)
                .shmDir(Path.of("/tmp/rings")).shmStagingBytes(1 << 22).shmCollectiveMinBytes(2048).shmFastBytes(4096).shmNativeCopy(false).shmCrossMemory(false).hostId("h-1")
                .freshNamespace(true).connectAtCreation(true).build();
    }

    @Test
    void unsetOptionsAreAbsentAndReadAsTheDefaults() {
        TcpOptions o = TcpOptions.builder().build();
        assertEquals(Map.of(), o.asMap());
        assertEquals("tcp", o.backend());
        assertEquals(TcpOptions.Transport.AUTO, o.transport());
        assertEquals(5, o.spinMicros());
        assertEquals(1 << 20, o.segmentBytes());
        assertEquals(64 << 10, o.smallBytes());
        assertEquals(256L << 20, o.maxUnexpectedBytes());
        assertEquals(4L << 20, o.sendBudgetBytes());
        assertEquals(64, o.sendBudgetMessages());
        assertEquals(0, o.socketBufferBytes());
        assertEquals(TcpOptions.Shm.AUTO, o.shm());
        assertEquals(64 << 10, o.shmThresholdBytes());
        assertEquals(4 << 20, o.shmRingBytes());
        assertEquals(Path.of("/dev/shm"), o.shmDir());
        assertEquals(16 << 20, o.shmStagingBytes());
        assertEquals(256 << 10, o.shmCollectiveMinBytes());
        assertEquals(64 << 10, o.shmFastBytes());
        assertTrue(o.shmNativeCopy());
        assertEquals(Optional.empty(), o.hostId());
        assertFalse(o.freshNamespace());
        assertEquals(o, TcpOptions.fromMap(Map.of()));
    }

    @Test
    void builderRoundTripsThroughTheStringForm() {
        TcpOptions o = everything();
        assertEquals(TcpOptions.Transport.NIO, o.transport());
        assertEquals(7, o.spinMicros());
        assertEquals(8192, o.segmentBytes());
        assertEquals(1000, o.smallBytes());
        assertEquals(5L << 30, o.maxUnexpectedBytes());
        assertEquals(123_456, o.sendBudgetBytes());
        assertEquals(9, o.sendBudgetMessages());
        assertEquals(65536, o.socketBufferBytes());
        assertEquals(TcpOptions.Shm.OFF, o.shm());
        assertEquals(4096, o.shmThresholdBytes());
        assertEquals(1 << 20, o.shmRingBytes());
        assertEquals(Path.of("/tmp/rings"), o.shmDir());
        assertEquals(1 << 22, o.shmStagingBytes());
        assertEquals(2048, o.shmCollectiveMinBytes());
        assertEquals(4096, o.shmFastBytes());
        assertFalse(o.shmNativeCopy());
        assertFalse(o.shmCrossMemory());
        assertEquals(Optional.of("h-1"), o.hostId());
        assertTrue(o.freshNamespace());
        assertTrue(o.connectAtCreation());
        assertFalse(TcpOptions.builder().build().connectAtCreation());

        Map<String, String> m = o.asMap();
        assertEquals(TcpOptions.KEYS, m.keySet(), "every option was set");
        assertEquals("nio", m.get(TcpOptions.TRANSPORT));
        assertEquals("false", m.get(TcpOptions.SHM));
        assertEquals("5368709120", m.get(TcpOptions.MAX_UNEXPECTED_BYTES));
        assertEquals("/tmp/rings", m.get(TcpOptions.SHM_DIR));
        assertEquals("true", m.get(TcpOptions.FRESH_NAMESPACE));
        assertEquals("false", m.get(TcpOptions.SHM_NATIVE_COPY));
        assertThrows(UnsupportedOperationException.class, () -> m.put(TcpOptions.SHM, "true"));

        assertEquals(o, TcpOptions.fromMap(m));
        assertEquals(o.hashCode(), TcpOptions.fromMap(m).hashCode());
        assertEquals(o, o.toBuilder().build());
        assertNotEquals(o, o.toBuilder().spinMicros(8).build());
        assertEquals(Map.of(TcpOptions.SHM_RING_BYTES, "65536"),
                TcpOptions.builder().shmRingBytes(64 << 10).build().asMap(), "only what was set");
    }

    @Test
    void textIsTrimmedAndCaseInsensitiveAndOtherPrefixesAreLeftAlone() {
        Map<String, String> m = new HashMap<>();
        m.put(TcpOptions.TRANSPORT, " EPOLL ");
        m.put(TcpOptions.SHM, "True");
        m.put(TcpOptions.SPIN_MICROS, " 12 ");
        m.put(TcpOptions.FRESH_NAMESPACE, "FALSE");
        m.put("gloo.devices", "nonsense");
        m.put(CpuGroupOptions.MAX_OBJECT_BYTES_OPTION, "9");
        m.put(TcpOptions.HOST_ID, null); // unset
        TcpOptions o = TcpOptions.fromMap(m);
        assertEquals(TcpOptions.Transport.EPOLL, o.transport());
        assertEquals(TcpOptions.Shm.ON, o.shm());
        assertEquals(12, o.spinMicros());
        assertFalse(o.freshNamespace());
        assertEquals(Map.of(TcpOptions.TRANSPORT, "epoll", TcpOptions.SHM, "true", TcpOptions.SPIN_MICROS, "12",
                TcpOptions.FRESH_NAMESPACE, "false"), o.asMap());
    }

    private static void rejected(String key, String text, Consumer<TcpOptions.Builder> typed, String expected) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> TcpOptions.fromMap(Map.of(key, text)), key + "=" + text);
        assertTrue(e.getMessage().startsWith(key + " ") && e.getMessage().contains(expected), e.getMessage());
        if (typed != null) {
            TcpOptions.Builder b = TcpOptions.builder();
            typed.accept(b);
            IllegalArgumentException t = assertThrows(IllegalArgumentException.class, b::build, key + " typed");
            assertEquals(e.getMessage(), t.getMessage(), "the same rule, the same message");
        }
    }

    @Test
    void everyRuleRejectsWithAMessageNamingTheKey() {
        rejected(TcpOptions.TRANSPORT, "rdma", null, "must be auto, epoll or nio, got rdma");
        rejected(TcpOptions.SHM, "maybe", null, "must be auto, true or false, got maybe");
        rejected(TcpOptions.FRESH_NAMESPACE, "yes", null, "must be true or false, got yes");
        rejected(TcpOptions.SHM_NATIVE_COPY, "1", null, "must be true or false, got 1");
        rejected(TcpOptions.SPIN_MICROS, "x", null, "is not an integer: x");
        rejected(TcpOptions.SPIN_MICROS, "-1", b -> b.spinMicros(-1), "= -1 not in [0, 1000000]");
        rejected(TcpOptions.SPIN_MICROS, "1000001", b -> b.spinMicros(1_000_001), "not in [0, 1000000]");
        rejected(TcpOptions.SPIN_MICROS, "99999999999", null, "= 99999999999 not in [0, 1000000]");
        rejected(TcpOptions.SEGMENT_BYTES, "4095", b -> b.segmentBytes(4095), "not in [4096, 1073741824]");
        rejected(TcpOptions.SMALL_BYTES, "-1", b -> b.smallBytes(-1), "not in [0, 1073741824]");
        rejected(TcpOptions.MAX_UNEXPECTED_BYTES, "-1", b -> b.maxUnexpectedBytes(-1), "not in [0, ");
        rejected(TcpOptions.SEND_BUDGET_BYTES, "39", b -> b.sendBudgetBytes(39), "= 39 not in [40, 1073741824]");
        rejected(TcpOptions.SEND_BUDGET_BYTES, "1073741825", b -> b.sendBudgetBytes((1L << 30) + 1), "not in [40, ");
        rejected(TcpOptions.SEND_BUDGET_MESSAGES, "0", b -> b.sendBudgetMessages(0), "not in [1, 1048576]");
        rejected(TcpOptions.SOCKET_BUFFER_BYTES, "-5", b -> b.socketBufferBytes(-5), "not in [0, 1073741824]");
        rejected(TcpOptions.SHM_THRESHOLD_BYTES, "-1", b -> b.shmThresholdBytes(-1), "not in [0, 2147483647]");
        rejected(TcpOptions.SHM_RING_BYTES, "32768", b -> b.shmRingBytes(32 << 10), "not in [65536, 1073741824]");
        rejected(TcpOptions.SHM_RING_BYTES, "100000", b -> b.shmRingBytes(100_000), "must be a power of two, got 100000");
        rejected(TcpOptions.SHM_STAGING_BYTES, "-1", b -> b.shmStagingBytes(-1), "not in [0, 1073741824]");
        rejected(TcpOptions.SHM_COLLECTIVE_MIN_BYTES, "-1", b -> b.shmCollectiveMinBytes(-1), "not in [0, ");
        rejected(TcpOptions.SHM_DIR, "bad\0dir", null, "is not a path");
        // the bounds themselves are accepted
        TcpOptions.fromMap(Map.of(TcpOptions.SEND_BUDGET_BYTES, "40", TcpOptions.SHM_RING_BYTES, "1073741824",
                TcpOptions.SEGMENT_BYTES, "4096", TcpOptions.SPIN_MICROS, "0"));
    }

    @Test
    void anUnknownTcpKeyIsRejectedWithTheKnownOnes() {
        for (String key : new String[] {"tcp.spinMicro", "tcp.shm.ringbytes", "TCP.shm"}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> TcpOptions.fromMap(Map.of(key, "1")));
            assertTrue(e.getMessage().startsWith("unknown option '" + key + "' of CPU backend tcp; known: [")
                    && e.getMessage().contains(TcpOptions.SPIN_MICROS) && e.getMessage().contains(TcpOptions.SHM_RING_BYTES),
                    e.getMessage());
        }
    }

    @Test
    void groupOptionsTakeTypedOptionsAsTheirEntries() {
        CpuGroupOptions o = CpuGroupOptions.builder().store(new InMemoryStore())
                .option(TcpOptions.SPIN_MICROS, "3").option(TcpOptions.SHM, "true")
                .options(TcpOptions.builder().shm(TcpOptions.Shm.OFF).sendBudgetMessages(8).build())
                .build();
        Map<String, String> expected = new LinkedHashMap<>();
        expected.put(TcpOptions.SPIN_MICROS, "3");
        expected.put(TcpOptions.SHM, "false");
        expected.put(TcpOptions.SEND_BUDGET_MESSAGES, "8");
        assertEquals(expected, o.options());
        assertEquals(TcpOptions.fromMap(o.options()),
                TcpOptions.builder().spinMicros(3).shm(TcpOptions.Shm.OFF).sendBudgetMessages(8).build());

        BackendOptions stray = new BackendOptions() {
            @Override
            public String backend() {
                return "tcp";
            }

            @Override
            public Map<String, String> asMap() {
                return Map.of("gloo.devices", "2");
            }
        };
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> CpuGroupOptions.builder().options(stray));
        assertTrue(e.getMessage().contains("'gloo.devices'") && e.getMessage().contains("'tcp.'"), e.getMessage());
    }
}
