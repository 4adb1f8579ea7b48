package io.jcomm.it.reliability;

import io.jcomm.api.config.Settings;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.cpu.FaultPlan;
import io.jcomm.testkit.MultiJvm;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code JCOMM_FAULT} with real processes, as an application would use it to test its recovery: three
 * JVMs ({@link FaultWorker}) run all-reduces in the group {@code tp:0}, every one with the same
 * {@code JCOMM_FAULT} naming global rank 1 at all-reduce number {@value #AT}. {@code kill} ends rank 1
 * exactly there (exit 137, its last completed operation {@value #AT} - 1) and the others fail with a
 * {@code PeerFailureException} naming the group, their rank, the operation and rank 1 within 2 s;
 * {@code stall} makes the others meet their deadline while rank 1 waits, which then resumes into a typed
 * failure; {@code cut} fails rank 1's operation with the fault while its process goes on, and the others
 * fast with a {@code PeerFailureException}.
 */
@Timeout(value = 60, unit = TimeUnit.SECONDS)
class FaultInjectionIT {

    private static final int WORLD = 3;
    private static final int VICTIM = 1;
    private static final int AT = 40;
    private static final int OPS = 60;
    private static final long OP_TIMEOUT_MS = 1_000;
    private static final long STALL_MS = 3_000;

    /** One rank's FAILED line. */
    private record Failed(String type, String group, int rank, String op, int peer, long nanos, String message) {
        static Failed parse(String line) {
            String[] f = line.substring(line.indexOf("FAILED ")).split(" ", 8);
            return new Failed(f[1], f[2], Integer.parseInt(f[3]), f[4], Integer.parseInt(f[5]), Long.parseLong(f[6]), f[7]);
        }
    }

    private static MultiJvm.Results run(String name, String fault) {
        try (MultiJvm job = MultiJvm.builder().name(name).worldSize(WORLD).mainClass(FaultWorker.class)
                .args(Integer.toString(OPS), Long.toString(OP_TIMEOUT_MS)).env(Settings.FAULT.name(), fault)
                .keepOthersOnFailure().maxHeap("128m").deadline(Duration.ofSeconds(45)).start()) {
            MultiJvm.Results r = job.awaitAll();
            assertTrue(!r.timedOut(), name + " timed out");
            return r;
        }
    }

    private static Failed failed(MultiJvm.Results r, int rank) {
        List<String> lines = r.linesContaining(rank, "FAILED ");
        assertEquals(1, lines.size(), "rank " + rank + ":\n" + String.join("\n", r.output(rank)));
        return Failed.parse(lines.get(0));
    }

    /** The last {@code DONE <seq> <nanoTime>} of a rank, as {seq, nanoTime}. */
    private static long[] lastDone(MultiJvm.Results r, int rank) {
        List<String> done = r.linesContaining(rank, "DONE ");
        done.removeIf(l -> l.contains("ALL DONE"));
        assertTrue(!done.isEmpty(), "rank " + rank + " completed nothing:\n" + String.join("\n", r.output(rank)));
        String[] f = done.get(done.size() - 1).substring(done.get(done.size() - 1).indexOf("DONE ")).split(" ");
        return new long[] {Long.parseLong(f[1]), Long.parseLong(f[2])};
    }

    /** The {@code System.nanoTime} a fault injection line ends with. */
    private static long nanoTimeOf(String line) {
        String key = "(System.nanoTime ";
        int at = line.lastIndexOf(key);
        return Long.parseLong(line.substring(at + key.length(), line.indexOf(')', at)));
    }

    private static long millis(long fromNanos, long toNanos) {
        return TimeUnit.NANOSECONDS.toMillis(toNanos - fromNanos);
    }

    /** Checks a survivor's failure: in op {@value #AT} of tp:0, naming its own rank and the victim. */
    private static Failed survivor(MultiJvm.Results r, int rank) {
        assertEquals(0, r.exitCode(rank), String.join("\n", r.output(rank)));
        assertEquals(AT - 1, lastDone(r, rank)[0], "rank " + rank + " completed up to the fault");
        Failed f = failed(r, rank);
        assertEquals("tp:0", f.group(), f.toString());
        assertEquals(rank, f.rank(), f.toString());
        assertEquals("allReduce", f.op(), f.toString());
        return f;
    }

    @Test
    void killHaltsTheRankAtItsOperationAndThePeersFailTypedWithinTwoSeconds() {
        MultiJvm.Results r = run("fault-kill", "kill@rank=" + VICTIM + ",group=tp:*,op=all_reduce,seq=" + AT);
        assertEquals(FaultPlan.KILL_EXIT_CODE, r.exitCode(VICTIM), String.join("\n", r.output(VICTIM)));
        long[] last = lastDone(r, VICTIM);
        assertEquals(AT - 1, last[0], "the victim died right before operation " + AT);
        List<String> killing = r.linesContaining(VICTIM, "jcomm fault injection (kill@rank=1,group=tp:*,op=allReduce,seq="
                + AT + ",phase=before): killing the process (kill -9, exit code 137) in group tp:0 rank 1 (global rank 1) before"
                + " allReduce seq " + AT + " (System.nanoTime ");
        assertEquals(1, killing.size(), String.join("\n", r.output(VICTIM)));
        long killedAt = nanoTimeOf(killing.get(0));
        assertTrue(killedAt >= last[1]);
        assertTrue(r.linesContaining(VICTIM, "FAILED ").isEmpty());
        for (int rank = 0; rank < WORLD; rank++) {
            if (rank == VICTIM) {
                continue;
            }
            Failed f = survivor(r, rank);
            assertEquals("PeerFailureException", f.type(), f.toString());
            assertTrue(f.message().contains("peer rank " + VICTIM), "names rank " + VICTIM + ": " + f);
            long after = millis(killedAt, f.nanos());
            assertTrue(after < 2_000, "rank " + rank + " failed " + after + " ms after the kill: " + f);
            System.out.println("kill: rank " + rank + " PeerFailureException " + after + " ms after the kill");
        }
    }

    @Test
    void stallHoldsTheRankPastThePeersDeadlineAndItResumes() {
        MultiJvm.Results r = run("fault-stall", "stall:" + STALL_MS + "ms@rank=" + VICTIM + ",group=tp:0,op=allReduce,seq=" + AT);
        long[] last = lastDone(r, VICTIM);
        assertEquals(AT - 1, last[0]);
        List<String> stalling = r.linesContaining(VICTIM, "): stalling for " + STALL_MS + " ms in group tp:0 rank 1"
                + " (global rank 1) before allReduce seq " + AT + " (System.nanoTime ");
        List<String> resumed = r.linesContaining(VICTIM, "): resumed in group tp:0 rank 1 (global rank 1) before allReduce seq "
                + AT + " (System.nanoTime ");
        assertEquals(1, stalling.size(), String.join("\n", r.output(VICTIM)));
        assertEquals(1, resumed.size(), String.join("\n", r.output(VICTIM)));
        long stalledAt = nanoTimeOf(stalling.get(0));
        assertTrue(millis(stalledAt, nanoTimeOf(resumed.get(0))) >= STALL_MS, resumed.get(0));
        for (int rank = 0; rank < WORLD; rank++) {
            if (rank == VICTIM) {
                continue;
            }
            Failed f = survivor(r, rank);
            assertTrue(f.type().equals("CommTimeoutException") || f.type().equals("PeerFailureException"), f.toString());
            long after = millis(stalledAt, f.nanos());
            assertTrue(after >= OP_TIMEOUT_MS - 100 && after < OP_TIMEOUT_MS + 2_000,
                    "rank " + rank + " failed " + after + " ms into the stall (deadline " + OP_TIMEOUT_MS + " ms): " + f);
            System.out.println("stall: rank " + rank + " " + f.type() + " " + after + " ms into the stall");
        }
        // the stalled rank resumed after the stall into its operation, which fails typed: the others gave up
        assertEquals(0, r.exitCode(VICTIM), String.join("\n", r.output(VICTIM)));
        Failed v = failed(r, VICTIM);
        assertEquals("allReduce", v.op());
        assertTrue(v.type().equals("PeerFailureException") || v.type().equals("CommClosedException")
                || v.type().equals("CommTimeoutException"), v.toString());
        long resumedAfter = millis(stalledAt, v.nanos());
        assertTrue(resumedAfter >= STALL_MS, "failed " + resumedAfter + " ms after the stall began: " + v);
        System.out.println("stall: rank " + VICTIM + " resumed, " + v.type() + " " + resumedAfter + " ms after the stall began");
    }

    @Test
    void cutFailsTheRankTypedWhileItLivesAndThePeersFast() {
        MultiJvm.Results r = run("fault-cut", "cut@rank=" + VICTIM + ",group=tp:0,op=allReduce,seq=" + AT);
        assertEquals(0, r.exitCode(VICTIM), "the process lives on: " + String.join("\n", r.output(VICTIM)));
        long[] last = lastDone(r, VICTIM);
        assertEquals(AT - 1, last[0]);
        Failed v = failed(r, VICTIM);
        assertEquals("BackendException", v.type(), v.toString());
        assertEquals("allReduce", v.op());
        assertTrue(v.message().contains("fault injection (JCOMM_FAULT cut@rank=1,group=tp:0,op=allReduce,seq=" + AT), v.message());
        List<String> cutting = r.linesContaining(VICTIM, "): cutting the connections in group tp:0 rank 1 (global rank 1) before"
                + " allReduce seq " + AT + " (System.nanoTime ");
        assertEquals(1, cutting.size(), String.join("\n", r.output(VICTIM)));
        long cutAt = nanoTimeOf(cutting.get(0));
        for (int rank = 0; rank < WORLD; rank++) {
            if (rank == VICTIM) {
                continue;
            }
            Failed f = survivor(r, rank);
            assertEquals("PeerFailureException", f.type(), f.toString());
            assertTrue(f.message().contains("peer rank " + VICTIM), "names rank " + VICTIM + ": " + f);
            long after = millis(cutAt, f.nanos());
            assertTrue(after < 2_000, "rank " + rank + " failed " + after + " ms after the cut: " + f);
            System.out.println("cut: rank " + rank + " PeerFailureException " + after + " ms after the cut");
        }
    }
}
