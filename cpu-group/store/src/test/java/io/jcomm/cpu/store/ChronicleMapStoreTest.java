package io.jcomm.cpu.store;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.ProtocolException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** Store contract on a shared Chronicle Map file, two instances (like two processes) in one JVM. */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class ChronicleMapStoreTest {

    private static byte[] b(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    @Test
    void storeContractAcrossTwoMappingsOfOneFile() throws Exception {
        Path file = Path.of("/dev/shm", "jcomm-store-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime() + ".dat");
        ChronicleMapStore.Options o = ChronicleMapStore.Options.builder().timeout(Duration.ofSeconds(10)).build();
        long t0 = System.nanoTime();
        ChronicleMapStore a = ChronicleMapStore.open(file, o, true);
        try {
            long firstOpen = System.nanoTime() - t0;
            long t1 = System.nanoTime();
            try (ChronicleMapStore other = ChronicleMapStore.open(file, o, false)) {
                System.out.printf("Chronicle Map store: first open %.2f s, second %.3f s%n", firstOpen / 1e9,
                        (System.nanoTime() - t1) / 1e9);
                assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)));

                CompletableFuture<byte[]> waiter = CompletableFuture.supplyAsync(() -> other.get("late", Duration.ofSeconds(10)));
                Thread.sleep(50);
                assertFalse(waiter.isDone());
                a.set("late", b("here"));
                assertArrayEquals(b("here"), waiter.get(10, TimeUnit.SECONDS));

                CompletableFuture<?>[] adders = new CompletableFuture<?>[4];
                for (int i = 0; i < 4; i++) {
                    ChronicleMapStore s = i % 2 == 0 ? a : other;
                    adders[i] = CompletableFuture.runAsync(() -> {
                        for (int k = 0; k < 500; k++) {
                            s.add("counter", 1);
                        }
                    });
                }
                CompletableFuture.allOf(adders).get(60, TimeUnit.SECONDS);
                assertEquals(2001, other.add("counter", 1));
                assertArrayEquals(b("2001"), a.get("counter"));

                assertArrayEquals(b("x"), a.compareSet("cas", new byte[0], b("x")));
                assertArrayEquals(b("x"), other.compareSet("cas", b("wrong"), b("y")));
                assertArrayEquals(b("y"), other.compareSet("cas", b("x"), b("y")));
                assertArrayEquals(b("expected"), a.compareSet("missing", b("expected"), b("z")));
                assertFalse(a.check(List.of("missing")));

                a.append("log", b("ab"));
                other.append("log", b("cd"));
                assertArrayEquals(b("abcd"), a.get("log"));

                a.multiSet(List.of("k1", "k2"), List.of(b("v1"), b("v2")));
                List<byte[]> got = other.multiGet(List.of("k1", "k2"));
                assertArrayEquals(b("v1"), got.get(0));
                assertArrayEquals(b("v2"), got.get(1));
                assertTrue(other.check(List.of("k1", "k2", "late")));
                assertEquals(6, a.numKeys());
                assertTrue(other.deleteKey("k1"));
                assertFalse(a.deleteKey("k1"));
                assertEquals(5, a.numKeys());

                CommTimeoutException te = assertThrows(CommTimeoutException.class,
                        () -> a.wait(List.of("k2", "never"), Duration.ofMillis(100)));
                assertTrue(te.getMessage().contains("[never]"), te.getMessage());
                assertThrows(IllegalArgumentException.class, () -> a.set("big", new byte[o.maxValueBytes() + 1]));
                assertThrows(ProtocolException.class, () -> a.add("log", 1));
                assertThrows(IllegalArgumentException.class, () -> a.set("", b("x")));
                a.set("bigOk", new byte[o.maxValueBytes()]);
                assertEquals(o.maxValueBytes(), other.get("bigOk").length);
            }
            assertTrue(Files.exists(file), "the non-owner does not delete");
        } finally {
            a.close();
        }
        assertThrows(CommClosedException.class, () -> a.set("x", b("y")));
        assertFalse(Files.exists(file), "the owner deletes the file on close");
    }
}
