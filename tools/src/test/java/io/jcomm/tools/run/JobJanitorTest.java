package io.jcomm.tools.run;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.runtime.shm.ProcessIdentity;
import io.jcomm.runtime.shm.ShmFiles;
import io.jcomm.runtime.registry.JobRegistry;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * The janitor on a private shared-memory directory and a real job process: the job's own files are
 * leftovers, the host's job registry never is, and the registry entries of dead workers are removed.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class JobJanitorTest {

    @Test
    void mapsAreScannedAcrossPiecesOfAnyBufferSize() throws Exception {
        StringBuilder maps = new StringBuilder();
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            maps.append("7f00").append(i).append("-7f01 rw-s 00000000 00:1a ").append(i).append("    ");
            switch (i % 5) {
                case 0:
                    maps.append("/dev/shm/jcomm-ring-").append(i);
                    expected.add("jcomm-ring-" + i);
                    break;
                case 1:
                    maps.append("/dev/shm/jcomm-gone-").append(i).append(" (deleted)");
                    break;
                case 2:
                    maps.append("/usr/lib/jvm/lib/libjvm.so");
                    break;
                case 3:
                    maps.append("/dev/shm/d").append(i).append("/inner-file");
                    expected.add("d" + i + "/inner-file");
                    break;
                default:
                    maps.append("[heap]");
            }
            if (i != 199) {
                maps.append('\n');
            }
        }
        byte[] bytes = maps.toString().getBytes(StandardCharsets.ISO_8859_1);
        for (int size : new int[] {96, 97, 128, 1000, 4096, 1 << 18}) {
            List<String> found = new ArrayList<>();
            JobJanitor.scanMaps(new java.io.ByteArrayInputStream(bytes), new byte[size], "/dev/shm/", found::add);
            assertEquals(expected, found, "buffer of " + size);
        }
        // a line longer than the buffer is skipped whole, the next one still read
        String longLine = "7f-7f r--p 0 0:0 0 /opt/" + "x".repeat(300) + "/dev/shm/not-this\n7f-7f rw-s 0 0:0 0 /dev/shm/this";
        List<String> found = new ArrayList<>();
        JobJanitor.scanMaps(new java.io.ByteArrayInputStream(longLine.getBytes(StandardCharsets.ISO_8859_1)), new byte[64],
                "/dev/shm/", found::add);
        assertEquals(List.of("this"), found);
    }

    @Test
    void theRegistryIsSharedNotAJobsLeftoverAndDeadWorkersEntriesAreRemoved(@TempDir Path shm) throws Exception {
        Path registryDir = shm.resolve("jcomm-registry");
        Path own = shm.resolve("jcomm-fast-r0-77");
        Files.writeString(own, "x");
        JobRegistry.Entry other;
        try (JobRegistry registry = JobRegistry.open(registryDir)) {
            // a worker that holds its own file and a file inside the registry open, as a writer does
            Path inside = Files.writeString(registryDir.resolve(".tmp-proc-1-1-1"), "half");
            Process worker = new ProcessBuilder("bash", "-c", "exec 3<" + own + " 4<" + inside + "; sleep 30").start();
            ProcessIdentity id = ProcessIdentity.of(worker.pid());
            JobRegistry.Entry mine = new JobRegistry.Entry("j@h:1", 0, 1, id.pid(), id.startTicks(), 1, List.of("world"), "", 1L);
            registry.register(mine);
            ProcessIdentity me = ProcessIdentity.self();
            other = new JobRegistry.Entry("other@h:2", 0, 1, me.pid(), me.startTicks(), 2, List.of(), "", 1L);
            registry.register(other); // another job's live process

            JobJanitor janitor = new JobJanitor(shm, registryDir);
            janitor.add(worker.toHandle());
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            Set<String> left;
            do {
                janitor.sample(true);
                left = janitor.leftoverShm();
            } while (!left.contains(own.getFileName().toString()) && System.nanoTime() < end);
            assertTrue(left.contains(own.getFileName().toString()), left.toString());
            assertFalse(left.contains("jcomm-registry"), "the registry was taken for the job's: " + left);

            worker.destroyForcibly(); // killed: it could not remove its entry
            assertTrue(worker.waitFor(10, TimeUnit.SECONDS));
            List<Set<String>> cleaned = janitor.cleanShm();
            assertEquals(Set.of(own.getFileName().toString()), cleaned.get(0));
            assertTrue(Files.isDirectory(registryDir), "cleanShm left the registry alone");
            assertEquals(1, janitor.cleanRegistry(), "the dead worker's entry");
            assertEquals(List.of(other), registry.scan().live());
            assertEquals(0, janitor.cleanRegistry());
        }
        assertEquals(0, new JobJanitor(shm, null).cleanRegistry(), "no registry");
    }

    /**
     * A worker that mapped another job's region (a kv-transfer write into a peer job's shared memory)
     * must not make that region this job's leftover while its owner lives.
     */
    @Test
    void anotherLiveJobsEntryThatAWorkerHeldIsNotALeftover(@TempDir Path shm) throws Exception {
        // owned by this test's JVM: alive, and not a process of the job
        Path peers = ShmFiles.createOwnedDirectory(shm, "jcomm-kv-", "decode0");
        Path region = Files.writeString(peers.resolve("region-1"), "x");
        Path own = Files.writeString(shm.resolve("jcomm-held-by-the-job"), "x");
        Process worker = new ProcessBuilder("bash", "-c", "exec 3<" + region + " 4<" + own + "; sleep 30").start();
        try {
            JobJanitor janitor = new JobJanitor(shm, null);
            janitor.add(worker.toHandle());
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            do {
                janitor.sample(true);
            } while (!janitor.leftoverShm().contains("jcomm-held-by-the-job") && System.nanoTime() < end);
            assertEquals(Set.of("jcomm-held-by-the-job"), janitor.leftoverShm());
            worker.destroyForcibly();
            assertTrue(worker.waitFor(10, TimeUnit.SECONDS));
            assertEquals(List.of(Set.of("jcomm-held-by-the-job"), Set.of()), janitor.cleanShm());
            assertTrue(Files.exists(region), "the live peer's region is still there");
        } finally {
            worker.destroyForcibly();
        }
    }

    @Test
    void aSampleWithoutTheShmScanRecordsTheProcessesOnly(@TempDir Path shm) throws Exception {
        Path held = Files.writeString(shm.resolve("jcomm-held"), "x"); // no pid in its name
        Process worker = new ProcessBuilder("bash", "-c", "exec 3<" + held + "; sleep 30 & echo $!; wait").start();
        BufferedReader w = new BufferedReader(new InputStreamReader(worker.getInputStream(), StandardCharsets.UTF_8));
        long child = Long.parseLong(w.readLine().trim());
        try {
            JobJanitor janitor = new JobJanitor(shm, null);
            janitor.add(worker.toHandle());
            janitor.sample(false);
            assertTrue(janitor.pids().contains(child), "the worker's child: " + janitor.pids());
            assertEquals(Set.of(), janitor.leftoverShm(), "no shared-memory scan");
            janitor.sample(true);
            assertEquals(Set.of("jcomm-held"), janitor.leftoverShm(), "the file the worker holds open");
        } finally {
            ProcessHandle.of(child).ifPresent(ProcessHandle::destroyForcibly);
            worker.destroyForcibly();
        }
    }

    @Test
    void descendantsAreFoundInsideAndOutsideThisJvmsOwnTree(@TempDir Path shm) throws Exception {
        // a worker of ours with a child, and a process that left our tree (its parent exited) with a child
        Process worker = new ProcessBuilder("bash", "-c", "sleep 30 & echo $!; wait").start();
        Process detach = new ProcessBuilder("bash", "-c", "(bash -c 'sleep 30 & echo $$ $!; wait' &); sleep 0.1").start();
        Process bystander = new ProcessBuilder("sleep", "30").start(); // a child of this JVM, of no job
        BufferedReader w = new BufferedReader(new InputStreamReader(worker.getInputStream(), StandardCharsets.UTF_8));
        BufferedReader o = new BufferedReader(new InputStreamReader(detach.getInputStream(), StandardCharsets.UTF_8));
        long workerChild = Long.parseLong(w.readLine().trim());
        String[] outside = o.readLine().trim().split(" ");
        ProcessHandle orphan = ProcessHandle.of(Long.parseLong(outside[0])).orElseThrow();
        long orphanChild = Long.parseLong(outside[1]);
        try {
            assertTrue(detach.waitFor(10, TimeUnit.SECONDS));
            assertFalse(ProcessHandle.current().descendants().anyMatch(h -> h.pid() == orphan.pid()),
                    "the detached process is outside this JVM's tree");
            JobJanitor janitor = new JobJanitor(shm, null);
            janitor.add(worker.toHandle());
            janitor.add(orphan);
            janitor.sample(true);
            assertTrue(janitor.pids().contains(workerChild), "a worker's child: " + janitor.pids());
            assertTrue(janitor.pids().contains(orphanChild), "a child of a process outside our tree: " + janitor.pids());
            assertFalse(janitor.pids().contains(bystander.pid()), "a process of ours that is no job's: " + janitor.pids());
        } finally {
            for (long pid : List.of(workerChild, orphanChild, orphan.pid(), worker.pid(), bystander.pid())) {
                ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
            }
        }
        assertEquals(0, new JobJanitor(shm, shm.resolve("absent")).cleanRegistry());
    }
}
