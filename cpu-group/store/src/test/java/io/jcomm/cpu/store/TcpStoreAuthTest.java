package io.jcomm.cpu.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.StoreException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** The job token: who gets in, who is refused, and how fast. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpStoreAuthTest {

    private static final byte[] TOKEN = "right-token-0123456789".getBytes(UTF_8);
    private static final byte[] WRONG = "wrong-token-0123456789".getBytes(UTF_8);

    private static TcpStoreConfig.Builder client(TcpStoreServer s) {
        return TcpStoreConfig.builder().port(s.port()).timeout(Duration.ofSeconds(20));
    }

    private static void assertFastRefusal(Runnable r, String... words) {
        long t0 = System.nanoTime();
        StoreException e = assertThrows(StoreException.class, r::run);
        assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(5), "refusal was retried until the deadline");
        for (String w : words) {
            assertTrue(e.getMessage().contains(w), e.getMessage());
        }
    }

    @Test
    void onlyClientsWithTheTokenGetIn() {
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().token(TOKEN).build())) {
            for (TcpStoreDialect d : TcpStoreDialect.values()) {
                assertFastRefusal(() -> TcpStore.connect(client(server).dialect(d).build()), "requires a job token");
                assertFastRefusal(() -> TcpStore.connect(client(server).dialect(d).probe(false).token(WRONG).build()),
                        "token mismatch");
                try (TcpStore ok = TcpStore.connect(client(server).dialect(d).token(TOKEN).build())) {
                    ok.set("k-" + d, "v".getBytes(UTF_8));
                    assertArrayEquals("v".getBytes(UTF_8), ok.get("k-" + d));
                    assertTrue(ok.isJcommServer());
                }
            }
        }
    }

    @Test
    void aClientWithATokenRefusesAServerWithout() {
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.defaults())) {
            assertFastRefusal(() -> TcpStore.connect(client(server).token(TOKEN).build()), "has no job token");
        }
    }

    @Test
    void unauthenticatedIdleConnectionsAreClosedAfterTheHandshakeTimeout() throws Exception {
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().token(TOKEN)
                .handshakeTimeout(Duration.ofMillis(200)).build());
             RawConn idle = new RawConn(server.port())) {
            long t0 = System.nanoTime();
            idle.expectClosed();
            assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(4));
        }
    }

    @Test
    void tokenFilesAreReadAndChecked(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("token");
        Files.writeString(f, JobToken.generate() + "\n");
        byte[] t = JobToken.read(f);
        assertTrue(t.length == 64, "newline not stripped");
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().tokenFile(f).build());
             TcpStore s = TcpStore.connect(client(server).tokenFile(f).build())) {
            assertTrue(s.isJcommServer());
        }
        Path shortToken = dir.resolve("short");
        Files.writeString(shortToken, "secret");
        assertThrows(StoreException.class, () -> JobToken.read(shortToken));
        assertThrows(StoreException.class, () -> JobToken.read(dir.resolve("missing")));
    }
}
