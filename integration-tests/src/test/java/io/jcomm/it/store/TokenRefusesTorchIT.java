package io.jcomm.it.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.StoreException;
import io.jcomm.cpu.store.JobToken;
import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** commstore with {@code --token-file}: torch clients and tokenless jcomm clients are refused. */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class TokenRefusesTorchIT {

    @Test
    void onlyTokenHoldersAreServed(@TempDir Path dir) throws Exception {
        Path token = dir.resolve("job.token");
        Files.writeString(token, JobToken.generate() + "\n");
        try (StoreServerProcess server = StoreServerProcess.start("--token-file", token.toString())) {
            server.awaitLog("token required", Duration.ofSeconds(5));
            StoreException e = assertThrows(StoreException.class, () -> TcpStore.connect(TcpStoreConfig.builder()
                    .port(server.port).timeout(Duration.ofSeconds(10)).build()));
            assertTrue(e.getMessage().contains("requires a job token"), e.getMessage());
            try (TcpStore s = TcpStore.connect(TcpStoreConfig.builder().port(server.port).tokenFile(token)
                    .timeout(Duration.ofSeconds(10)).build())) {
                s.set("k", "v".getBytes(UTF_8));
                assertArrayEquals("v".getBytes(UTF_8), s.get("k"));
                TorchProcess.assumeTorch();
                try (TorchProcess py = TorchProcess.start("torch-refused", "127.0.0.1", Integer.toString(server.port),
                        "refused")) {
                    assertEquals(0, py.waitFor(Duration.ofSeconds(60)), py.output());
                    py.awaitLine("REFUSED", Duration.ofSeconds(1));
                }
                // the torch client left no trace in the store
                assertEquals(1, s.numKeys());
            }
            server.awaitLog("reason=refused: no job-token handshake", Duration.ofSeconds(10));
        }
    }
}
