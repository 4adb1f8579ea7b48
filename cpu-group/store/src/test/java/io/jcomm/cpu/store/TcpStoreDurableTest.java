package io.jcomm.cpu.store;

import static io.jcomm.cpu.store.RawConn.f;
import static io.jcomm.cpu.store.RawConn.hex;
import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.StoreException;
import io.jcomm.cpu.store.internal.StoreLog;
import io.jcomm.testkit.FreePorts;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** A store with a data directory: every key back after a restart, bounds, exactly-once request ids. */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class TcpStoreDurableTest {

    @TempDir
    Path dir;

    private TcpStoreServer start(int port) {
        return TcpStoreServer.start(TcpStoreServerConfig.builder().port(port).name("durable-test").dataDir(dir).build());
    }

    private static TcpStore client(int port) {
        return TcpStore.connect(TcpStoreConfig.builder().port(port).timeout(Duration.ofSeconds(20)).build());
    }

    private static byte[] b(String s) {
        return s.getBytes(UTF_8);
    }

    @Test
    void aServerStartedOnTheSameDirectoryHasEveryKey() {
        int port;
        try (TcpStoreServer server = start(0); TcpStore s = client(server.port())) {
            port = server.port();
            s.set("a", b("1"));
            s.set("a", b("2"));
            assertEquals(7, s.add("n", 7));
            assertEquals(8, s.add("n", 1));
            assertArrayEquals(b("x"), s.compareSet("c", new byte[0], b("x")));
            s.append("log", b("ab"));
            s.append("log", b("cd"));
            s.multiSet(List.of("m1", "m2"), List.of(b("v1"), b("v2")));
            s.set("gone", b("soon"));
            assertTrue(s.deleteKey("gone"));
            s.set("empty", new byte[0]);
            assertEquals(7, s.numKeys());
            assertTrue(s.isJcommServer());
        }
        assertTrue(Files.exists(dir.resolve(StoreLog.FILE)));
        try (TcpStoreServer server = start(port); TcpStore s = client(server.port())) {
            assertEquals(7, s.numKeys());
            assertArrayEquals(b("2"), s.get("a"));
            assertArrayEquals(b("8"), s.get("n"));
            assertEquals(10, s.add("n", 2));
            assertArrayEquals(b("x"), s.get("c"));
            assertArrayEquals(b("abcd"), s.get("log"));
            assertArrayEquals(b("v1"), s.get("m1"));
            assertArrayEquals(b("v2"), s.get("m2"));
            assertArrayEquals(new byte[0], s.get("empty"));
            assertFalse(s.check(List.of("gone")));
            assertEquals(7, server.stats().keys());
        }
    }

    @Test
    void aRecordCutShortByACrashIsDroppedAndEverythingBeforeItLoads() throws IOException {
        try (TcpStoreServer server = start(0); TcpStore s = client(server.port())) {
            for (int i = 0; i < 100; i++) {
                s.set("k" + i, b("v" + i));
            }
        }
        Path file = dir.resolve(StoreLog.FILE);
        long good = Files.size(file);
        // a torn record: a header that promises more than is there, then a record with a bad checksum
        Files.write(file, hex("40000000 00000000 01 02 03"), StandardOpenOption.APPEND);
        try (TcpStoreServer server = start(0); TcpStore s = client(server.port())) {
            assertEquals(100, s.numKeys());
            assertArrayEquals(b("v99"), s.get("k99"));
            assertEquals(good, Files.size(file), "the torn tail is cut off");
            s.set("after", b("ok"));
        }
        byte[] all = Files.readAllBytes(file);
        assertTrue(all.length > good);
        all[all.length - 1] ^= 1; // a flipped bit in the last record (the one of "after")
        Files.write(file, all);
        try (TcpStoreServer server = start(0); TcpStore s = client(server.port())) {
            assertEquals(100, s.numKeys()); // the record fails its checksum and is dropped
            assertFalse(s.check(List.of("after")));
            assertArrayEquals(b("v98"), s.get("k98"));
        }
    }

    @Test
    void oneServerPerDirectory() {
        try (TcpStoreServer server = start(0)) {
            StoreException e = assertThrows(StoreException.class, () -> start(0));
            assertTrue(e.getMessage().contains("in use by another store server"), e.getMessage());
            assertTrue(server.stats().keys() == 0);
        }
    }

    @Test
    void aFullDataFileRefusesTheChangeWithATypedErrorAndTheServerGoesOn() {
        TcpStoreServerConfig cfg = TcpStoreServerConfig.builder().port(0).name("durable-full").dataDir(dir)
                .maxDataBytes(TcpStoreServerConfig.MAX_DATA_BYTES_MIN).build();
        byte[] big = new byte[100 * 1024];
        try (TcpStoreServer server = TcpStoreServer.start(cfg); TcpStore s = client(server.port())) {
            // overwriting one key writes 3 MiB of records into a 1 MiB file: it is rewritten as it fills
            for (int i = 0; i < 30; i++) {
                big[0] = (byte) i;
                s.set("same", big);
            }
            assertArrayEquals(big, s.get("same"));
            int stored = 1;
            StoreRefusedException refused = null;
            for (int i = 0; i < 20 && refused == null; i++) {
                try {
                    s.set("k" + i, big);
                    stored++;
                } catch (StoreRefusedException e) {
                    refused = e;
                }
            }
            assertTrue(refused != null, "20 x 100 KiB fit in a 1 MiB data file?");
            assertTrue(refused.getMessage().contains("data file full"), refused.getMessage());
            assertTrue(stored >= 8 && stored <= 10, "stored " + stored);
            // the same client and connection go on; other changes are refused the same way
            assertEquals(stored, s.numKeys());
            assertThrows(StoreRefusedException.class, () -> s.multiSet(List.of("x", "y"), List.of(big, big)));
            assertTrue(s.deleteKey("k0"));
            assertTrue(s.deleteKey("k1"));
            s.set("after-delete", big); // room again (the file is rewritten with the live keys)
            assertTrue(server.stats().changesRefused() >= 2);
        }
        Path file = dir.resolve(StoreLog.FILE);
        try (TcpStoreServer server = TcpStoreServer.start(cfg); TcpStore s = client(server.port())) {
            assertTrue(s.check(List.of("same", "after-delete")));
            assertFalse(s.check(List.of("k0")));
            assertTrue(Files.size(file) <= TcpStoreServerConfig.MAX_DATA_BYTES_MIN);
        } catch (IOException e) {
            throw new AssertionError(e);
        }
    }

    @Test
    void aFullStoreRefusesAReconnectingClientsChangeWithATypedError() {
        TcpStoreServerConfig cfg = TcpStoreServerConfig.builder().port(0).name("durable-store-full").dataDir(dir)
                .maxStoreBytes(1000).maxValueBytes(800).maxRequestBytes(1 << 20).build();
        try (TcpStoreServer server = TcpStoreServer.start(cfg); TcpStore s = client(server.port())) {
            s.set("a", new byte[800]);
            StoreRefusedException e = assertThrows(StoreRefusedException.class, () -> s.set("b", new byte[800]));
            assertTrue(e.getMessage().contains("store full"), e.getMessage());
            e = assertThrows(StoreRefusedException.class, () -> s.add("a", 1));
            assertTrue(e.getMessage().contains("not an integer"), e.getMessage());
            assertEquals(1, s.numKeys());
        }
    }

    @Test
    void aRequestIdIsAppliedOnceEvenWhenSentAgainAndAfterARestart() throws Exception {
        byte[] probe = f().u8(4).u64(1).str("\0jcomm-store/v1").bytes();
        byte[] durable = f().u8(4).u64(1).str("\0jcomm-dur/v1").bytes();
        RawConn.F tag = f().u8(4).u64(2).str("\0jcomm-req/v1").u64(24).u64(0x1111).u64(0x2222).u64(7);
        byte[] add = f().u8(3).str("/n").u64(5).bytes();
        int port = FreePorts.find();
        try (TcpStoreServer server = start(port)) {
            try (RawConn c = new RawConn(port)) {
                c.send(probe).expect(hex("00")).send(durable).expect(hex("00"));
                c.send(tag).send(add).expect(f().u8(0).u64(5));
                c.send(tag).send(add).expect(f().u8(0).u64(5)); // the same id: answered, not applied
                c.send(add).expect(f().u64(10)); // without an id: applied
            }
            assertEquals(1, server.stats().retriesAnswered());
        }
        try (TcpStoreServer server = start(port); RawConn c = new RawConn(server.port())) {
            c.send(probe).expect(hex("00"));
            c.send(tag).send(add).expect(f().u8(0).u64(5)); // remembered in the data file
            RawConn.F next = f().u8(4).u64(2).str("\0jcomm-req/v1").u64(24).u64(0x1111).u64(0x2222).u64(8);
            c.send(next).send(add).expect(f().u8(0).u64(15));
            // a request id before something that is not a change closes the connection
            c.send(next).send(hex("06")).expectClosed();
        }
    }

    @Test
    void aMemoryServerSaysSoAndAClientWaitingOnADurableOneRidesOverItsRestart() throws Exception {
        try (TcpStoreServer mem = TcpStoreServer.start(TcpStoreServerConfig.builder().port(0).build());
             RawConn c = new RawConn(mem.port())) {
            c.send(f().u8(4).u64(1).str("\0jcomm-store/v1")).expect(hex("00"));
            c.send(f().u8(4).u64(1).str("\0jcomm-dur/v1")).expect(hex("02"));
        }
        int port = FreePorts.find();
        TcpStoreServer server = start(port);
        try (TcpStore waiter = client(port); TcpStore counter = client(port)) {
            waiter.set("mine", b("m"));
            assertEquals(1, counter.add("count", 1));
            CompletableFuture<byte[]> waiting = CompletableFuture.supplyAsync(() -> waiter.get("late",
                    Duration.ofSeconds(20)));
            Thread.sleep(200);
            server.close(); // every connection breaks; nothing listens for a while
            Thread.sleep(500);
            assertFalse(waiting.isDone());
            server = start(port);
            counter.set("late", b("here")); // reconnects
            assertArrayEquals(b("here"), waiting.get(20, TimeUnit.SECONDS));
            assertEquals(2, counter.add("count", 1));
            assertArrayEquals(b("m"), waiter.get("mine"));
        } finally {
            server.close();
        }
    }

    @Test
    void aClientOfAMemoryServerStillFailsFastWhenItGoes() {
        int port = FreePorts.find();
        TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().port(port).build());
        try (TcpStore s = client(port)) {
            s.set("k", b("v"));
            server.close();
            long t0 = System.nanoTime();
            assertThrows(StoreException.class, () -> s.get("k", Duration.ofSeconds(15)));
            assertTrue(System.nanoTime() - t0 < TimeUnit.SECONDS.toNanos(5), "failed fast");
        } finally {
            server.close();
        }
    }
}
