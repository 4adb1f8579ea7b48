package io.jcomm.tools.top;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.runtime.recorder.FlightRecorder;
import io.jcomm.runtime.recorder.RecorderReader.GroupState;
import io.jcomm.runtime.recorder.RecorderReader.Snapshot;
import io.jcomm.tools.run.CommRun;
import io.jcomm.tools.run.JobWorker;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code commtop --once} on a running three-rank job (real worker JVMs under commrun, registered in a
 * private job registry): it lists the job's ranks and what each is doing, rank 2 having stopped
 * before all-reduce #5 that ranks 0 and 1 wait in.
 */
@Timeout(value = 180, unit = TimeUnit.SECONDS)
class CommTopTest {

    private static String top(Map<String, String> env, String... args) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        int code = CommTop.commandLine(new CommTop(env, new PrintStream(out, true, StandardCharsets.UTF_8),
                new PrintStream(err, true, StandardCharsets.UTF_8))).execute(args);
        assertEquals(0, code, err.toString(StandardCharsets.UTF_8));
        return out.toString(StandardCharsets.UTF_8);
    }

    /** The table's line of {@code rank} of {@code job} in group world, or null. */
    private static String line(String table, String job, int rank) {
        for (String l : table.split("\n")) {
            String[] c = l.trim().split("\\s{2,}");
            if (c.length >= 5 && c[0].startsWith(job + "@") && c[1].equals(rank + "/3") && c[3].equals("world")) {
                return l;
            }
        }
        return null;
    }

    @Test
    void ratesComeFromTwoReadsOfTheRecorder() {
        long t0 = 1_000_000_000L;
        GroupState a = new GroupState("world", 0, 2, 10, 10, "allReduce", FlightRecorder.DONE, 10, t0 - 500, t0 - 100, false,
                40_000);
        GroupState b = new GroupState("world", 0, 2, 30, 30, "allReduce", FlightRecorder.DONE, 30, t0 + 400_000_000L,
                t0 + 450_000_000L, false, 40_000 + 20 * 4096 * 1000L);
        CommTop.Sample before = new CommTop.Sample(t0, List.of(new CommTop.Proc("j", 0, 2, 42, true,
                new Snapshot(42, null, List.of(a)))), List.of());
        CommTop.Sample after = new CommTop.Sample(t0 + 500_000_000L, List.of(new CommTop.Proc("j", 0, 2, 42, true,
                new Snapshot(42, null, List.of(b)))), List.of());
        String table = new CommTop(Map.of(), System.out, System.err).render(before, after, null);
        String[] header = table.split("\n")[1].trim().split("\\s{2,}");
        String[] row = table.split("\n")[2].trim().split("\\s{2,}");
        assertEquals("OPS/S", header[7], table);
        assertEquals("BYTES/S", header[8], table);
        assertEquals("40.0", row[7], table); // 20 operations in 0.5 s
        assertEquals("163.8M", row[8], table); // 20 x 4096000 bytes in 0.5 s
        assertEquals("-", new CommTop(Map.of(), System.out, System.err).render(null, after, null).split("\n")[2].trim()
                .split("\\s{2,}")[8]);
        assertEquals("950", CommTop.bytes(950));
        assertEquals("12.3k", CommTop.bytes(12_300));
        assertEquals("1.2G", CommTop.bytes(1.2e9));
    }

    @Test
    void onceListsARunningJobsRanksAndTheirCurrentOperations(@TempDir Path dir) throws Exception {
        Path registry = Path.of("/dev/shm", "jcomm-registry-test-" + ProcessHandle.current().pid() + "-" + System.nanoTime());
        String job = "toptest" + System.nanoTime();
        Path stop = dir.resolve("stop");
        Map<String, String> env = new HashMap<>(System.getenv());
        env.remove("JCOMM_TOKEN_FILE");
        env.put("JCOMM_REGISTRY", registry.toString());
        env.put("JCOMM_JOB_ID", job);
        ByteArrayOutputStream jobOut = new ByteArrayOutputStream();
        PrintStream jobStream = new PrintStream(jobOut, true, StandardCharsets.UTF_8);
        CompletableFuture<Integer> run = CompletableFuture.supplyAsync(() -> CommRun.commandLine(
                new CommRun(env, jobStream, jobStream)).execute("--nproc-per-node", "3", "--stall-report", "0",
                JobWorker.class.getName(), "top", "2", "5", stop.toString()));
        try {
            String table = "";
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (System.nanoTime() < end && !run.isDone()) {
                table = top(env, "--once");
                String r0 = line(table, job, 0);
                String r1 = line(table, job, 1);
                String r2 = line(table, job, 2);
                if (r0 != null && r1 != null && r2 != null && r0.contains("allReduce #5") && r1.contains("allReduce #5")) {
                    break;
                }
                Thread.sleep(500);
            }
            System.out.println(table);
            assertFalse(run.isDone(), "the job ended early:\n" + jobOut.toString(StandardCharsets.UTF_8));
            for (int r = 0; r < 2; r++) {
                String l = line(table, job, r);
                assertTrue(l != null && l.contains("allReduce #5") && l.contains("running") && l.matches(".*\\d+\\.\\d s.*"),
                        "rank " + r + " waits in allReduce #5:\n" + table);
            }
            String r2 = line(table, job, 2);
            assertTrue(r2 != null && r2.contains("allReduce #4") && r2.contains("idle"),
                    "rank 2 stopped after allReduce #4:\n" + table);
            assertTrue(table.contains("registry " + registry), table);
        } finally {
            Files.writeString(stop, "stop");
            int code = run.get(90, TimeUnit.SECONDS);
            assertNotEquals(0, code, "rank 2 exits 3");
        }
        // the ranks are gone: removed at exit, or marked dead and cleaned by the next listing
        String after = top(env, "--once");
        assertTrue(List.of(0, 1, 2).stream().allMatch(r -> line(after, job, r) == null), after);
        assertFalse(Files.exists(registry), "the registry directory is removed with its last entry");
    }
}
