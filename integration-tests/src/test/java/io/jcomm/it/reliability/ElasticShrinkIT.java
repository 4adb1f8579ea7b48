package io.jcomm.it.reliability;

import io.jcomm.api.config.Settings;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.api.DistributedConfig;
import io.jcomm.cpu.store.TcpStoreServer;
import io.jcomm.cpu.store.TcpStoreServerConfig;
import io.jcomm.testkit.MultiJvm;
import io.jcomm.tools.demo.PipelineDemo;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Random;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;

/**
 * {@code kill -9} of ranks of the elastic serving demo ({@code demo --elastic --tp 2}: two DP replicas of
 * two TP ranks, 4 JVMs, the store in this test's JVM as a launcher would host it) at a random moment of
 * its serving, repeated over trials of three kinds:
 * <ul>
 *   <li>{@code one}: one random rank. Its replica leaves (the other rank of it exits 0 saying so), the
 *       other replica shrinks ({@code ParallelState.shrink}), serves every remaining request with every
 *       value checked, and exits 0;</li>
 *   <li>{@code same}: a random rank, then its TP peer 0-100 ms later (the same replica): as above;</li>
 *   <li>{@code both}: one rank of each replica: no replica is left, and every survivor fails with a typed
 *       exception.</li>
 * </ul>
 * No trial may hang. For the trials that go on, the time from the (first) kill to the first completed
 * collective of the new generation on every survivor is measured (p50, p99, max) and must stay within
 * 1 s at p50. {@code -Djcomm.elastic.trials=N} (default 9), {@code -Djcomm.elastic.seed=S}; the table goes to
 * {@code target/elastic-report.txt}.
 */
@Timeout(value = 900)
class ElasticShrinkIT {

    private static final long TIMEOUT_MS = 10_000;
    private static final Pattern RECOVERED = Pattern.compile("demo: elastic recovered round (\\d+) at (\\d+) \\(shrink (\\d+) ms");
    private static final Pattern TYPED = Pattern.compile("io\\.jcomm\\.(api|parallel)\\.(\\w+Exception)");
    /** Trials whose recovery took longer keep every rank's output in {@code target/elastic-trial-N.log}. */
    private static final long SLOW_MS = 500;
    private static final String[] KINDS = {"one", "same", "both"};

    record Trial(int n, String kind, List<Integer> victims, boolean hang, long recoveryMs, String outcome) {
        String line() {
            return String.format(Locale.ROOT, "%3d %-4s victims %-6s %-4s %s", n, kind, victims, hang ? "HANG" : "ok",
                    recoveryMs >= 0 ? "recovered in " + recoveryMs + " ms; " + outcome : outcome);
        }
    }

    @Test
    void killsDuringServingLeaveTheOtherReplicaServingOrFailEveryoneTyped() throws Exception {
        int trials = Integer.getInteger("jcomm.elastic.trials", 9);
        long seed = Long.getLong("jcomm.elastic.seed", System.nanoTime());
        Random rnd = new Random(seed);
        StringBuilder report = new StringBuilder("elastic: " + trials + " trials, seed " + seed + "\n");
        List<Trial> done = new ArrayList<>();
        for (int t = 1; t <= trials; t++) {
            Trial tr = trial(t, KINDS[(t - 1) % KINDS.length], rnd);
            done.add(tr);
            report.append(tr.line()).append('\n');
            System.out.println("elastic: " + tr.line());
        }
        List<Long> ms = new ArrayList<>();
        done.stream().filter(tr -> tr.recoveryMs() >= 0).forEach(tr -> ms.add(tr.recoveryMs()));
        ms.sort(null);
        long hangs = done.stream().filter(Trial::hang).count();
        if (!ms.isEmpty()) {
            report.append(String.format(Locale.ROOT, "recoveries %d: kill to the first collective of the new generation on "
                            + "every survivor p50 %d ms, p99 %d ms, max %d ms%n", ms.size(), ms.get(ms.size() / 2),
                    ms.get(Math.min(ms.size() - 1, (int) Math.ceil(ms.size() * 0.99) - 1)), ms.get(ms.size() - 1)));
        }
        report.append("hangs ").append(hangs).append('\n');
        System.out.print(report);
        Files.createDirectories(Path.of("target"));
        Files.writeString(Path.of("target", "elastic-report.txt"), report);
        assertEquals(0, hangs, report.toString());
        for (Trial tr : done) {
            assertTrue(!tr.outcome().startsWith("WRONG"), "trial " + tr.n() + ": " + tr.outcome() + "\n" + report);
        }
        assertTrue(!ms.isEmpty() && ms.get(ms.size() / 2) <= 1000, "p50 recovery above 1 s\n" + report);
    }

    private static Trial trial(int n, String kind, Random rnd) throws Exception {
        try (TcpStoreServer server = TcpStoreServer.start(TcpStoreServerConfig.builder().name("elastic-store").build());
             MultiJvm job = MultiJvm.builder().name("elastic-" + n).worldSize(4).mainClass(PipelineDemo.class)
                     .args("--elastic", "--tp", "2", "--steps", "20000", "--hidden", "256")
                     .masterPort(server.port()).env(Settings.LAUNCHER_STORE.name(), "1")
                     .env(Settings.TIMEOUT_MS.name(), Long.toString(TIMEOUT_MS)).maxHeap("256m").echo(null)
                     .jvmArg("-XX:+UseSerialGC").keepOthersOnFailure().deadline(Duration.ofSeconds(120)).start()) {
            for (int r = 0; r < 4; r++) {
                job.awaitLine(r, "demo: elastic serving", Duration.ofSeconds(60));
            }
            Thread.sleep(100 + rnd.nextInt(700));
            int first = rnd.nextInt(4);
            List<Integer> victims = new ArrayList<>(List.of(first));
            long killedAt = System.currentTimeMillis();
            job.kill(first);
            if (!kind.equals("one")) {
                Thread.sleep(rnd.nextInt(100));
                int second = kind.equals("same") ? first ^ 1 : (first + 2) % 4; // TP peer, or a rank of the other replica
                victims.add(second);
                job.kill(second);
            }
            MultiJvm.Results res = job.awaitAll();
            boolean hang = res.timedOut();
            List<Integer> survivors = new ArrayList<>();
            for (int r = 0; r < 4; r++) {
                if (!victims.contains(r)) {
                    survivors.add(r);
                }
            }
            if (kind.equals("both")) {
                // no replica is left whole: a rank either left with its replica (exit 0, when the first recovery
                // was over before the second kill) or fails with a typed exception; none may finish serving
                for (int r : survivors) {
                    String all = String.join("\n", res.output(r));
                    boolean typed = TYPED.matcher(all).find();
                    boolean left = res.exitCode(r) == 0 && all.contains("demo: elastic left");
                    if (!(left || res.exitCode(r) != 0 && typed) || all.contains("values: all exact")) {
                        return new Trial(n, kind, victims, hang, -1, "WRONG: rank " + r + " exited " + res.exitCode(r)
                                + (typed ? "" : " without a typed exception") + "\n" + all);
                    }
                }
                return new Trial(n, kind, victims, hang, -1, "every survivor left or failed typed");
            }
            int lostReplica = first / 2;
            long recovered = -1;
            for (int r : survivors) {
                if (res.exitCode(r) != 0) {
                    return new Trial(n, kind, victims, hang, -1, "WRONG: rank " + r + " exited " + res.exitCode(r) + "\n"
                            + String.join("\n", res.output(r)));
                }
                String all = String.join("\n", res.output(r));
                if (r / 2 == lostReplica) {
                    if (!all.contains("demo: elastic left")) {
                        return new Trial(n, kind, victims, hang, -1, "WRONG: rank " + r + " of the lost replica did not "
                                + "leave\n" + all);
                    }
                    continue;
                }
                Matcher m = RECOVERED.matcher(all);
                if (!m.find()) {
                    return new Trial(n, kind, victims, hang, -1, "WRONG: rank " + r + " did not recover\n" + all);
                }
                recovered = Math.max(recovered, Long.parseLong(m.group(2)) - killedAt);
            }
            if (recovered > SLOW_MS) {
                StringBuilder sb = new StringBuilder("trial " + n + " " + kind + " victims " + victims + " killed at "
                        + killedAt + "\n");
                for (int r = 0; r < 4; r++) {
                    sb.append("---- rank ").append(r).append(" (exit ").append(res.exitCode(r)).append(")\n");
                    res.output(r).forEach(l -> sb.append(l).append('\n'));
                }
                Files.createDirectories(Path.of("target"));
                Files.writeString(Path.of("target", "elastic-trial-" + n + ".log"), sb);
            }
            int reporter = lostReplica == 0 ? 2 : 0;
            String rep = String.join("\n", res.output(reporter));
            if (!rep.contains("values: all exact") || !rep.contains("recoveries: 1")) {
                return new Trial(n, kind, victims, hang, recovered, "WRONG: no exact report from rank " + reporter + "\n" + rep);
            }
            return new Trial(n, kind, victims, hang, recovered, "replica " + (1 - lostReplica) + " served every request");
        }
    }
}
