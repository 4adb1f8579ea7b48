package io.jcomm.it.store;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import io.jcomm.testkit.FreePorts;
import io.jcomm.testkit.MultiJvm;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.BitSet;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code commstore --data DIR} killed with SIGKILL in the middle of a 1,000-client rendezvous and
 * started again on the same port and directory: every client finishes within its deadline, no key is
 * lost, and the counter every client added to once counts each of them exactly once (the add results
 * are exactly 1..1000).
 */
@Timeout(value = 120, unit = TimeUnit.SECONDS)
class DurableStoreCrowdIT {

    private static final int JVMS = 4;
    private static final int PER_JVM = 250;
    private static final int TOTAL = JVMS * PER_JVM;
    private static final long SPREAD_MS = 4000;
    private static final long TIMEOUT_MS = 45_000;
    private static final Pattern RESULT = Pattern.compile("client (\\d+) add=(\\d+) ms=(\\d+)");

    @TempDir
    Path data;

    @Test
    void aStoreKilledAndRestartedDuringAThousandClientRendezvousLosesNoKeyAndFailsNoClient() throws Exception {
        int port = FreePorts.find();
        String[] storeArgs = {"--data", data.toString(), "--quiet"};
        StoreServerProcess store = StoreServerProcess.startOn(port, storeArgs);
        long restartMs;
        long countAtKill;
        try (TcpStore observer = TcpStore.connect(TcpStoreConfig.builder().port(port)
                .timeout(Duration.ofSeconds(30)).build());
             MultiJvm clients = MultiJvm.builder().name("crowd").worldSize(JVMS).mainClass(DurableCrowdWorker.class)
                     .args(Integer.toString(port), Integer.toString(TOTAL), Integer.toString(PER_JVM),
                             Long.toString(SPREAD_MS), Long.toString(TIMEOUT_MS))
                     .maxHeap("256m").deadline(Duration.ofSeconds(100)).start()) {
            // kill the store when about a third of the clients have added to the counter
            countAtKill = 0;
            long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(60);
            while (countAtKill < TOTAL / 3 && System.nanoTime() < end) {
                Thread.sleep(5);
                if (observer.check(List.of("count"))) {
                    countAtKill = Long.parseLong(new String(observer.get("count"), UTF_8));
                }
            }
            assertTrue(countAtKill >= TOTAL / 3 && countAtKill < TOTAL, "count " + countAtKill + " at the kill");
            store.jvm.kill(0); // SIGKILL
            store.jvm.process(0).waitFor(10, TimeUnit.SECONDS);
            long t0 = System.nanoTime();
            store.close();
            store = StoreServerProcess.startOn(port, storeArgs);
            restartMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);

            MultiJvm.Results r = clients.awaitAll();
            List<String> failures = new ArrayList<>();
            BitSet adds = new BitSet();
            BitSet seen = new BitSet();
            long slowest = 0;
            for (int j = 0; j < JVMS; j++) {
                for (String line : r.output(j)) {
                    if (line.contains("FAILED") || line.contains("never finished")) {
                        failures.add(line);
                    }
                    Matcher m = RESULT.matcher(line);
                    if (m.find()) {
                        int g = Integer.parseInt(m.group(1));
                        int add = Integer.parseInt(m.group(2));
                        assertTrue(!adds.get(add), "add result " + add + " seen twice: " + line);
                        adds.set(add);
                        seen.set(g);
                        slowest = Math.max(slowest, Long.parseLong(m.group(3)));
                    }
                }
            }
            assertEquals(List.of(), failures);
            r.assertAllSucceeded();
            assertEquals(TOTAL, seen.cardinality(), "clients that finished");
            // every add result 1..TOTAL exactly once: no add lost, none applied twice
            assertEquals(TOTAL, adds.cardinality());
            assertEquals(1, adds.nextSetBit(0));
            assertEquals(TOTAL, adds.length() - 1);
            assertTrue(slowest < TIMEOUT_MS, "slowest client " + slowest + " ms");

            // the store after the restart: every key there, with its value
            assertArrayEquals(Long.toString(TOTAL).getBytes(UTF_8), observer.get("count"));
            assertArrayEquals("all".getBytes(UTF_8), observer.get("done"));
            assertEquals(TOTAL + 2, observer.numKeys());
            List<String> keys = new ArrayList<>();
            for (int g = 0; g < TOTAL; g++) {
                keys.add("rank/" + g);
            }
            List<byte[]> values = observer.multiGet(keys, Duration.ofSeconds(5));
            for (int g = 0; g < TOTAL; g++) {
                assertEquals("v" + g, new String(values.get(g), UTF_8), "rank/" + g);
            }
            System.out.println("durable crowd: " + TOTAL + " clients in " + JVMS + " JVMs, store killed at count "
                    + countAtKill + ", restarted (new JVM listening, keys loaded) in " + restartMs
                    + " ms, slowest client " + slowest + " ms, failures 0");
        } finally {
            store.close();
        }
    }
}
