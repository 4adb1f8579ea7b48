package io.jcomm.it.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.DistributedConfig;
import io.jcomm.cpu.store.TcpRendezvous;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.testkit.FreePorts;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * Our client against torch's own server ({@code TCPStore(is_master=True, world_size=2)} in a Python
 * process): it joins torch's worker count on {@code init/}, then uses every operation, including
 * the ones torch 1.13 lacks (emulated) and a wait that times out.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class JcommClientAgainstTorchServerIT {

    private static byte[] b(String s) {
        return s.getBytes(UTF_8);
    }

    @Test
    void jcommClientUsesTorchsServer() throws Exception {
        TorchProcess.assumeTorch();
        int port = FreePorts.find();
        try (TorchProcess py = TorchProcess.start("torch-master", "127.0.0.1", Integer.toString(port), "master", "2")) {
            DistributedConfig dc = DistributedConfig.builder().masterPort(port).rank(1).worldSize(2)
                    .timeout(Duration.ofSeconds(60)).build();
            // rank 1 does not host; worker counting makes torch's constructor (waiting for 2) return
            try (TcpStore s = TcpRendezvous.connect(dc, TcpRendezvous.Options.builder().waitForWorkers(true).build())) {
                assertFalse(s.isJcommServer(), "the probe must see a torch server");
                py.awaitLine("READY", Duration.ofSeconds(60));
                assertArrayEquals(b("hello from torch"), s.get("from_torch"));
                s.set("from_java", b("hello from java"));
                assertEquals(7, s.add("counter", 7));
                assertEquals(10, s.add("counter", 3));
                assertArrayEquals(b("old"), s.compareSet("cas", new byte[0], b("old")));
                assertArrayEquals(b("old"), s.compareSet("cas", b("wrong"), b("x")));
                assertArrayEquals(b("new"), s.compareSet("cas", b("old"), b("new")));
                assertTrue(s.check(List.of("from_torch", "counter")));
                assertFalse(s.check(List.of("from_torch", "absent")));
                s.set("tmp", b("t"));
                assertTrue(s.deleteKey("tmp"));
                assertFalse(s.deleteKey("tmp"));
                // init/, /from_torch, /from_java, /counter, /cas
                assertEquals(5, s.numKeys());
                // a timed-out wait on the legacy dialect drops the connection; later replies stay in sync
                CommTimeoutException e = assertThrows(CommTimeoutException.class,
                        () -> s.wait(List.of("never"), Duration.ofMillis(300)));
                assertTrue(e.getMessage().contains("never"), e.getMessage());
                assertEquals(10, s.add("counter", 0));
                // a get that really waits on torch's server
                py.writeLine("LATER");
                assertArrayEquals(b("set later by torch"), s.get("later", Duration.ofSeconds(30)));
                // what 1.13 lacks: multiSet (pipelined SETs), multiGet (WAIT + pipelined GETs), append (CAS loop)
                s.multiSet(List.of("m1", "m2"), List.of(b("one"), b("two")));
                List<byte[]> m = s.multiGet(List.of("m2", "from_torch", "m1"));
                assertArrayEquals(b("two"), m.get(0));
                assertArrayEquals(b("hello from torch"), m.get(1));
                assertArrayEquals(b("one"), m.get(2));
                s.append("appended", b("a"));
                s.append("appended", b("b"));
                s.append("appended", b("c"));
                assertArrayEquals(b("abc"), s.get("appended"));
                s.set("java_done", new byte[0]);
                py.awaitLine("DONE", Duration.ofSeconds(60));
            }
            py.closeStdin();
            assertEquals(0, py.waitFor(Duration.ofSeconds(30)), py.output());
            assertTrue(py.lines().stream().noneMatch(l -> l.startsWith("MISMATCH")), py.output());
        }
    }
}
