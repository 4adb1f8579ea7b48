package io.jcomm.tools.run;

import io.jcomm.api.internal.recorder.RecorderReader;
import io.jcomm.api.internal.recorder.RecorderReader.GroupState;
import io.jcomm.api.internal.recorder.RecorderReader.Snapshot;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;

/**
 * commrun's stall report: reads every local worker's flight recorder (see
 * {@code io.jcomm.api.internal.recorder.FlightRecorder}) about once a second; when no operation of any
 * rank has started or finished for the configured time while some rank is inside one, it prints,
 * without stopping the job, a verdict per group (which rank is in which operation and sequence number,
 * which ranks have not reached it) and the jcomm and main threads' stacks of every rank (through
 * {@code jcmd Thread.print}). The same report is printed when the job fails. One report per stall: it is
 * printed again only after the job made progress and stalled again.
 */
final class StallWatch {

    private static final long READ_EVERY_NANOS = TimeUnit.MILLISECONDS.toNanos(900);
    private static final int MAX_STACK_LINES = 60;

    private final Path dir;
    private final long stallNanos;
    private final PrintStream err;
    private final Path javaBinary;
    private final long[] pids;
    private final int[] ranks;
    private long nextRead;
    private long signature = -1;
    private long lastProgress = System.nanoTime();
    private boolean reported;

    /**
     * @param stall how long without progress makes a stall ({@code 0}: never report stalls, only failures)
     */
    StallWatch(Path dir, Duration stall, PrintStream err, Path javaBinary, long[] pids, int[] ranks) {
        this.dir = dir;
        this.stallNanos = stall.toNanos();
        this.err = err;
        this.javaBinary = javaBinary;
        this.pids = pids.clone();
        this.ranks = ranks.clone();
    }

    /** Called often by the launcher's sampler thread; reads the recorders about once a second. */
    synchronized void poll() {
        if (stallNanos <= 0) {
            return;
        }
        long now = System.nanoTime();
        if (now - nextRead < 0) {
            return;
        }
        nextRead = now + READ_EVERY_NANOS;
        Map<Integer, Snapshot> snaps = read();
        long sig = 17;
        boolean running = false;
        for (Snapshot s : snaps.values()) {
            for (GroupState g : s.groups()) {
                sig = sig * 31 + g.started() * 7 + g.finished();
                running |= g.running();
            }
        }
        if (sig != signature) {
            signature = sig;
            lastProgress = now;
            reported = false;
            return;
        }
        if (!reported && running && now - lastProgress >= stallNanos) {
            reported = true;
            err.print(report(String.format(Locale.ROOT, "no rank's operations advanced for %.1f s; the job goes on",
                    (now - lastProgress) / 1e9), snaps));
            err.flush();
        }
    }

    /** Prints the report now (the job failed: {@code why} says how). */
    synchronized void reportNow(String why) {
        err.print(report(why, read()));
        err.flush();
    }

    private Map<Integer, Snapshot> read() {
        Map<Integer, Snapshot> out = new TreeMap<>();
        for (int i = 0; i < pids.length; i++) {
            if (pids[i] <= 0) {
                continue;
            }
            for (Path f : RecorderReader.filesOf(dir, pids[i])) {
                int rank = ranks[i];
                RecorderReader.read(f).ifPresent(s -> out.put(rank, s));
            }
        }
        return out;
    }

    /** The report's text: a verdict per group, then each rank's thread stacks. */
    String report(String why, Map<Integer, Snapshot> snaps) {
        long now = System.nanoTime();
        StringBuilder sb = new StringBuilder("commrun: stall report (").append(why).append("):\n");
        if (snaps.isEmpty()) {
            sb.append("  no flight recorder found for any rank (JCOMM_RECORDER=off, or no group made yet)\n");
            return sb.toString();
        }
        // group name -> global rank -> its state there
        Map<String, Map<Integer, GroupState>> groups = new TreeMap<>();
        for (Map.Entry<Integer, Snapshot> e : snaps.entrySet()) {
            for (GroupState g : e.getValue().groups()) {
                groups.computeIfAbsent(g.group(), k -> new TreeMap<>()).put(e.getKey(), g);
            }
        }
        for (Map.Entry<String, Map<Integer, GroupState>> e : groups.entrySet()) {
            Map<Integer, GroupState> members = e.getValue();
            int size = members.values().iterator().next().size();
            sb.append("  group ").append(e.getKey()).append(" (").append(size).append(" ranks, ").append(members.size())
                    .append(" on this node):\n");
            long target = 0;
            String targetOp = null;
            for (GroupState g : members.values()) {
                if (g.running() && g.seq() > target) {
                    target = g.seq();
                    targetOp = g.op();
                }
            }
            List<Integer> behind = new ArrayList<>();
            for (Map.Entry<Integer, GroupState> m : members.entrySet()) {
                GroupState g = m.getValue();
                boolean late = target > 0 && g.seq() < target;
                if (late) {
                    behind.add(m.getKey());
                }
                sb.append("    rank ").append(m.getKey()).append(" (group rank ").append(g.rank()).append("): ")
                        .append(g.describe(now)).append(late ? "   <- has not reached it" : "").append('\n');
            }
            if (target > 0) {
                sb.append("    verdict: ");
                if (behind.isEmpty()) {
                    sb.append("every rank here is in ").append(targetOp).append(" #").append(target);
                } else {
                    sb.append(behind.size() == 1 ? "rank " : "ranks ").append(behind.size() == 1 ? behind.get(0) : behind)
                            .append(behind.size() == 1 ? " has" : " have").append(" not reached ").append(targetOp)
                            .append(" #").append(target);
                    for (int r : behind) {
                        sb.append("; rank ").append(r).append(": ").append(members.get(r).describe(now));
                    }
                }
                sb.append('\n');
            }
            if (members.size() < size) {
                List<Integer> unseen = new ArrayList<>();
                for (int r : ranks) {
                    if (!snaps.containsKey(r)) {
                        unseen.add(r);
                    }
                }
                sb.append("    ").append(unseen.isEmpty() ? "its other members are on other nodes"
                        : "not seen here: ranks " + unseen + " (process gone, or no recorder)").append('\n');
            }
        }
        for (int i = 0; i < pids.length; i++) {
            if (pids[i] > 0 && snaps.containsKey(ranks[i])) {
                sb.append("  rank ").append(ranks[i]).append(" (pid ").append(pids[i]).append(") threads:\n");
                for (String line : stacks(pids[i])) {
                    sb.append("    ").append(line).append('\n');
                }
            }
        }
        return sb.toString();
    }

    /** The "main" and jcomm threads' stacks of {@code pid} (jcmd Thread.print), at most {@value #MAX_STACK_LINES} lines. */
    private List<String> stacks(long pid) {
        Path bin = javaBinary.toAbsolutePath().getParent();
        Path jcmd = bin == null ? Path.of("jcmd") : bin.resolve("jcmd");
        List<String> out = new ArrayList<>();
        try {
            Process p = new ProcessBuilder(jcmd.toString(), Long.toString(pid), "Thread.print").redirectErrorStream(true)
                    .start();
            boolean keep = false;
            try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                String line;
                while ((line = r.readLine()) != null && out.size() < MAX_STACK_LINES) {
                    if (line.startsWith("\"")) {
                        keep = line.startsWith("\"main\"") || line.startsWith("\"jcomm");
                    }
                    if (keep && !line.isBlank()) {
                        out.add(line);
                    }
                }
            }
            if (!p.waitFor(5, TimeUnit.SECONDS)) {
                p.destroyForcibly();
            }
        } catch (IOException e) {
            out.add("(no stacks: " + e.getMessage() + ")");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return out;
    }
}
