package io.jcomm.mq.internal;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
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
        assertEquals(ProcessHandle.current().pid(), ShmFiles.readOwner(d).orElseThrow()[0]);
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
        assertTrue(ShmFiles.spaceProblem(base, 10, 20, "x").isEmpty());
        String m = ShmFiles.spaceProblem(Path.of("/dev/shm"), 40L << 20, 8L << 20, "the Aeron media driver").orElseThrow();
        assertTrue(m.contains("need 40.0 MiB, 8.0 MiB free"), m);
        assertTrue(m.contains("--shm-size"), m);
        assertTrue(m.contains("ipcTermLength"), m);
    }
}
