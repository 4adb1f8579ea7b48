package io.jcomm.it.reliability;

import io.jcomm.api.config.Settings;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DistributedConfig;
import io.jcomm.tools.run.CommRun;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code kill -9} chaos against {@code commrun ... demo --elastic --moe --tp 2} (two DP replicas of two TP ranks, 4
 * worker JVMs, an MoE layer over the EP group of all of them each step, commrun in this JVM hosting the store, as
 * an operator runs it), under each recovery policy, at random
 * moments of serving and of recovery. The kinds of trial, taken in turn:
 * <ul>
 *   <li>{@code shrink}: {@code --max-lost 2}, one random rank: the other replica serves every request;</li>
 *   <li>{@code shrink-both}: one rank of each replica 0-100 ms apart: no replica is left, the job stops with typed
 *       errors;</li>
 *   <li>{@code spare}: {@code --spares 1}, one random rank: the spare takes its place and the job ends with 4
 *       ranks;</li>
 *   <li>{@code spare-twice}: {@code --spares 2}, a rank, then another one 0-150 ms later (during the recovery): both
 *       replaced;</li>
 *   <li>{@code spare-dies}: {@code --spares 2}, a waiting spare first, then a rank: the other spare takes it;</li>
 *   <li>{@code restart}: {@code --max-restarts 1}, one random rank: started again, it takes its own place;</li>
 *   <li>{@code restart-joining}: {@code --max-restarts 2}, a rank, then its restarted process 0-300 ms after it
 *       started (while it joins): the second restart takes the place;</li>
 *   <li>{@code restart-twice}: {@code --max-restarts 2}, two ranks 0-150 ms apart: both restarted;</li>
 *   <li>{@code restart-spent}: {@code --max-restarts 1}, a rank, then after the recovery another: no restart is
 *       left, the job stops with typed errors.</li>
 * </ul>
 * In every trial: no hang (the job ends by itself), no wrong value (each rank checks every value it gets and
 * fails on a wrong one), and the job finishes with an exact report whenever the policy allows it. The time from
 * the first kill to the first completed collective of the last recovery on every rank of it is measured per kind.
 * {@code -Djcomm.elasticChaos.trials=N} (default 18: two of each kind, what CI runs; RELIABILITY.md quotes runs
 * of 45), {@code -Djcomm.elasticChaos.seed=S}, {@code -Djcomm.elasticChaos.kinds=restart-twice,...} (the kinds
 * taken in turn; default all); the table goes to
 * {@code target/elastic-chaos-report.txt}.
 */
@Timeout(value = 1500)
class ElasticChaosIT {

    private static final String[] KINDS = {"shrink", "spare", "restart", "spare-twice", "restart-joining",
        "spare-dies", "restart-twice", "shrink-both", "restart-spent"};
    private static final Pattern PID = Pattern.compile(
            "^\\[(?:rank|spare) \\d+\\] demo: elastic (?:serving \\(pid (\\d+)\\)|joined as rank (\\d+) .*pid (\\d+)\\))");
    private static final Pattern SERVING_RANK = Pattern.compile("^\\[rank (\\d+)\\] demo: elastic serving");
    private static final Pattern RECOVERED = Pattern.compile("demo: elastic recovered round (\\d+) at (\\d+) ");
    private static final Pattern TYPED = Pattern.compile("io\\.jcomm\\.(api|parallel)\\.(\\w+Exception)");

    record Trial(int n, String kind, String victims, boolean hang, long recoveryMs, String outcome) {
        boolean wrong() {
            return outcome.startsWith("WRONG");
        }

        String line() {
            return String.format(Locale.ROOT, "%3d %-15s %-28s %-4s %s", n, kind, victims, hang ? "HANG" : "ok",
                    (recoveryMs >= 0 ? "recovered in " + recoveryMs + " ms; " : "") + outcome.split("\n", 2)[0]);
        }
    }

    @Test
    void everyTrialEndsWithoutHangOrWrongValueAndGoesOnWheneverThePolicyAllows() throws Exception {
        int trials = Integer.getInteger("jcomm.elasticChaos.trials", 18);
        long seed = Long.getLong("jcomm.elasticChaos.seed", System.nanoTime());
        String[] kinds = System.getProperty("jcomm.elasticChaos.kinds", String.join(",", KINDS)).split(",");
        for (String k : kinds) {
            assertTrue(List.of(KINDS).contains(k), "unknown kind " + k + "; the kinds are " + List.of(KINDS));
        }
        Random rnd = new Random(seed);
        StringBuilder report = new StringBuilder("elastic chaos: " + trials + " trials, seed " + seed + "\n");
        List<Trial> done = new ArrayList<>();
        for (int t = 1; t <= trials; t++) {
            Trial tr = trial(t, kinds[(t - 1) % kinds.length], rnd);
            done.add(tr);
            report.append(tr.line()).append('\n');
            System.out.println("chaos: " + tr.line());
        }
        Map<String, List<Long>> byKind = new TreeMap<>();
        List<Long> all = new ArrayList<>();
        for (Trial tr : done) {
            if (tr.recoveryMs() >= 0) {
                byKind.computeIfAbsent(tr.kind(), k -> new ArrayList<>()).add(tr.recoveryMs());
                all.add(tr.recoveryMs());
            }
        }
        report.append("kill to the first collective of the last recovery on every rank of it:\n");
        byKind.forEach((k, ms) -> report.append("  ").append(summary(k, ms)).append('\n'));
        report.append("  ").append(summary("all", all)).append('\n');
        long hangs = done.stream().filter(Trial::hang).count();
        long wrong = done.stream().filter(Trial::wrong).count();
        report.append("hangs ").append(hangs).append(", wrong ").append(wrong).append('\n');
        System.out.print(report);
        Files.createDirectories(Path.of("target"));
        Files.writeString(Path.of("target", "elastic-chaos-report.txt"), report);
        for (Trial tr : done) {
            assertTrue(!tr.wrong() && !tr.hang(), "trial " + tr.n() + ": " + tr.outcome() + "\n" + report);
        }
        assertEquals(0, hangs, report.toString());
    }

    private static String summary(String kind, List<Long> ms) {
        if (ms.isEmpty()) {
            return kind + ": none";
        }
        List<Long> s = new ArrayList<>(ms);
        s.sort(null);
        return String.format(Locale.ROOT, "%-15s n=%2d p50 %4d ms, p99 %4d ms, max %4d ms", kind, s.size(),
                s.get(s.size() / 2), s.get(Math.min(s.size() - 1, (int) Math.ceil(s.size() * 0.99) - 1)),
                s.get(s.size() - 1));
    }

    private static Trial trial(int n, String kind, Random rnd) throws Exception {
        List<String> args = new ArrayList<>(List.of("--nproc-per-node", "4", "--timeout", "90", "--grace", "2",
                "--stall-report", "0"));
        switch (kind) {
            case "shrink": case "shrink-both": args.addAll(List.of("--max-lost", "2")); break;
            case "spare": args.addAll(List.of("--spares", "1")); break;
            case "spare-twice": case "spare-dies": args.addAll(List.of("--spares", "2")); break;
            case "restart": case "restart-spent": args.addAll(List.of("--max-restarts", "1")); break;
            default: args.addAll(List.of("--max-restarts", "2")); break;
        }
        args.addAll(List.of("demo", "--elastic", "--moe", "--tp", "2", "--steps", "8000", "--hidden", "256"));
        try (LiveJob job = LiveJob.start(Map.of(Settings.TIMEOUT_MS.name(), "10000"), args)) {
            for (int r = 0; r < 4; r++) {
                int rank = r;
                job.await(l -> SERVING_RANK.matcher(l).find() && l.startsWith("[rank " + rank + "]"), Duration.ofSeconds(60));
            }
            Thread.sleep(100 + rnd.nextInt(500));
            int first = rnd.nextInt(4);
            List<String> victims = new ArrayList<>();
            long killedAt = System.currentTimeMillis();
            int expectRounds = 1;
            boolean expectSuccess = true;
            switch (kind) {
                case "shrink": case "spare": case "restart":
                    victims.add("r" + first + job.killRank(first));
                    break;
                case "shrink-both": {
                    victims.add("r" + first + job.killRank(first));
                    Thread.sleep(rnd.nextInt(100));
                    int other = (first + 2) % 4; // a rank of the other replica
                    victims.add("r" + other + job.killRank(other));
                    expectSuccess = false;
                    break;
                }
                case "spare-twice": case "restart-twice": {
                    victims.add("r" + first + job.killRank(first));
                    Thread.sleep(rnd.nextInt(150));
                    int other = (first + 1 + rnd.nextInt(3)) % 4;
                    victims.add("r" + other + job.killRank(other));
                    expectRounds = -1; // one or two rounds, as the second kill falls
                    break;
                }
                case "spare-dies": {
                    int spare = rnd.nextInt(2);
                    victims.add("s" + spare + job.killSpare(spare));
                    Thread.sleep(100);
                    killedAt = System.currentTimeMillis();
                    victims.add("r" + first + job.killRank(first));
                    break;
                }
                case "restart-joining": {
                    victims.add("r" + first + job.killRank(first));
                    long pid = job.awaitRestarted(first, Duration.ofSeconds(20));
                    Thread.sleep(rnd.nextInt(300));
                    ProcessHandle.of(pid).ifPresent(ProcessHandle::destroyForcibly);
                    victims.add("r" + first + "'" + (pid > 0 ? "" : "(not seen)"));
                    expectRounds = -1;
                    break;
                }
                case "restart-spent": {
                    victims.add("r" + first + job.killRank(first));
                    // once every rank is past the recovery, a second loss finds no restart left
                    job.awaitCount(l -> RECOVERED.matcher(l).find(), 4, Duration.ofSeconds(30));
                    int other = (first + 1 + rnd.nextInt(3)) % 4;
                    victims.add("r" + other + job.killRank(other));
                    expectSuccess = false;
                    break;
                }
                default:
                    throw new IllegalStateException(kind);
            }
            int code = job.awaitExit(Duration.ofSeconds(120));
            String vs = String.join(",", victims);
            String out = job.text();
            if (code == Integer.MIN_VALUE || code == 124) {
                return new Trial(n, kind, vs, true, -1, "hang: commrun " + (code == 124 ? "timed out" : "did not end")
                        + "\n" + tail(out));
            }
            if (out.contains("demo --elastic: ") && out.contains("expected")) {
                return new Trial(n, kind, vs, false, -1, "WRONG value\n" + tail(out));
            }
            boolean finished = code == 0 && out.contains("values: all exact");
            if (!expectSuccess) {
                if (finished) {
                    // the first loss's recovery may end the job before the second kill: only a success with a
                    // replica (or restart) left is legitimate, and then the report must be exact
                    return new Trial(n, kind, vs, false, -1, "finished before the second loss counted");
                }
                // the survivors fail typed, or commrun stops them first because the loss it saw was beyond what
                // it may replace (the job then ends with the lost worker's exit code)
                boolean typed = TYPED.matcher(out).find();
                boolean stopped = out.contains("; stopping the other ranks");
                if (code == 0 || !typed && !stopped) {
                    return new Trial(n, kind, vs, false, -1, "WRONG: exit " + code + " without a typed failure\n"
                            + tail(out));
                }
                return new Trial(n, kind, vs, false, -1, (typed ? "stopped with typed errors" : "stopped by commrun")
                        + " (exit " + code + ")");
            }
            if (!finished) {
                return new Trial(n, kind, vs, false, -1, "WRONG: the job did not finish (exit " + code + ")\n" + tail(out));
            }
            // the last round of recovery and when every rank of it completed its first collective
            int lastRound = 0;
            long lastAt = -1;
            Matcher m = RECOVERED.matcher(out);
            Map<Integer, Integer> linesPerRound = new HashMap<>();
            while (m.find()) {
                int round = Integer.parseInt(m.group(1));
                linesPerRound.merge(round, 1, Integer::sum);
                if (round > lastRound) {
                    lastRound = round;
                    lastAt = -1;
                }
                if (round == lastRound) {
                    lastAt = Math.max(lastAt, Long.parseLong(m.group(2)));
                }
            }
            if (lastRound == 0 || expectRounds > 0 && lastRound != expectRounds) {
                return new Trial(n, kind, vs, false, -1, "WRONG: recovery rounds " + lastRound + "\n" + tail(out));
            }
            int members = kind.equals("shrink") ? 2 : 4;
            if (linesPerRound.getOrDefault(lastRound, 0) != members || !out.contains(members + " rank(s) at the end")) {
                return new Trial(n, kind, vs, false, -1, "WRONG: " + linesPerRound.get(lastRound) + " ranks recovered in "
                        + "round " + lastRound + ", expected " + members + "\n" + tail(out));
            }
            return new Trial(n, kind, vs, false, lastAt - killedAt, "served every request with " + members + " ranks ("
                    + lastRound + " round(s))");
        }
    }

    private static String tail(String s) {
        String[] lines = s.split("\n");
        return String.join("\n", java.util.Arrays.asList(lines).subList(Math.max(0, lines.length - 60), lines.length));
    }

    /** commrun running in this JVM on a thread of its own, its output kept line by line. */
    static final class LiveJob implements AutoCloseable {
        private final List<String> lines = new CopyOnWriteArrayList<>();
        private final Set<Long> killed = ConcurrentHashMap.newKeySet();
        private final Thread runner;
        private volatile Integer exit;

        private LiveJob(Map<String, String> env, List<String> args) {
            PrintStream out = new PrintStream(new LineSink(lines, System.out), true, StandardCharsets.UTF_8);
            PrintStream err = new PrintStream(new LineSink(lines, System.err), true, StandardCharsets.UTF_8);
            runner = new Thread(() -> {
                int c;
                try {
                    c = CommRun.commandLine(new CommRun(env, out, err)).execute(args.toArray(new String[0]));
                } catch (RuntimeException e) {
                    lines.add("launcher failed: " + e);
                    c = -1;
                }
                exit = c;
            }, "chaos-commrun");
            runner.setDaemon(true);
            runner.start();
        }

        static LiveJob start(Map<String, String> extraEnv, List<String> args) {
            Map<String, String> env = new LinkedHashMap<>(System.getenv());
            env.remove(Settings.TOKEN_FILE.name());
            env.remove(Settings.RECOVERY.name());
            env.putAll(extraEnv);
            return new LiveJob(env, args);
        }

        String text() {
            return String.join("\n", lines);
        }

        void await(java.util.function.Predicate<String> p, Duration d) throws InterruptedException {
            awaitCount(p, 1, d);
        }

        void awaitCount(java.util.function.Predicate<String> p, int count, Duration d) throws InterruptedException {
            long end = System.nanoTime() + d.toNanos();
            while (System.nanoTime() < end) {
                if (lines.stream().filter(p).count() >= count || exit != null) {
                    return;
                }
                Thread.sleep(5);
            }
        }

        /** The pid of the process serving {@code rank} now (its latest serving or joined line). */
        Optional<Long> pidOfRank(int rank) {
            Long pid = null;
            for (String l : lines) {
                Matcher m = PID.matcher(l);
                if (!m.find()) {
                    continue;
                }
                if (m.group(1) != null && l.startsWith("[rank " + rank + "]")) {
                    pid = Long.parseLong(m.group(1));
                } else if (m.group(2) != null && Integer.parseInt(m.group(2)) == rank) {
                    pid = Long.parseLong(m.group(3));
                }
            }
            return Optional.ofNullable(pid).filter(p -> !killed.contains(p));
        }

        /** Kills the process serving {@code rank}; "" or a note when there was none. */
        String killRank(int rank) {
            Optional<Long> pid = pidOfRank(rank);
            if (pid.isEmpty()) {
                return "(none)";
            }
            killed.add(pid.get());
            ProcessHandle.of(pid.get()).ifPresent(ProcessHandle::destroyForcibly);
            return "";
        }

        /** Kills waiting spare {@code index} (found by its environment). */
        String killSpare(int index) throws IOException {
            for (ProcessHandle h : descendants()) {
                Map<String, String> env = environ(h.pid());
                if ("spare".equals(env.get(Settings.ROLE.name()))
                        && Integer.toString(index).equals(env.get("JCOMM_SPARE_INDEX"))) {
                    killed.add(h.pid());
                    h.destroyForcibly();
                    return "";
                }
            }
            return "(none)";
        }

        /** The pid of the restarted process of {@code rank}, once started (-1 if none in time). */
        long awaitRestarted(int rank, Duration d) throws InterruptedException, IOException {
            long end = System.nanoTime() + d.toNanos();
            while (System.nanoTime() < end && exit == null) {
                for (ProcessHandle h : descendants()) {
                    Map<String, String> env = environ(h.pid());
                    if ("restarted".equals(env.get(Settings.ROLE.name()))
                            && Integer.toString(rank).equals(env.get(Settings.RANK.name())) && !killed.contains(h.pid())) {
                        killed.add(h.pid());
                        return h.pid();
                    }
                }
                Thread.sleep(2);
            }
            return -1;
        }

        private static List<ProcessHandle> descendants() {
            try (Stream<ProcessHandle> s = ProcessHandle.current().descendants()) {
                return s.filter(ProcessHandle::isAlive).collect(java.util.stream.Collectors.toList());
            }
        }

        private static Map<String, String> environ(long pid) {
            Map<String, String> env = new HashMap<>();
            try {
                byte[] b = Files.readAllBytes(Path.of("/proc", Long.toString(pid), "environ"));
                for (String kv : new String(b, StandardCharsets.UTF_8).split("\0")) {
                    int eq = kv.indexOf('=');
                    if (eq > 0) {
                        env.put(kv.substring(0, eq), kv.substring(eq + 1));
                    }
                }
            } catch (IOException e) {
                // gone meanwhile
            }
            return env;
        }

        /** commrun's exit code, or {@link Integer#MIN_VALUE} if it did not end in time. */
        int awaitExit(Duration d) throws InterruptedException {
            runner.join(d.toMillis());
            Integer c = exit;
            return c == null ? Integer.MIN_VALUE : c;
        }

        @Override
        public void close() {
            if (exit == null) {
                for (ProcessHandle h : descendants()) {
                    h.destroyForcibly();
                }
                try {
                    runner.join(10_000);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
        }
    }

    /** Splits what commrun writes into lines (and echoes it). */
    private static final class LineSink extends OutputStream {
        private final List<String> lines;
        private final PrintStream echo;
        private final ByteArrayOutputStream line = new ByteArrayOutputStream();

        LineSink(List<String> lines, PrintStream echo) {
            this.lines = lines;
            this.echo = echo;
        }

        @Override
        public synchronized void write(int b) {
            if (b == '\n') {
                String l = line.toString(StandardCharsets.UTF_8);
                line.reset();
                lines.add(l);
                echo.println(l);
            } else {
                line.write(b);
            }
        }

        @Override
        public synchronized void write(byte[] buf, int off, int len) {
            for (int i = off; i < off + len; i++) {
                write(buf[i]);
            }
        }
    }
}
