package io.jcomm.mq.registry;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.internal.shm.ProcessIdentity;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/** The host-wide job registry on a private file: register, list, remove, dead pids cleaned, background registration. */
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
        assertEquals(Path.of(JobRegistry.DEFAULT_FILE), JobRegistry.configuredFile(Map.of()).orElseThrow());
        assertEquals(Path.of("/tmp/x.cm"), JobRegistry.configuredFile(Map.of(JobRegistry.ENV, "/tmp/x.cm")).orElseThrow());
        assertTrue(JobRegistry.configuredFile(Map.of(JobRegistry.ENV, "off")).isEmpty());
        assertNull(JobRegistration.start(Map.of(JobRegistry.ENV, "off"), "j", 0, 1, null, List::of));
        assertEquals("127.0.0.1:29500", JobRegistry.Entry.jobOf("jcomm-job", "jcomm-job", "127.0.0.1", 29500));
        assertEquals("train@h:1", JobRegistry.Entry.jobOf("train", "jcomm-job", "h", 1));
    }

    @Test
    void aRegistrationThatCannotOpenTheRegistryIsHarmless() throws Exception {
        JobRegistration r = JobRegistration.start(Map.of(JobRegistry.ENV, "/nonexistent-dir/registry.cm"), "j", 0, 1, null,
                List::of);
        Thread.sleep(200);
        assertFalse(r.registered());
        r.close();
    }

    @Test
    void registerListRemoveAndDeadPidsCleaned() throws Exception {
        Path file = Path.of("/dev/shm", "jcomm-registry-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime() + ".cm");
        try (JobRegistry reg = JobRegistry.open(file)) {
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

            // the background registration: registers, follows the group names, removes itself at close
            List<String> groups = new CopyOnWriteArrayList<>(List.of("world"));
            JobRegistration r = JobRegistration.start(Map.of(JobRegistry.ENV, file.toString()), "job@h:1", 3, 8,
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
            JobRegistration later = JobRegistration.start(Map.of(JobRegistry.ENV, file.toString()), "job@h:2", 0, 2, null,
                    List::of, hostReady);
            Thread.sleep(300);
            assertFalse(later.registered(), "registered before the stage completed");
            assertTrue(reg.scan().live().isEmpty());
            hostReady.completeExceptionally(new IllegalStateException("no media"));
            await(later::registered, "the registration after the stage");
            assertEquals("job@h:2", reg.scan().live().get(0).job());
            later.close();
            // closed while waiting: never opens the registry
            JobRegistration never = JobRegistration.start(Map.of(JobRegistry.ENV, file.toString()), "job@h:3", 0, 1, null,
                    List::of, new CompletableFuture<Void>());
            never.close();
            Thread.sleep(100);
            assertFalse(never.registered());
            assertTrue(reg.scan().live().isEmpty());
        } finally {
            Files.deleteIfExists(file);
        }
    }
}
