package io.jcomm.it.store;

import static java.nio.charset.StandardCharsets.UTF_8;

import io.jcomm.cpu.store.TcpStore;
import io.jcomm.cpu.store.TcpStoreConfig;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * One JVM of {@link DurableStoreCrowdIT}: {@code perJvm} store clients, each on its own thread and
 * connection, start spread over {@code spreadMs} and run one rendezvous: set its key, add to the
 * counter (the client that makes it {@code total} sets {@code done}), wait for {@code done}, multi-get
 * three peers' keys and check them. Prints {@code client G add=R ms=T} per client that finished,
 * {@code client G FAILED ...} otherwise, and exits non-zero on any failure.
 *
 * <p>args: port, total clients, clients of this JVM, spread in ms, timeout in ms; RANK from the
 * environment numbers this JVM's clients {@code RANK * perJvm ...}.
 */
public final class DurableCrowdWorker {

    private DurableCrowdWorker() {
    }

    public static void main(String[] args) throws Exception {
        int port = Integer.parseInt(args[0]);
        int total = Integer.parseInt(args[1]);
        int perJvm = Integer.parseInt(args[2]);
        long spreadMs = Long.parseLong(args[3]);
        Duration timeout = Duration.ofMillis(Long.parseLong(args[4]));
        int jvm = Integer.parseInt(System.getenv("RANK"));
        TcpStoreConfig config = TcpStoreConfig.builder().port(port).timeout(timeout).build();
        AtomicInteger failed = new AtomicInteger();
        AtomicLong slowest = new AtomicLong();
        CountDownLatch done = new CountDownLatch(perJvm);
        long t0 = System.nanoTime();
        for (int j = 0; j < perJvm; j++) {
            int g = jvm * perJvm + j;
            Thread t = new Thread(() -> {
                try {
                    long startAt = t0 + TimeUnit.MILLISECONDS.toNanos(spreadMs * g / total);
                    long pause = startAt - System.nanoTime();
                    if (pause > 0) {
                        TimeUnit.NANOSECONDS.sleep(pause);
                    }
                    long c0 = System.nanoTime();
                    long r;
                    try (TcpStore s = TcpStore.connect(config)) {
                        s.set("rank/" + g, ("v" + g).getBytes(UTF_8));
                        r = s.add("count", 1);
                        if (r == total) {
                            s.set("done", "all".getBytes(UTF_8));
                        }
                        s.wait(List.of("done"), timeout);
                        int[] peers = {(g + 1) % total, (g + 7) % total, (g + total / 2) % total};
                        List<byte[]> got = s.multiGet(Arrays.stream(peers).mapToObj(p -> "rank/" + p).toList(), timeout);
                        for (int i = 0; i < peers.length; i++) {
                            String v = new String(got.get(i), UTF_8);
                            if (!v.equals("v" + peers[i])) {
                                throw new AssertionError("peer " + peers[i] + " has '" + v + "'");
                            }
                        }
                    }
                    long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - c0);
                    slowest.accumulateAndGet(ms, Math::max);
                    System.out.println("client " + g + " add=" + r + " ms=" + ms);
                } catch (Throwable e) {
                    failed.incrementAndGet();
                    System.out.println("client " + g + " FAILED " + e);
                } finally {
                    done.countDown();
                }
            }, "client-" + g);
            t.start();
        }
        boolean all = done.await(timeout.toMillis() + spreadMs + 10_000, TimeUnit.MILLISECONDS);
        System.out.println("jvm " + jvm + " summary clients=" + perJvm + " failed=" + failed.get() + " slowestMs="
                + slowest.get() + (all ? "" : " (some clients never finished)"));
        System.out.flush();
        System.exit(all && failed.get() == 0 ? 0 : 1);
    }
}
