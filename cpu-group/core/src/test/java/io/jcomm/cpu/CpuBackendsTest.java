package io.jcomm.cpu;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.BackendException;
import io.jcomm.api.DistributedConfig;
import io.jcomm.api.store.InMemoryStore;
import io.jcomm.cpu.spi.CpuBackendProvider;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class CpuBackendsTest {

    @Test
    void findsTheTcpProviderByNameAndAutomatically() {
        assertEquals("tcp", CpuBackends.select("tcp").name());
        assertEquals("tcp", CpuBackends.select(" TCP ").name());
        assertTrue(CpuBackends.providers().stream().anyMatch(p -> p.name().equals("tcp")));
        assertTrue(CpuBackends.select("auto").availability().available());
        assertTrue(CpuBackends.find("tcp").isPresent());
    }

    @Test
    void unknownBackendNamesTheKnownOnes() {
        BackendException e = assertThrows(BackendException.class, () -> CpuBackends.select("carrier-pigeon"));
        assertTrue(e.getMessage().contains("carrier-pigeon") && e.getMessage().contains("tcp"), e.getMessage());
    }

    @Test
    void withoutTheGlooArtifactTheCoreHasOnlyTcpAndSaysWhereGlooLives() {
        assertEquals(List.of("tcp"), CpuBackends.providers().stream().map(p -> p.name()).toList(),
                "cpu-group (core) must not carry the gloo backend: it lives in cpu-group-gloo");
        BackendException e = assertThrows(BackendException.class, () -> CpuBackends.select("gloo"));
        assertTrue(e.getMessage().contains("add io.jcomm:cpu-group-gloo to the class path"), e.getMessage());
    }

    @Test
    void anUnknownKeyOfTheChosenBackendIsRejectedWithTheKnownOnesOthersPass() {
        CpuBackendProvider tcp = CpuBackends.select("tcp");
        CpuBackends.checkOptions(tcp, Map.of(TcpOptions.SPIN_MICROS, "3", "gloo.devices", "lo", "object.maxBytes", "9"));
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> CpuBackends.checkOptions(tcp, Map.of("tcp.spinMicro", "3")));
        assertTrue(e.getMessage().startsWith("unknown option 'tcp.spinMicro' of CPU backend tcp; known: [")
                && e.getMessage().contains(TcpOptions.SPIN_MICROS), e.getMessage());
        // and a group is refused before it connects to anyone
        CpuGroupOptions bad = CpuGroupOptions.builder().store(new InMemoryStore(Duration.ofSeconds(1))).rank(0).size(2)
                .backend("tcp").option("tcp.shm.ringbytes", "65536").timeout(Duration.ofSeconds(1)).build();
        IllegalArgumentException again = assertThrows(IllegalArgumentException.class, () -> CpuGroups.create(bad));
        assertTrue(again.getMessage().contains("'tcp.shm.ringbytes'"), again.getMessage());
    }

    @Test
    void optionsDefaultsAndValidation() {
        InMemoryStore s = new InMemoryStore();
        CpuGroupOptions o = CpuGroupOptions.builder().store(s).rank(1).size(3).build();
        assertEquals("world", o.groupName());
        assertEquals(List.of(0, 1, 2), o.globalRanks());
        assertEquals("auto", o.backend());
        assertEquals(Duration.ofSeconds(60), o.timeout());
        assertEquals("127.0.0.1", o.hostname());
        assertEquals(CpuGroupOptions.MAX_OBJECT_BYTES_DEFAULT, o.maxObjectBytes());
        CpuGroupOptions p = o.toBuilder().option("tcp.shm", "false").globalRanks(List.of(4, 5, 6)).build();
        assertEquals("false", p.option("tcp.shm", null));
        assertEquals(List.of(4, 5, 6), p.globalRanks());
        assertThrows(NullPointerException.class, () -> CpuGroupOptions.builder().build());
        assertThrows(IllegalArgumentException.class, () -> CpuGroupOptions.builder().store(s).rank(3).size(3).build());
        assertThrows(IllegalArgumentException.class, () -> CpuGroupOptions.builder().store(s).size(2).globalRanks(List.of(1, 1)).build());
        assertThrows(IllegalArgumentException.class, () -> CpuGroupOptions.builder().store(s).timeout(Duration.ZERO).build());
        assertThrows(IllegalArgumentException.class,
                () -> CpuGroupOptions.builder().store(s).option(CpuGroupOptions.MAX_OBJECT_BYTES_OPTION, "x").build());
        DistributedConfig c = DistributedConfig.builder().rank(2).worldSize(4).timeout(Duration.ofSeconds(9)).cpuBackend("tcp").build();
        CpuGroupOptions w = CpuGroupOptions.fromConfig(c, s);
        assertEquals(2, w.rank());
        assertEquals(4, w.size());
        assertEquals("tcp", w.backend());
        assertEquals(Duration.ofSeconds(9), w.timeout());
    }
}
