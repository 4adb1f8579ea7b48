package io.jcomm.runtime.shm;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ShmFilesTest {

    @TempDir
    Path base;

    private static long deadPid() throws Exception {
        Process p = new ProcessBuilder("true").start();
        assertTrue(p.waitFor(10, TimeUnit.SECONDS));
        long pid = p.pid();
        assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false));
        return pid;
    }

    @Test
    void ownedDirectoriesArePrivateAndMarked() throws Exception {
        Path d = ShmFiles.createOwnedDirectory(base, "jcomm-test-", "my tag/../x");
        assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(d)));
        assertTrue(d.getFileName().toString().startsWith("jcomm-test-mytag..x-" + ProcessHandle.current().pid() + "-"));
        assertEquals(ProcessIdentity.self(), ShmFiles.readOwner(d).orElseThrow());
        assertTrue(ShmFiles.ownerAlive(d));
        assertTrue(ShmFiles.deleteRecursively(d));
        assertFalse(Files.exists(d));
    }

    @Test
    void staleCleanupRemovesOnlyOurDirectoriesOfDeadOwners() throws Exception {
        long dead = deadPid();
        Path live = ShmFiles.createOwnedDirectory(base, "jcomm-test-", "live");
        Path staleByMarker = base.resolve("jcomm-test-job-" + dead + "-0000abcd");
        Files.createDirectories(staleByMarker.resolve("aeron/publications"));
        Files.writeString(staleByMarker.resolve(ShmFiles.OWNER_FILE), dead + " 0\n", StandardCharsets.US_ASCII);
        Files.write(staleByMarker.resolve("aeron/publications/1.logbuffer"), new byte[100]);
        Path staleByName = base.resolve("jcomm-test-job-" + dead + "-0000abce");
        Files.createDirectories(staleByName);
        // our pid, but another start time: a recycled pid
        Path recycled = base.resolve("jcomm-test-job-" + ProcessHandle.current().pid() + "-0000abcf");
        Files.createDirectories(recycled);
        Files.writeString(recycled.resolve(ShmFiles.OWNER_FILE), ProcessHandle.current().pid() + " 1000\n");
        Path foreign = base.resolve("aeron-someone-" + dead + "-0000abcd");
        Files.createDirectories(foreign);
        Path otherPrefix = base.resolve("jcomm-other-job-" + dead + "-0000abcd");
        Files.createDirectories(otherPrefix);

        List<Path> removed = ShmFiles.cleanStale(base, "jcomm-test-");
        assertEquals(3, removed.size(), removed.toString());
        assertFalse(Files.exists(staleByMarker));
        assertFalse(Files.exists(staleByName));
        assertFalse(Files.exists(recycled));
        assertTrue(Files.exists(live));
        assertTrue(Files.exists(foreign));
        assertTrue(Files.exists(otherPrefix));
    }

    @Test
    void spaceProblemSaysWhatToDo() {
        assertTrue(ShmFiles.spaceProblem(base, 10, 20, "x", "less").isEmpty());
        String m = ShmFiles.spaceProblem(Path.of("/dev/shm"), 40L << 20, 8L << 20, "the Aeron media driver",
                "smaller term lengths (MessageQueueOptions.ipcTermLength)").orElseThrow();
        assertTrue(m.contains("need 40.0 MiB, 8.0 MiB free"), m);
        assertTrue(m.contains("--shm-size"), m);
        assertTrue(m.contains("ipcTermLength"), m);
    }

    @Test
    void staleCleanupRemovesFilesOfDeadOwnersByTheirName() throws Exception {
        long dead = deadPid();
        Path live = base.resolve(ShmFiles.ownedName("jcomm-ring-", "r0to1.g1.tp0"));
        Files.write(live, new byte[8]);
        Path stale = base.resolve("jcomm-ring-r1to0.g1.tp0-" + dead + "-0123abcd");
        Files.write(stale, new byte[8]);
        Path notOwned = base.resolve("jcomm-ring-shared-name");
        Files.write(notOwned, new byte[8]);
        assertEquals(List.of(stale), ShmFiles.cleanStale(base, "jcomm-ring-"));
        assertTrue(Files.exists(live));
        assertTrue(Files.exists(notOwned));
    }

    @Test
    void filesOfAnySizeAreZeroFromConcurrentCreators() throws Exception {
        // the zeros come from one shared buffer of 64 KiB: sizes below, at and past it, not multiples
        long[] sizes = {1, 4095, 1 << 16, (1 << 16) + 1, 200_001, 3 << 20};
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(3);
        try {
            List<java.util.concurrent.Future<Path>> made = new java.util.ArrayList<>();
            for (int round = 0; round < 3; round++) {
                for (long size : sizes) {
                    made.add(pool.submit(() -> {
                        Path f = base.resolve(ShmFiles.ownedName("jcomm-test-", "zeros"));
                        MappedByteBuffer m = ShmFiles.createMapped(f, size, "a test file", "less");
                        for (int i = 0; i < m.capacity(); i++) {
                            if (m.get(i) != 0) {
                                throw new AssertionError(f + " has a non-zero byte at " + i);
                            }
                        }
                        m.put(m.capacity() - 1, (byte) 7); // a writer's bytes do not reach the next file
                        ShmFiles.unmap(m);
                        assertEquals(size, Files.size(f));
                        return f;
                    }));
                }
            }
            for (java.util.concurrent.Future<Path> f : made) {
                assertTrue(ShmFiles.unlink(f.get(60, TimeUnit.SECONDS)));
            }
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void createdFilesArePrivateAllocatedAndNeverReplaceAnother() throws Exception {
        Path f = base.resolve(ShmFiles.ownedName("jcomm-test-", "create"));
        MappedByteBuffer m = ShmFiles.createMapped(f, 1 << 16, "a test file", "less");
        assertEquals(1 << 16, m.capacity());
        assertEquals(1 << 16, Files.size(f), "allocated through the file, not sparse on first touch");
        assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(f)));
        m.putLong(0, 42L);
        MappedByteBuffer peer = ShmFiles.mapExisting(f, false, 1 << 16, 1 << 16);
        assertEquals(42L, peer.getLong(0));
        assertThrows(IOException.class, () -> ShmFiles.mapExisting(f, false, 1 << 17, 1 << 18));
        assertThrows(FileAlreadyExistsException.class, () -> ShmFiles.createMapped(f, 64, "again", "less"));
        ShmFiles.unmap(peer);
        assertTrue(ShmFiles.unlink(f));
        assertFalse(Files.exists(f));
        ShmFiles.unmap(m);
    }

    /** Bytes the file system holds for {@code f} ({@code stat}: blocks of 512 bytes). */
    private static long allocatedBytes(Path f) throws Exception {
        Process p = new ProcessBuilder("stat", "-c", "%b", f.toString()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.US_ASCII).trim();
        assertTrue(p.waitFor(10, TimeUnit.SECONDS) && p.exitValue() == 0, out);
        return Long.parseLong(out) * 512;
    }

    @Test
    void partlyCreatedFilesHoldMemoryOnlyWhereTheCallerAllocates() throws Exception {
        // on the tmpfs the rings live on where there is one: what matters is memory, not disk blocks
        Path dir = Files.isDirectory(ShmFiles.DEFAULT_DIR) && Files.isWritable(ShmFiles.DEFAULT_DIR)
                ? ShmFiles.DEFAULT_DIR : base;
        Path f = dir.resolve(ShmFiles.ownedName("jcomm-test-", "partly"));
        long size = 8L << 20;
        ShmFiles.Partial p = ShmFiles.createPartly(f, size, "a test file", "less");
        try {
            assertEquals(size, Files.size(f), "the full length, for peers that map it");
            assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(f)));
            assertTrue(allocatedBytes(f) <= 64 << 10, "nothing but the last page yet: " + allocatedBytes(f));
            p.allocate(1 << 20, 1 << 20);
            long held = allocatedBytes(f);
            assertTrue(held >= 1 << 20 && held <= (1 << 20) + (128 << 10), "the allocated MiB: " + held);
            MappedByteBuffer m = p.map();
            assertEquals(size, m.capacity());
            assertEquals(0L, m.getLong(1 << 20));
            m.putLong(1 << 20, 42L);
            p.close(); // the mapping outlives the channel
            assertEquals(42L, m.getLong(1 << 20));
            assertThrows(IOException.class, () -> p.allocate(0, 4096), "a closed file allocates nothing");
            ShmFiles.unmap(m);
        } finally {
            p.close();
            ShmFiles.unlink(f);
        }
        assertThrows(IOException.class, () -> ShmFiles.createPartly(dir.resolve("jcomm-test-huge-1-0123abcd"),
                Long.MAX_VALUE / 4, "a ring", "less"));
    }

    @Test
    void staleCleanupLooksOncePerOwnerAndRemovesEveryFileOfADeadOne() throws Exception {
        long dead = deadPid();
        List<Path> stale = new java.util.ArrayList<>();
        for (int i = 0; i < 50; i++) {
            Path p = base.resolve("jcomm-fast-r" + i + ".g1.tp0-" + dead + "-0123ab" + String.format("%02x", i));
            Files.write(p, new byte[8]);
            stale.add(p);
        }
        List<Path> live = new java.util.ArrayList<>();
        for (int i = 0; i < 50; i++) {
            Path p = base.resolve(ShmFiles.ownedName("jcomm-fast-", "r" + i + ".g1.tp0"));
            Files.write(p, new byte[8]);
            live.add(p);
        }
        List<Path> removed = new java.util.ArrayList<>(ShmFiles.cleanStale(base, "jcomm-fast-"));
        removed.sort(null);
        stale.sort(null);
        assertEquals(stale, removed);
        for (Path p : live) {
            assertTrue(Files.exists(p), p.toString());
        }
    }

    @Test
    void creationFailsWithAMessageAndLeavesNothing() throws Exception {
        Path missing = base.resolve("no-such-dir").resolve("jcomm-test-x-1-0123abcd");
        IOException e = assertThrows(IOException.class, () -> ShmFiles.createMapped(missing, 64, "a ring", "less"));
        assertTrue(e.getMessage().contains("not a writable directory"), e.getMessage());
        Path huge = base.resolve(ShmFiles.ownedName("jcomm-test-", "huge"));
        e = assertThrows(IOException.class, () -> ShmFiles.createMapped(huge, Long.MAX_VALUE / 4, "a ring",
                "tcp.shm.ringBytes"));
        assertTrue(e.getMessage().contains("tcp.shm.ringBytes") && e.getMessage().contains("--shm-size"), e.getMessage());
        assertFalse(Files.exists(huge));
    }

    @Test
    void offeredPathsMustBeOwnedNamesDirectlyInTheDirectory() {
        String good = base.resolve("jcomm-ring-r1to0.g1.tp0-123-0123abcd").toString();
        assertEquals(Path.of(good), ShmFiles.offered(base, good, "jcomm-ring-"));
        assertNull(ShmFiles.offered(base, good, "jcomm-stage-"), "another kind");
        assertNull(ShmFiles.offered(base, "/etc/passwd", "jcomm-ring-"));
        assertNull(ShmFiles.offered(base, base.resolve("../jcomm-ring-r1to0.g1.tp0-123-0123abcd").toString(),
                "jcomm-ring-"), "outside the directory");
        assertNull(ShmFiles.offered(base, base.resolve("jcomm-ring-x").toString(), "jcomm-ring-"), "not an owned name");
        assertNull(ShmFiles.offered(base, "\u0000bad", "jcomm-ring-"));
    }

    @Test
    void processIdentityTellsARecycledPidFromItsOwner() throws Exception {
        ProcessIdentity self = ProcessIdentity.self();
        assertTrue(self.alive());
        assertTrue(self.startTicks() > 0, "Linux /proc start time");
        assertEquals(self, ProcessIdentity.of(self.pid()));
        assertEquals(self, ProcessIdentity.parseMarker(self.marker()));
        assertFalse(new ProcessIdentity(self.pid(), self.startTicks() + 1).alive(), "same pid, other start");
        assertFalse(ProcessIdentity.of(deadPid()).alive());
        assertNull(ProcessIdentity.watchable(deadPid()));
        assertNull(ProcessIdentity.parseMarker("12 x"));
    }
}
