package io.jcomm.tools.run;

import io.jcomm.runtime.recorder.RecorderReader;
import io.jcomm.runtime.recorder.RecorderReader.GroupState;
import io.jcomm.runtime.recorder.RecorderReader.Snapshot;
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
 * {@code io.jcomm.runtime.recorder.FlightRecorder}) about once a second; when no operation of any
 * rank has started or finished for the configured time while some rank is inside one, it prints,
 * without stopping the job, a verdict per group (which rank is in which operation and sequence number,
 * which ranks have not reached it) and the jcomm and main threads' stacks of every rank (through
 * {@code jcmd Thread.print}). The same report is printed when the job fails. One report per stall: it is
 * printed again only after the job made progress and stalled again.
 *
 * <p>With several nodes ({@link StallExchange}) each node's launcher reports its own ranks, and node
 * 0's launcher merges every node's ranks (as their launchers wrote them to the job's store) into its
 * verdicts: its stall is a stall of the whole job, and its report names the stuck or missing ranks of
 * every node (their thread stacks are in their own node's report).
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
    /** The other nodes' launchers (several nodes), or null. */
    private final StallExchange exchange;
    private long nextRead;
    private long signature = -1;
    private long lastProgress = System.nanoTime();
    private boolean reported;

    /**
     * @param stall how long without progress makes a stall ({@code 0}: never report stalls, only failures)
     */
    StallWatch(Path dir, Duration stall, PrintStream err, Path javaBinary, long[] pids, int[] ranks) {
        this(dir, stall, err, javaBinary, pids, ranks, null);
    }

    /**
     * @param exchange with several nodes: where this node's launcher writes its ranks' state and, on node 0,
     *                 reads the other nodes' for the merged verdict; null for one node
     */
    StallWatch(Path dir, Duration stall, PrintStream err, Path javaBinary, long[] pids, int[] ranks,
               StallExchange exchange) {
        this.exchange = exchange;
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
        Map<Integer, Snapshot> local = read();
        if (exchange != null) {
            exchange.publish(local, signature(local));
        }
        Seen seen = merged(local);
        Map<Integer, Snapshot> snaps = seen.snaps();
        long sig = signature(snaps);
        boolean running = false;
        for (Snapshot s : snaps.values()) {
            for (GroupState g : s.groups()) {
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
                    (now - lastProgress) / 1e9), seen));
            err.flush();
        }
    }

    /** Prints the report now (the job failed: {@code why} says how). */
    synchronized void reportNow(String why) {
        err.print(report(why, merged(read())));
        err.flush();
    }

    /** Lets go of the store, if it holds one (the job is over). */
    synchronized void close() {
        if (exchange != null) {
            exchange.close();
        }
    }

    /** Changes whenever a rank appears or goes, or an operation of any group starts or finishes. */
    static long signature(Map<Integer, Snapshot> snaps) {
        long sig = 17;
        for (Map.Entry<Integer, Snapshot> e : snaps.entrySet()) {
            sig = sig * 31 + e.getKey();
            for (GroupState g : e.getValue().groups()) {
                sig = sig * 31 + g.started() * 7 + g.finished();
            }
        }
        return sig;
    }

    /**
     * The ranks a report covers: {@code snaps} by global rank, {@code nodeOf} the node of each rank of
     * another node, {@code silent} the other nodes that wrote nothing.
     */
    record Seen(Map<Integer, Snapshot> snaps, Map<Integer, Integer> nodeOf, List<Integer> silent) {
    }

    /**
     * On node 0 of several: this node's ranks and the other nodes' (as their launchers last wrote them).
     * Elsewhere: {@code local}.
     */
    private Seen merged(Map<Integer, Snapshot> local) {
        if (exchange == null || !exchange.merges()) {
            return new Seen(local, Map.of(), List.of());
        }
        Map<Integer, Snapshot> all = new TreeMap<>(local);
        Map<Integer, Integer> nodeOf = new TreeMap<>();
        List<Integer> silent = new ArrayList<>();
        Map<Integer, Map<Integer, Snapshot>> others = exchange.others();
        for (int n = 0; n < exchange.plan().nnodes(); n++) {
            if (n == exchange.plan().nodeRank()) {
                continue;
            }
            Map<Integer, Snapshot> theirs = others.get(n);
            if (theirs == null) {
                silent.add(n);
                continue;
            }
            for (Map.Entry<Integer, Snapshot> e : theirs.entrySet()) {
                all.putIfAbsent(e.getKey(), e.getValue());
                nodeOf.put(e.getKey(), n);
            }
        }
        return new Seen(all, nodeOf, silent);
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
        return report(why, new Seen(snaps, Map.of(), List.of()));
    }

    /** The report's text on what {@code seen} covers (node 0's merged view, see {@link #merged}, or this node's). */
    String report(String why, Seen seen) {
        Map<Integer, Snapshot> snaps = seen.snaps();
        Map<Integer, Integer> nodeOf = seen.nodeOf();
        long now = System.nanoTime();
        boolean merging = exchange != null && exchange.merges();
        StringBuilder sb = new StringBuilder("commrun: stall report (").append(why).append(merging ? "; every node's ranks" : "")
                .append("):\n");
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
            long here = members.keySet().stream().filter(r -> !nodeOf.containsKey(r)).count();
            sb.append("  group ").append(e.getKey()).append(" (").append(size).append(" ranks, ").append(here)
                    .append(" on this node");
            if (merging) {
                sb.append(", ").append(members.size() - here).append(" on other nodes");
            }
            sb.append("):\n");
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
                Integer node = nodeOf.get(m.getKey());
                sb.append("    rank ").append(m.getKey()).append(" (group rank ").append(g.rank())
                        .append(node != null ? ", node " + node : "").append("): ")
                        .append(g.describe(now)).append(late ? "   <- has not reached it" : "").append('\n');
            }
            if (target > 0) {
                sb.append("    verdict: ");
                if (behind.isEmpty()) {
                    sb.append("every rank ").append(merging ? "seen" : "here").append(" is in ").append(targetOp).append(" #")
                            .append(target);
                } else {
                    sb.append(behind.size() == 1 ? "rank " : "ranks ").append(behind.size() == 1 ? behind.get(0) : behind)
                            .append(behind.size() == 1 ? " has" : " have").append(" not reached ").append(targetOp)
                            .append(" #").append(target);
                    for (int r : behind) {
                        Integer node = nodeOf.get(r);
                        sb.append("; rank ").append(r).append(node != null ? " (node " + node + ")" : "").append(": ")
                                .append(members.get(r).describe(now));
                    }
                }
                sb.append('\n');
            }
            if (members.size() < size) {
                List<Integer> unseen = new ArrayList<>();
                for (int r : merging ? allRanks() : ranks) {
                    if (!snaps.containsKey(r)) {
                        unseen.add(r);
                    }
                }
                sb.append("    ").append(unseen.isEmpty() ? "its other members are on other nodes"
                        : "not seen" + (merging ? "" : " here") + ": ranks " + unseen + " (process gone, or no recorder)")
                        .append('\n');
            }
        }
        for (int node : seen.silent()) {
            int per = exchange.plan().nprocPerNode();
            sb.append("  node ").append(node).append(" (ranks ").append(node * per).append('-').append(node * per + per - 1)
                    .append(") wrote nothing to the store: its commrun has not reached it, or runs with --stall-report 0\n");
        }
        for (int i = 0; i < pids.length; i++) {
            if (pids[i] > 0 && snaps.containsKey(ranks[i])) {
                sb.append("  rank ").append(ranks[i]).append(" (pid ").append(pids[i]).append(") threads:\n");
                for (String line : stacks(pids[i])) {
                    sb.append("    ").append(line).append('\n');
                }
            }
        }
        if (!nodeOf.isEmpty()) {
            sb.append("  (the other nodes' thread stacks are in their own commrun's report)\n");
        }
        return sb.toString();
    }

    /** Every global rank of the job. */
    private int[] allRanks() {
        int[] all = new int[exchange.plan().worldSize()];
        for (int r = 0; r < all.length; r++) {
            all[r] = r;
        }
        return all;
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
