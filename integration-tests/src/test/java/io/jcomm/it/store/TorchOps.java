package io.jcomm.it.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import java.time.Duration;
import java.util.List;

/** The torch-client "ops" scenario of torch_store.py, driven and checked from the Java side. */
final class TorchOps {

    private TorchOps() {
    }

    static void run(int port) throws Exception {
        try (TcpStore js = TcpStore.connect(TcpStoreConfig.builder().port(port).timeout(Duration.ofSeconds(30)).build())) {
            assertTrue(js.isJcommServer());
            js.set("from_java", "hello from java".getBytes(UTF_8));
            try (TorchProcess py = TorchProcess.start("torch-client", "127.0.0.1", Integer.toString(port), "ops")) {
                py.awaitLine("WAIT_TIMED_OUT", Duration.ofSeconds(90));
                // set the key the torch client gave up on (after its next command told the server so): a
                // server that kept the wait would now send a STOP_WAITING that torch would read as a reply
                js.set("late", "now here".getBytes(UTF_8));
                py.writeLine("GO");
                py.awaitLine("WAITING", Duration.ofSeconds(30));
                Thread.sleep(200);
                assertFalse(py.lines().contains("DONE"), "torch wait returned before its keys existed");
                js.set("k1", "v1".getBytes(UTF_8));
                assertEquals(15, js.add("counter", 10));
                js.set("k2", "v2".getBytes(UTF_8));
                assertEquals(0, py.waitFor(Duration.ofSeconds(60)), py.output());
                assertTrue(py.lines().contains("DONE"), py.output());
                assertTrue(py.lines().stream().noneMatch(l -> l.startsWith("MISMATCH")), py.output());
            }
            // what torch wrote, seen from Java
            assertArrayEquals("hello from torch".getBytes(UTF_8), js.get("from_torch"));
            assertEquals(15, js.add("counter", 0));
            assertArrayEquals("second".getBytes(UTF_8), js.get("cas"));
            assertFalse(js.check(List.of("doomed")));
            assertFalse(js.check(List.of("nokey")));
        }
    }
}
