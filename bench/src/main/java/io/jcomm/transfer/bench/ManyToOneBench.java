package io.jcomm.transfer.bench;

import io.jcomm.api.store.InMemoryStore;
import io.jcomm.transfer.MemoryRegion;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import io.jcomm.transfer.TransferAgent;
import io.jcomm.transfer.TransferOptions;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Head-of-line figures of the {@code tcp} transport, many to few on this host: {@code initiators}
 * agents each write {@code largeBytes} into one of {@code owners} owner agents (initiator i into owner
 * i mod owners: 4 prefill ranks into 2 decode ranks is {@code 4, 2}), over and over, while the first
 * initiator also issues {@code smallBytes} writes one at a time (issue, await) into the first owner. The small writes' latency with
 * the large ones in flight is set beside their latency alone and beside one piece's time
 * ({@link TransferOptions#tcpChunkBytes()} at the aggregate bandwidth of the large writes), and beside
 * the same small rounds over a plain loopback socket pair, alone and under the same load: what the
 * machine's scheduling costs a small message when no transport queues it. All agents live in this JVM
 * (independent instances, real loopback sockets).
 *
 * <p>Usage: {@code ManyToOneBench [initiators (4)] [largeBytes (64 MiB)] [smallBytes (4 KiB)] [seconds (2)] [owners (1)]};
 * {@code commbench transfer --many-to-one} runs the same measurement.
 */
public final class ManyToOneBench {

    private ManyToOneBench() {
    }

    /**
     * The figures of one run, in seconds.
     *
     * @param initiators   agents writing large transfers (the first also writes the small ones)
     * @param owners       agents receiving them
     * @param largeBytes   bytes per large write
     * @param smallBytes   bytes per small write
     * @param chunkBytes   the tcp piece size
     * @param idle         small-write latencies with nothing else in flight, sorted
     * @param loaded       small-write latencies with the large writes in flight, sorted
     * @param loadedBytesPerSecond aggregate bandwidth of the large writes meanwhile
     * @param rawIdle      plain socket rounds of {@code smallBytes} with nothing else running, sorted
     * @param rawLoaded    the same with the large writes in flight, sorted
     */
    public record Result(int initiators, int owners, int largeBytes, int smallBytes, int chunkBytes, double[] idle, double[] loaded,
                         double loadedBytesPerSecond, double[] rawIdle, double[] rawLoaded) {

        /** One piece's time at the measured aggregate bandwidth. */
        public double chunkSeconds() {
            return chunkBytes / loadedBytesPerSecond;
        }

        /** One large write's time at the measured aggregate bandwidth shared by the initiators. */
        public double largeSeconds() {
            return (double) largeBytes * initiators / loadedBytesPerSecond;
        }

        /** One piece's time at the first owner's share of the measured bandwidth (what a small write there may wait). */
        public double ownerChunkSeconds() {
            int into = (initiators + owners - 1) / owners; // initiators writing into the first owner
            return chunkBytes / (loadedBytesPerSecond * into / initiators);
        }
    }

    static double quantile(double[] sorted, double q) {
        return sorted.length == 0 ? Double.NaN : sorted[Math.min(sorted.length - 1, (int) Math.floor(q * sorted.length))];
    }

    /** Runs the measurement into {@code owners} owners: about {@code seconds} alone, then about {@code seconds} under load. */
    public static Result measure(int initiators, int owners, int largeBytes, int smallBytes, double seconds) throws Exception {
        if (initiators < 1 || owners < 1 || owners > initiators || largeBytes < smallBytes || smallBytes < 1 || seconds <= 0) {
            throw new IllegalArgumentException("need 1 <= owners <= initiators, 1 <= smallBytes <= largeBytes, seconds > 0");
        }
        Set<Permission> rw = EnumSet.of(Permission.READ, Permission.WRITE);
        Duration timeout = Duration.ofSeconds(60);
        List<TransferAgent> agents = new ArrayList<>();
        try (InMemoryStore store = new InMemoryStore(Duration.ofSeconds(10));
             TransferBench.RawTcp raw = new TransferBench.RawTcp(smallBytes)) {
            try {
                List<TransferAgent> ownerAgents = new ArrayList<>();
                for (int o = 0; o < owners; o++) {
                    TransferAgent a = TransferAgent.open(store, TransferOptions.builder("m2o-owner-" + o).transports(Set.of("tcp"))
                            .timeout(timeout).build());
                    agents.add(a);
                    ownerAgents.add(a);
                }
                List<TransferAgent> inits = new ArrayList<>();
                List<RemoteDescriptor> dsts = new ArrayList<>();
                for (int i = 0; i < initiators; i++) {
                    TransferAgent a = TransferAgent.open(store, TransferOptions.builder("m2o-init-" + i).transports(Set.of("tcp"))
                            .timeout(timeout).build());
                    agents.add(a);
                    inits.add(a);
                    dsts.add(ownerAgents.get(i % owners).register(ByteBuffer.allocateDirect(largeBytes), rw).descriptor());
                }
                RemoteDescriptor smallDst = ownerAgents.get(0).register(ByteBuffer.allocateDirect(smallBytes), rw).descriptor();
                return measure(inits, dsts, smallDst, owners, smallBytes, seconds, () -> raw.round(smallBytes));
            } finally {
                for (TransferAgent a : agents) {
                    a.close();
                }
            }
        }
    }

    /** One timed round trip: a plain socket's small message and its ack. */
    public interface Round {
        void run() throws java.io.IOException;
    }

    /**
     * The measurement with agents and regions made elsewhere (another process, another host): initiator
     * {@code i} writes its whole {@code largeDsts.get(i)} over and over, the first initiator also writes
     * {@code smallBytes} into {@code smallDst} one at a time, and {@code rawRound} is a plain socket round of
     * {@code smallBytes} towards the owners' host; about {@code seconds} alone, then about {@code seconds}
     * under load.
     *
     * @param owners how many owners the descriptors name (for the report)
     */
    public static Result measure(List<TransferAgent> inits, List<RemoteDescriptor> largeDsts, RemoteDescriptor smallDst, int owners,
                                 int smallBytes, double seconds, Round rawRound) throws Exception {
        int initiators = inits.size();
        int largeBytes = Math.toIntExact(largeDsts.get(0).length());
        if (initiators < 1 || largeDsts.size() != initiators || smallDst.length() < smallBytes || smallBytes < 1 || seconds <= 0) {
            throw new IllegalArgumentException("need one large descriptor per initiator, a small one of at least smallBytes, seconds > 0");
        }
        Duration timeout = Duration.ofSeconds(60);
        List<MemoryRegion> srcs = new ArrayList<>();
        for (int i = 0; i < initiators; i++) {
            srcs.add(inits.get(i).register(ByteBuffer.allocateDirect(Math.toIntExact(largeDsts.get(i).length())), Set.of()));
        }
        TransferAgent first = inits.get(0);
        MemoryRegion smallSrc = first.register(ByteBuffer.allocateDirect(smallBytes), Set.of());
        RemoteDescriptor small = smallDst.slice(0, smallBytes);
        int chunk = first.options().tcpChunkBytes();
        for (int i = 0; i < initiators; i++) { // connect and warm up
            inits.get(i).write(srcs.get(i).all(), largeDsts.get(i), null, timeout).await();
        }
        smalls(first, smallSrc, small, seconds / 3, timeout);
        double[] idle = smalls(first, smallSrc, small, seconds, timeout);
        latencies(rawRound, seconds / 3);
        double[] rawIdle = latencies(rawRound, seconds);
        AtomicLong moved = new AtomicLong();
        AtomicReference<Throwable> failed = new AtomicReference<>();
        List<Thread> loaders = new ArrayList<>();
        long stopAt = System.nanoTime() + (long) ((seconds * 2.5 + 0.5) * 1e9);
        for (int i = 0; i < initiators; i++) {
            final int k = i;
            Thread t = new Thread(() -> {
                try {
                    while (System.nanoTime() < stopAt) {
                        inits.get(k).write(srcs.get(k).all(), largeDsts.get(k), null, timeout).await();
                        moved.addAndGet(largeDsts.get(k).length());
                    }
                } catch (RuntimeException e) {
                    failed.compareAndSet(null, e);
                }
            }, "m2o-large-" + i);
            t.start();
            loaders.add(t);
        }
        Thread.sleep((long) (seconds * 250));
        long m0 = moved.get();
        long w0 = System.nanoTime();
        double[] loaded = smalls(first, smallSrc, small, seconds, timeout);
        long w1 = System.nanoTime();
        long m1 = moved.get();
        double[] rawLoaded = latencies(rawRound, seconds);
        for (Thread t : loaders) {
            t.join(timeout.toMillis());
        }
        if (failed.get() != null) {
            throw new IllegalStateException("a large write failed: " + failed.get(), failed.get());
        }
        double bw = (m1 - m0) / ((w1 - w0) / 1e9);
        return new Result(initiators, owners, largeBytes, smallBytes, chunk, idle, loaded, bw, rawIdle, rawLoaded);
    }

    private static double[] smalls(TransferAgent a, MemoryRegion src, RemoteDescriptor dst, double seconds, Duration timeout) {
        try {
            return latencies(() -> a.write(src.all(), dst, null, timeout).await(), seconds);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException(e); // a write throws no IOException
        }
    }

    /** The latencies of {@code round} run back to back for about {@code seconds}, sorted, in seconds. */
    private static double[] latencies(Round round, double seconds) throws java.io.IOException {
        double[] l = new double[1024];
        int n = 0;
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long t;
        do {
            long t0 = System.nanoTime();
            round.run();
            t = System.nanoTime();
            if (n == l.length) {
                l = Arrays.copyOf(l, 2 * n);
            }
            l[n++] = (t - t0) / 1e9;
        } while (t < end);
        double[] r = Arrays.copyOf(l, n);
        Arrays.sort(r);
        return r;
    }

    /** Prints a result as a small table. */
    public static void print(PrintStream out, Result r) {
        out.printf(Locale.ROOT, "# many to %s over tcp: %d initiators x %d-byte writes into %d owner%s; the first also writes %d bytes "
                + "one at a time into the first owner; %s, %d cpus%n", r.owners() == 1 ? "one" : "few", r.initiators(), r.largeBytes(),
                r.owners(), r.owners() == 1 ? "" : "s", r.smallBytes(),
                System.getProperty("java.vm.name") + " " + Runtime.version(), Runtime.getRuntime().availableProcessors());
        out.printf(Locale.ROOT, "%-28s %8s %10s %10s %10s %10s%n", "small writes", "count", "p50 us", "p90 us", "p99 us", "max us");
        for (Object[] row : new Object[][] {{"alone", r.idle()}, {"beside the large writes", r.loaded()},
                {"raw socket round, alone", r.rawIdle()}, {"raw round, beside them", r.rawLoaded()}}) {
            double[] l = (double[]) row[1];
            out.printf(Locale.ROOT, "%-28s %8d %10.1f %10.1f %10.1f %10.1f%n", row[0], l.length, quantile(l, 0.5) * 1e6,
                    quantile(l, 0.9) * 1e6, quantile(l, 0.99) * 1e6, l.length == 0 ? Double.NaN : l[l.length - 1] * 1e6);
        }
        double piece = r.ownerChunkSeconds();
        out.printf(Locale.ROOT, "large writes: %.2f GB/s in all; one %d-byte piece at that rate: %.1f us (at the first owner's share: "
                + "%.1f us); one large write: %.1f us%n", r.loadedBytesPerSecond() / 1e9, r.chunkBytes(), r.chunkSeconds() * 1e6,
                piece * 1e6, r.largeSeconds() * 1e6);
        for (double q : new double[] {0.5, 0.9, 0.99}) {
            double overRaw = quantile(r.loaded(), q) - quantile(r.rawLoaded(), q);
            out.printf(Locale.ROOT, "p%-2d under load: small write - raw round under the same load %.1f us = %.2f pieces at the owner's "
                    + "share%n", Math.round(q * 100), overRaw * 1e6, overRaw / piece);
        }
        out.println();
    }

    public static void main(String[] args) throws Exception {
        int initiators = args.length > 0 ? Integer.parseInt(args[0]) : 4;
        int large = args.length > 1 ? Integer.parseInt(args[1]) : 64 << 20;
        int small = args.length > 2 ? Integer.parseInt(args[2]) : 4 << 10;
        double seconds = args.length > 3 ? Double.parseDouble(args[3]) : 2;
        int owners = args.length > 4 ? Integer.parseInt(args[4]) : 1;
        print(System.out, measure(initiators, owners, large, small, seconds));
    }
}
