package io.jcomm.runtime.registry;

import io.jcomm.api.config.Settings;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.runtime.shm.ProcessIdentity;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The host-wide job registry in a private directory: register, list, remove, dead pids cleaned, background
 * registration, hostile files skipped, the directory removed with its last entry and made again.
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class JobRegistryTest {

    private static void await(BooleanSupplier cond, String what) throws InterruptedException {
        long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (!cond.getAsBoolean()) {
            assertTrue(System.nanoTime() < end, "timed out waiting for " + what);
            Thread.sleep(20);
        }
    }

    @Test
    void configuredFile() {
        assertEquals(Path.of(JobRegistry.DEFAULT_DIRECTORY), JobRegistry.configuredDirectory(Map.of()).orElseThrow());
        assertEquals(Path.of("/tmp/x"), JobRegistry.configuredDirectory(Map.of(Settings.REGISTRY.name(), "/tmp/x")).orElseThrow());
        assertTrue(JobRegistry.configuredDirectory(Map.of(Settings.REGISTRY.name(), "off")).isEmpty());
        assertNull(JobRegistration.start(Map.of(Settings.REGISTRY.name(), "off"), "j", 0, 1, null, List::of));
        assertEquals("127.0.0.1:29500", JobRegistry.Entry.jobOf("jcomm-job", "jcomm-job", "127.0.0.1", 29500));
        assertEquals("train@h:1", JobRegistry.Entry.jobOf("train", "jcomm-job", "h", 1));
    }

    @Test
    void aRegistrationThatCannotOpenTheRegistryIsHarmless() throws Exception {
        JobRegistration r = JobRegistration.start(Map.of(Settings.REGISTRY.name(), "/nonexistent-dir/registry"), "j", 0, 1, null,
                List::of);
        Thread.sleep(200);
        assertFalse(r.registered());
        r.close();
    }

    @Test
    void registerListRemoveAndDeadPidsCleaned() throws Exception {
        Path file = Path.of("/dev/shm", "jcomm-registry-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        try (JobRegistry reg = JobRegistry.open(file)) {
            assertTrue(Files.isDirectory(file));
            assertEquals("rwx------", PosixFilePermissions.toString(Files.getPosixFilePermissions(file)));
            ProcessIdentity me = ProcessIdentity.self();
            JobRegistry.Entry mine = new JobRegistry.Entry("train@127.0.0.1:29500", 1, 4, me.pid(), me.startTicks(), 7,
                    List.of("world", "tp:0"), "/dev/shm/jcomm-rec-job-1-ab", 1234L);
            reg.register(mine);
            // a process that has exited, and one whose pid was reused (another start time)
            Process child = new ProcessBuilder("sleep", "30").start();
            ProcessIdentity childId = ProcessIdentity.of(child.pid());
            child.destroy();
            assertTrue(child.waitFor(10, TimeUnit.SECONDS));
            JobRegistry.Entry gone = new JobRegistry.Entry("train@127.0.0.1:29500", 2, 4, childId.pid(),
                    childId.startTicks(), 1, List.of("world"), "", 1L);
            JobRegistry.Entry reused = new JobRegistry.Entry("other", 0, 1, me.pid(), me.startTicks() + 1, 1, List.of(), "", 1L);
            reg.register(gone);
            reg.register(reused);

            JobRegistry.Scan s = reg.scan();
            assertEquals(List.of(mine), s.live());
            assertEquals(2, s.dead().size(), s.toString());
            assertTrue(s.dead().contains(gone) && s.dead().contains(reused), s.toString());
            JobRegistry.Scan again = reg.scan();
            assertEquals(List.of(mine), again.live());
            assertTrue(again.dead().isEmpty(), "dead entries are deleted by the scan that finds them");

            assertTrue(reg.remove(mine));
            assertFalse(reg.remove(mine));
            assertTrue(reg.scan().live().isEmpty());
            assertFalse(Files.exists(file), "the last entry's removal removes the directory");
            reg.register(mine); // made again
            assertEquals(List.of(mine), reg.scan().live());
            assertEquals("rw-------", PosixFilePermissions.toString(Files.getPosixFilePermissions(
                    file.resolve(JobRegistry.KEY_PREFIX + me.pid() + "-" + me.startTicks() + "-7"))));
            assertTrue(reg.remove(mine));

            // the background registration: registers, follows the group names, removes itself at close
            List<String> groups = new CopyOnWriteArrayList<>(List.of("world"));
            JobRegistration r = JobRegistration.start(Map.of(Settings.REGISTRY.name(), file.toString()), "job@h:1", 3, 8,
                    Path.of("/dev/shm/jcomm-rec-x"), () -> List.copyOf(groups));
            await(r::registered, "the registration");
            JobRegistry.Entry e = reg.scan().live().get(0);
            assertEquals("job@h:1", e.job());
            assertEquals(3, e.rank());
            assertEquals(8, e.worldSize());
            assertEquals(me.pid(), e.pid());
            assertEquals(List.of("world"), e.groups());
            assertEquals(Path.of("/dev/shm/jcomm-rec-x"), e.recorder().orElseThrow());
            groups.add("pp:1");
            await(() -> reg.scan().live().get(0).groups().equals(List.of("pp:1", "world")), "the new group names");
            r.close();
            assertFalse(r.registered());
            assertTrue(reg.scan().live().isEmpty());

            // with a stage to wait for, the registry is opened only once it completed (here: failed)
            CompletableFuture<Void> hostReady = new CompletableFuture<>();
            JobRegistration later = JobRegistration.start(Map.of(Settings.REGISTRY.name(), file.toString()), "job@h:2", 0, 2, null,
                    List::of, hostReady);
            Thread.sleep(300);
            assertFalse(later.registered(), "registered before the stage completed");
            assertTrue(reg.scan().live().isEmpty());
            hostReady.completeExceptionally(new IllegalStateException("no media"));
            await(later::registered, "the registration after the stage");
            assertEquals("job@h:2", reg.scan().live().get(0).job());
            later.close();
            // closed while waiting: never opens the registry
            JobRegistration never = JobRegistration.start(Map.of(Settings.REGISTRY.name(), file.toString()), "job@h:3", 0, 1, null,
                    List::of, new CompletableFuture<Void>());
            never.close();
            Thread.sleep(100);
            assertFalse(never.registered());
            assertTrue(reg.scan().live().isEmpty());
        } finally {
            deleteTree(file);
        }
    }

    @Test
    void filesThatAreNotEntriesAreSkippedAndTheScanGoesOn() throws Exception {
        Path dir = Path.of("/dev/shm", "jcomm-registry-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        try (JobRegistry reg = JobRegistry.open(dir)) {
            ProcessIdentity me = ProcessIdentity.self();
            JobRegistry.Entry mine = new JobRegistry.Entry("j@h:1", 0, 2, me.pid(), me.startTicks(), 11, List.of("world"),
                    "", 5L);
            reg.register(mine);
            String key = JobRegistry.KEY_PREFIX + me.pid() + "-" + me.startTicks();
            // garbage, another format, an entry under another entry's name, an oversized file, a directory, a link
            Files.write(dir.resolve(key + "-1"), new byte[] {(byte) 0xff, 0, 1, 2});
            Files.writeString(dir.resolve(key + "-2"), "jcomm-registry-v0\njob=x\npid=1\n");
            JobRegistry.Entry other = new JobRegistry.Entry("j@h:1", 1, 2, me.pid(), me.startTicks(), 99, List.of(), "", 5L);
            Files.write(dir.resolve(key + "-3"), other.encode());
            byte[] big = new byte[JobRegistry.MAX_ENTRY_BYTES + 1];
            byte[] head = mine.encode();
            System.arraycopy(head, 0, big, 0, head.length);
            Files.write(dir.resolve(key + "-4"), big);
            Files.createDirectory(dir.resolve(key + "-5"));
            Files.createSymbolicLink(dir.resolve(key + "-6"), dir.resolve(key + "-11"));
            Files.writeString(dir.resolve("unrelated"), "x");
            JobRegistry.Scan s = reg.scan();
            assertEquals(List.of(mine), s.live(), s.toString());
            assertTrue(s.dead().isEmpty(), s.toString());
            // a temporary file of a dead writer is cleaned; a live writer's stays
            Process child = new ProcessBuilder("sleep", "30").start();
            ProcessIdentity childId = ProcessIdentity.of(child.pid());
            child.destroy();
            assertTrue(child.waitFor(10, TimeUnit.SECONDS));
            Path deadTmp = dir.resolve(JobRegistry.TEMP_PREFIX + JobRegistry.KEY_PREFIX + childId.pid() + "-"
                    + childId.startTicks() + "-1");
            Path liveTmp = dir.resolve(JobRegistry.TEMP_PREFIX + key + "-12");
            Files.writeString(deadTmp, "half");
            Files.writeString(liveTmp, "half");
            reg.scan();
            assertFalse(Files.exists(deadTmp));
            assertTrue(Files.exists(liveTmp));
            assertEquals(childId, JobRegistry.writerOf(JobRegistry.KEY_PREFIX + childId.pid() + "-" + childId.startTicks() + "-1"));
            assertNull(JobRegistry.writerOf("proc-1-2"));
            assertNull(JobRegistry.writerOf("proc-x-2-3"));
            assertNull(JobRegistry.writerOf("proc-99999999999999999999-2-3"));
            // a second view of the same directory (another process) sees the same entries
            try (JobRegistry again = JobRegistry.open(dir)) {
                assertEquals(List.of(mine), again.scan().live());
            }
            // the directory stays while files are in it
            assertTrue(reg.remove(mine));
            assertTrue(Files.isDirectory(dir));
            assertThrows(io.jcomm.api.StoreException.class, () -> reg.register(new JobRegistry.Entry("j", 0, 1, me.pid(),
                    me.startTicks(), 13, java.util.Collections.nCopies(2000, "a-long-group-name"), "", 1L)),
                    "an entry larger than a reader accepts is refused");
        } finally {
            deleteTree(dir);
        }
        assertThrows(IllegalStateException.class, () -> {
            JobRegistry r = JobRegistry.open(dir);
            r.close();
            r.scan();
        });
        deleteTree(dir);
    }

    @Test
    void aSymbolicLinkOrAFileInThePlaceOfTheDirectoryIsRefused(@TempDir Path tmp) throws Exception {
        Path target = Files.createDirectory(tmp.resolve("elsewhere"));
        Path link = Files.createSymbolicLink(tmp.resolve("registry"), target);
        io.jcomm.api.StoreException e = assertThrows(io.jcomm.api.StoreException.class, () -> JobRegistry.open(link));
        assertTrue(e.getMessage().contains("symbolic link"), e.getMessage());
        e = assertThrows(io.jcomm.api.StoreException.class, () -> JobRegistry.openIfExists(link));
        assertTrue(e.getMessage().contains("symbolic link"), e.getMessage());
        // a reader never makes the directory
        assertTrue(JobRegistry.openIfExists(tmp.resolve("absent")).isEmpty());
        assertFalse(Files.exists(tmp.resolve("absent")));
        assertTrue(JobRegistry.openIfExists(target).isPresent());
        Path file = Files.writeString(tmp.resolve("file"), "x");
        e = assertThrows(io.jcomm.api.StoreException.class, () -> JobRegistry.open(file));
        assertTrue(e.getMessage().contains("not a directory"), e.getMessage());
        // another user's directory in its place (needs root to make one here; CI runs as root)
        Path foreign = Files.createDirectory(tmp.resolve("foreign"));
        try {
            Files.setAttribute(foreign, "unix:uid", 65534);
        } catch (java.io.IOException x) {
            org.junit.jupiter.api.Assumptions.abort("cannot give a directory to another user here (not root): " + x);
        }
        e = assertThrows(io.jcomm.api.StoreException.class, () -> JobRegistry.open(foreign));
        assertTrue(e.getMessage().contains("belongs to uid 65534"), e.getMessage());
        // a registration pointed at either is harmless
        JobRegistration r = JobRegistration.start(Map.of(Settings.REGISTRY.name(), link.toString()), "j", 0, 1, null, List::of);
        Thread.sleep(200);
        assertFalse(r.registered());
        r.close();
        try (var files = Files.list(target)) {
            assertEquals(0, files.count(), "nothing was written through the link");
        }
    }

    @Test
    void concurrentRegistrationsAndRemovalsRaceTheDirectorysRemovalSafely() throws Exception {
        Path dir = Path.of("/dev/shm", "jcomm-registry-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        ProcessIdentity me = ProcessIdentity.self();
        int threads = 8;
        int rounds = 300;
        java.util.concurrent.ExecutorService pool = java.util.concurrent.Executors.newFixedThreadPool(threads);
        try {
            List<java.util.concurrent.Future<?>> done = new java.util.ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int serial = 100 + t;
                done.add(pool.submit(() -> {
                    // each "process" its own view, as separate JVMs would have
                    try (JobRegistry reg = JobRegistry.open(dir)) {
                        JobRegistry.Entry e = new JobRegistry.Entry("race@h:1", serial, threads, me.pid(), me.startTicks(),
                                serial, List.of("world"), "", 1L);
                        for (int i = 0; i < rounds; i++) {
                            reg.register(e); // the last to leave may have just removed the directory
                            assertTrue(reg.scan().live().contains(e));
                            assertTrue(reg.remove(e));
                        }
                    }
                    return null;
                }));
            }
            for (java.util.concurrent.Future<?> f : done) {
                f.get(60, TimeUnit.SECONDS);
            }
            assertFalse(Files.exists(dir), "the directory goes with the last entry");
        } finally {
            // a failed round leaves the other threads running: let them stop before the clean-up, which
            // they would otherwise outrun by making the directory again
            pool.shutdownNow();
            pool.awaitTermination(30, TimeUnit.SECONDS); // bounded: each thread ends within its 300 rounds
            deleteTree(dir);
        }
    }

    private static void deleteTree(Path dir) throws java.io.IOException {
        if (!Files.exists(dir, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
            return;
        }
        try (var files = Files.walk(dir)) {
            for (Path p : files.sorted(java.util.Comparator.reverseOrder()).toList()) {
                Files.deleteIfExists(p);
            }
        }
    }
}
