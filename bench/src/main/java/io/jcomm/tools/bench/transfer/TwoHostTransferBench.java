package io.jcomm.tools.bench.transfer;

import io.jcomm.api.store.Store;
import io.jcomm.transfer.MemoryRegion;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import io.jcomm.transfer.TransferAgent;
import io.jcomm.transfer.TransferOptions;
import io.jcomm.transfer.bench.ManyToOneBench;
import io.jcomm.transfer.bench.TransferBench;
import java.io.IOException;
import java.io.PrintStream;
import java.net.DatagramSocket;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ClosedChannelException;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import org.HdrHistogram.Histogram;

/**
 * {@code commbench transfer --serve} and {@code --peer}: the transfer engine's tcp writes between two
 * hosts (two processes that meet in a store), beside plain sockets between the same hosts measured in
 * the same run. The serving side (the owner) registers an off-heap region and runs a raw socket sink;
 * the peer (the initiator) measures, for each size, one-at-a-time engine writes (issue, await) and
 * raw rounds of the same size (the bytes one way, an 8-byte ack back) in interleaved trials, and once
 * per run the raw streaming throughput of one plain socket (large writes back to back, acked at the
 * end): the throughput the network between the two hosts gives a single connection, and that of as
 * many sockets at once as the engine has streams.
 *
 * <p>Raw sink protocol, per connection: a mode byte, then for {@code 'R'} rounds of a 4-byte length
 * (1 to the published maximum) and that many bytes, each answered with 8 bytes; for {@code 'S'}
 * streams of an 8-byte length (at most {@link #MAX_STREAM_BYTES}) and that many bytes, each answered
 * with 8 bytes. Anything else closes the connection.
 */
final class TwoHostTransferBench {

    /** Store keys of one run, under this prefix. */
    static final String PREFIX = "commbench/transfer/xhost/";
    static final String OWNER = "commbench-xhost-owner";
    static final String PEER = "commbench-xhost-peer";
    static final long MAX_STREAM_BYTES = 1L << 40;
    private static final int STREAM_WRITE = 4 << 20;
    private static final int TRIALS = 3;
    private static final int MAX_SINK_CONNECTIONS = 16;
    private static final Set<Permission> RW = EnumSet.of(Permission.READ, Permission.WRITE);

    private TwoHostTransferBench() {
    }

    /**
     * One size's figures.
     *
     * @param bytes    bytes per op
     * @param tcp      mean seconds per engine write (best of the trials)
     * @param raw      mean seconds per raw round (best of the trials)
     * @param tcpLat   engine write latencies in ns, every trial
     * @param rawLat   raw round latencies in ns, every trial
     */
    record Row(int bytes, double tcp, double raw, Histogram tcpLat, Histogram rawLat) {
    }

    static Histogram histogram() {
        return new Histogram(TimeUnit.SECONDS.toNanos(60), 3);
    }

    // ------------------------------------------------------------------ the serving side

    /**
     * Serves one run: an owner agent with an off-heap region of {@code maxBytes} listening on
     * {@code host}, and a raw sink; with {@code manyToOne > 0} also {@code owners} owner agents (named by
     * {@code ownerOptions}) holding one region of {@code maxBytes} per initiator (initiator i's in owner
     * i mod owners) and a small region of {@code smallBytes} in the first, for {@link #measureManyToOne}.
     * Publishes them in {@code store} and returns when the peer says it is done or after {@code timeout}.
     *
     * @return whether the peer finished within the timeout
     */
    static boolean serve(Store store, String host, int maxBytes, TransferOptions.Builder ob,
                         java.util.function.IntFunction<TransferOptions.Builder> ownerOptions, int manyToOne, int owners,
                         int smallBytes, Duration timeout, PrintStream out) throws Exception {
        for (String k : List.of("done", "desc", "raw", "m2o")) {
            store.deleteKey(PREFIX + k);
        }
        List<TransferAgent> extra = new ArrayList<>();
        try (TransferAgent owner = TransferAgent.open(store, ob.listenHost(host).transports(Set.of("tcp")).build());
             RawSink sink = new RawSink(host, Math.max(maxBytes, smallBytes))) {
            MemoryRegion region = owner.register(ByteBuffer.allocateDirect(maxBytes), RW);
            for (int o = 0; o < (manyToOne > 0 ? owners : 0); o++) {
                extra.add(TransferAgent.open(store, ownerOptions.apply(o).listenHost(host).transports(Set.of("tcp")).build()));
            }
            for (int i = 0; i < manyToOne; i++) {
                store.set(PREFIX + "m2o/large/" + i, extra.get(i % owners).register(ByteBuffer.allocateDirect(maxBytes), RW)
                        .descriptor().encode());
            }
            if (manyToOne > 0) {
                store.set(PREFIX + "m2o/small", extra.get(0).register(ByteBuffer.allocateDirect(smallBytes), RW).descriptor().encode());
                store.set(PREFIX + "m2o", (manyToOne + " " + owners).getBytes(StandardCharsets.US_ASCII));
            }
            store.set(PREFIX + "raw", (host + " " + sink.port() + " " + maxBytes).getBytes(StandardCharsets.US_ASCII));
            store.set(PREFIX + "desc", region.descriptor().encode());
            out.printf(Locale.ROOT, "# serving: agent %s on %s (tcp), a region of %d bytes, raw sink on %s:%d; waiting for the peer%n",
                    owner.name(), host, maxBytes, host, sink.port());
            out.flush();
            try {
                store.get(PREFIX + "done", timeout);
                out.println("# the peer is done");
                return true;
            } catch (io.jcomm.api.CommTimeoutException e) {
                out.println("# no peer finished within " + timeout.toSeconds() + " s");
                return false;
            } finally {
                store.deleteKey(PREFIX + "done");
            }
        } finally {
            for (TransferAgent a : extra) {
                a.close();
            }
        }
    }

    /** The raw socket sink of the serving side: one thread per connection (at most {@link #MAX_SINK_CONNECTIONS} in all). */
    static final class RawSink implements AutoCloseable {
        private final ServerSocketChannel server;
        private final int max;
        private final Thread acceptor;
        private final List<SocketChannel> open = new ArrayList<>();

        RawSink(String host, int max) throws IOException {
            this.max = max;
            server = ServerSocketChannel.open().bind(new InetSocketAddress(host, 0));
            acceptor = new Thread(this::acceptLoop, "commbench-raw-accept");
            acceptor.setDaemon(true);
            acceptor.start();
        }

        int port() {
            return ((InetSocketAddress) server.socket().getLocalSocketAddress()).getPort();
        }

        private void acceptLoop() {
            int n = 0;
            while (n++ < MAX_SINK_CONNECTIONS) {
                SocketChannel c;
                try {
                    c = server.accept();
                    tune(c);
                } catch (IOException e) {
                    return; // closed
                }
                synchronized (open) {
                    open.add(c);
                }
                Thread t = new Thread(() -> sink(c), "commbench-raw-sink");
                t.setDaemon(true);
                t.start();
            }
        }

        private void sink(SocketChannel c) {
            ByteBuffer head = ByteBuffer.allocateDirect(8);
            ByteBuffer ack = ByteBuffer.allocateDirect(8);
            try (c) {
                head.clear().limit(1);
                readFully(c, head);
                byte mode = head.get(0);
                if (mode != 'R' && mode != 'S') {
                    return;
                }
                ByteBuffer in = ByteBuffer.allocateDirect(mode == 'R' ? max : STREAM_WRITE);
                while (true) {
                    head.clear().limit(mode == 'R' ? 4 : 8);
                    if (!readOrEnd(c, head)) {
                        return;
                    }
                    long n = mode == 'R' ? head.getInt(0) : head.getLong(0);
                    if (n < 1 || n > (mode == 'R' ? max : MAX_STREAM_BYTES)) {
                        return; // malformed: close
                    }
                    for (long left = n; left > 0; ) {
                        in.clear().limit((int) Math.min(in.capacity(), left));
                        readFully(c, in);
                        left -= in.position();
                    }
                    ack.clear();
                    writeFully(c, ack);
                }
            } catch (IOException e) {
                // the peer went away
            }
        }

        @Override
        public void close() throws IOException {
            server.close();
            acceptor.interrupt();
            synchronized (open) {
                for (SocketChannel c : open) {
                    c.close();
                }
            }
        }
    }

    static void tune(SocketChannel c) throws IOException {
        c.setOption(StandardSocketOptions.TCP_NODELAY, true);
        c.setOption(StandardSocketOptions.SO_RCVBUF, 4 << 20);
        c.setOption(StandardSocketOptions.SO_SNDBUF, 4 << 20);
    }

    static void readFully(SocketChannel c, ByteBuffer b) throws IOException {
        if (!readOrEnd(c, b)) {
            throw new ClosedChannelException();
        }
    }

    /** Reads until {@code b} is full; false at end of stream before the first byte. */
    static boolean readOrEnd(SocketChannel c, ByteBuffer b) throws IOException {
        boolean any = false;
        while (b.hasRemaining()) {
            int r = c.read(b);
            if (r < 0) {
                if (any) {
                    throw new ClosedChannelException();
                }
                return false;
            }
            any |= r > 0;
        }
        return true;
    }

    static void writeFully(SocketChannel c, ByteBuffer b) throws IOException {
        while (b.hasRemaining()) {
            c.write(b);
        }
    }

    // ------------------------------------------------------------------ the peer

    /**
     * The figures of one run on the peer's side.
     *
     * @param streamBytesPerSecond         one raw socket's stream (the goal's reference)
     * @param parallelStreamBytesPerSecond as many raw sockets as the engine has streams, in parallel
     */
    record Result(double streamBytesPerSecond, double parallelStreamBytesPerSecond, int streams, int chunkBytes, List<Row> rows) {
    }

    /** The local address this host reaches {@code host} from (no packet is sent). */
    static String localAddressTowards(String host) throws IOException {
        try (DatagramSocket s = new DatagramSocket()) {
            s.connect(new InetSocketAddress(InetAddress.getByName(host), 9));
            InetAddress a = s.getLocalAddress();
            return a == null || a.isAnyLocalAddress() ? "127.0.0.1" : a.getHostAddress();
        }
    }

    /**
     * Measures against a serving side published in {@code store}: the raw stream once, then every size
     * of {@code sizes} (engine writes and raw rounds interleaved, {@code seconds} per path and size over
     * three trials), handing each row to {@code each}; tells the serving side it is done.
     */
    static Result measure(Store store, String storeHost, List<Integer> sizes, double seconds, TransferOptions.Builder ob,
                          Duration timeout, Consumer<double[]> onStream, Consumer<Row> each) throws Exception {
        String[] raw = new String(store.get(PREFIX + "raw", timeout), StandardCharsets.US_ASCII).split(" ");
        RemoteDescriptor desc = RemoteDescriptor.decode(store.get(PREFIX + "desc", timeout));
        int ownerMax = Integer.parseInt(raw[2]);
        int max = sizes.get(sizes.size() - 1);
        if (max > ownerMax || max > desc.length()) {
            throw new IllegalArgumentException("the serving side's region has " + Math.min(ownerMax, desc.length())
                    + " bytes, less than --max-bytes " + max + " (give the serving side at least as much)");
        }
        InetSocketAddress sinkAddress = new InetSocketAddress(raw[0], Integer.parseInt(raw[1]));
        TransferOptions opts = ob.listenHost(localAddressTowards(storeHost)).transports(Set.of("tcp")).build();
        List<Row> rows = new ArrayList<>();
        try {
            return measure(store, desc, sinkAddress, sizes, max, seconds, opts, onStream, each, rows);
        } finally {
            store.set(PREFIX + "done", new byte[0]); // after the agent closed: the serving side may take its store away now
        }
    }

    private static Result measure(Store store, RemoteDescriptor desc, InetSocketAddress sinkAddress, List<Integer> sizes, int max,
                                  double seconds, TransferOptions opts, Consumer<double[]> onStream, Consumer<Row> each,
                                  List<Row> rows) throws Exception {
        try (TransferAgent init = TransferAgent.open(store, opts);
             SocketChannel round = SocketChannel.open(sinkAddress);
             SocketChannel stream = SocketChannel.open(sinkAddress)) {
            tune(round);
            tune(stream);
            writeFully(round, ByteBuffer.wrap(new byte[] {'R'}));
            writeFully(stream, ByteBuffer.wrap(new byte[] {'S'}));
            MemoryRegion src = init.register(ByteBuffer.allocateDirect(max), Set.of());
            for (int i = 0; i < max; i++) {
                src.buffer().put(i, (byte) (i * 31 + 7));
            }
            ByteBuffer out = ByteBuffer.allocateDirect(Math.max(max, STREAM_WRITE));
            ByteBuffer ack = ByteBuffer.allocateDirect(8);
            ByteBuffer head = ByteBuffer.allocateDirect(8);
            Op engine0 = n -> init.write(src.slice(0, n), desc.slice(0, n), null).await();
            Op round0 = n -> TransferBench.rawRound(round, n, out, head, ack);
            // the raw stream of one socket: a calibration, then the best of three trials of about max(0.5, seconds) s
            double streamRate = streamOnce(stream, out, ack, 64L << 20);
            double best = 0;
            for (int t = 0; t < TRIALS; t++) {
                long bytes = Math.min(MAX_STREAM_BYTES, Math.max(64L << 20, (long) (streamRate * Math.max(0.5, seconds))));
                best = Math.max(best, streamOnce(stream, out, ack, bytes));
            }
            double parallel = parallelStream(sinkAddress, opts.tcpStreams(), streamRate, seconds);
            onStream.accept(new double[] {best, parallel});
            int warm = Math.min(4096, max);
            time(engine0, warm, seconds, null); // JIT warm-up and connections
            time(round0, warm, seconds, null);
            for (int size : sizes) {
                Histogram tl = histogram();
                Histogram rl = histogram();
                double tcp = Double.MAX_VALUE;
                double rr = Double.MAX_VALUE;
                for (int t = 0; t < TRIALS; t++) { // interleaved, best of each: the noise of a shared machine hits both alike
                    tcp = Math.min(tcp, time(engine0, size, seconds / TRIALS, tl));
                    rr = Math.min(rr, time(round0, size, seconds / TRIALS, rl));
                }
                Row r = new Row(size, tcp, rr, tl, rl);
                rows.add(r);
                each.accept(r);
            }
            return new Result(best, parallel, opts.tcpStreams(), opts.tcpChunkBytes(), rows);
        }
    }

    /**
     * Many to few across hosts: {@code initiators} agents here (named by {@code initiatorOptions}) against
     * the owners a {@link #serve} with as many initiators published, and the small rounds over a plain
     * socket to its raw sink ({@link ManyToOneBench#measure(List, List, RemoteDescriptor, int, int, double,
     * ManyToOneBench.Round)}).
     */
    static ManyToOneBench.Result measureManyToOne(Store store, String storeHost, int initiators, int smallBytes, double seconds,
                                                  java.util.function.IntFunction<TransferOptions.Builder> initiatorOptions,
                                                  Duration timeout) throws Exception {
        String[] shape = new String(store.get(PREFIX + "m2o", timeout), StandardCharsets.US_ASCII).split(" ");
        if (Integer.parseInt(shape[0]) != initiators) {
            throw new IllegalArgumentException("the serving side holds regions for --many-to-one " + shape[0] + ", not " + initiators);
        }
        int owners = Integer.parseInt(shape[1]);
        String[] raw = new String(store.get(PREFIX + "raw", timeout), StandardCharsets.US_ASCII).split(" ");
        RemoteDescriptor small = RemoteDescriptor.decode(store.get(PREFIX + "m2o/small", timeout));
        if (small.length() < smallBytes) {
            throw new IllegalArgumentException("the serving side's small region has " + small.length() + " bytes, less than --min-bytes "
                    + smallBytes + " (give both sides the same --min-bytes)");
        }
        List<RemoteDescriptor> large = new ArrayList<>();
        for (int i = 0; i < initiators; i++) {
            large.add(RemoteDescriptor.decode(store.get(PREFIX + "m2o/large/" + i, timeout)));
        }
        String local = localAddressTowards(storeHost);
        List<TransferAgent> inits = new ArrayList<>();
        try (SocketChannel round = SocketChannel.open(new InetSocketAddress(raw[0], Integer.parseInt(raw[1])))) {
            tune(round);
            writeFully(round, ByteBuffer.wrap(new byte[] {'R'}));
            ByteBuffer head = ByteBuffer.allocateDirect(4);
            ByteBuffer out = ByteBuffer.allocateDirect(smallBytes);
            ByteBuffer ack = ByteBuffer.allocateDirect(8);
            for (int i = 0; i < initiators; i++) {
                inits.add(TransferAgent.open(store, initiatorOptions.apply(i).listenHost(local).transports(Set.of("tcp")).build()));
            }
            return ManyToOneBench.measure(inits, large, small, owners, smallBytes, seconds,
                    () -> TransferBench.rawRound(round, smallBytes, out, head, ack));
        } finally {
            for (TransferAgent a : inits) {
                a.close();
            }
            store.set(PREFIX + "done", new byte[0]);
        }
    }

    private interface Op {
        void run(int n) throws Exception;
    }

    /** Mean seconds per op over about {@code seconds} after a warm-up of a third of that; each op's time into {@code h}. */
    private static double time(Op op, int n, double seconds, Histogram h) throws Exception {
        long warm = System.nanoTime() + (long) (seconds / 3 * 1e9);
        while (System.nanoTime() < warm) {
            op.run(n);
        }
        long count = 0;
        long t0 = System.nanoTime();
        long end = t0 + (long) (seconds * 1e9);
        long t = t0;
        do {
            long s = t;
            op.run(n);
            t = System.nanoTime();
            if (h != null) {
                h.recordValue(Math.min(h.getHighestTrackableValue(), Math.max(1, t - s)));
            }
            count++;
        } while (t < end);
        return (t - t0) / 1e9 / count;
    }

    /** Bytes per second of {@code sockets} raw streams at once (one thread each), best of the trials. */
    private static double parallelStream(InetSocketAddress sink, int sockets, double oneRate, double seconds) throws Exception {
        List<SocketChannel> cs = new ArrayList<>();
        try {
            for (int i = 0; i < sockets; i++) {
                SocketChannel c = SocketChannel.open(sink);
                cs.add(c);
                tune(c);
                writeFully(c, ByteBuffer.wrap(new byte[] {'S'}));
            }
            long each = Math.min(MAX_STREAM_BYTES, Math.max(64L << 20, (long) (oneRate * Math.max(0.5, seconds))));
            double best = 0;
            for (int t = 0; t < TRIALS; t++) {
                List<Thread> threads = new ArrayList<>();
                IOException[] failure = new IOException[1];
                long t0 = System.nanoTime();
                for (SocketChannel c : cs) {
                    Thread th = new Thread(() -> {
                        try {
                            streamOnce(c, ByteBuffer.allocateDirect(STREAM_WRITE), ByteBuffer.allocateDirect(8), each);
                        } catch (IOException e) {
                            synchronized (failure) {
                                failure[0] = e;
                            }
                        }
                    }, "commbench-raw-stream");
                    th.start();
                    threads.add(th);
                }
                for (Thread th : threads) {
                    th.join();
                }
                synchronized (failure) {
                    if (failure[0] != null) {
                        throw failure[0];
                    }
                }
                best = Math.max(best, each * (double) sockets / ((System.nanoTime() - t0) / 1e9));
            }
            return best;
        } finally {
            for (SocketChannel c : cs) {
                c.close();
            }
        }
    }

    /** Bytes per second of one stream of {@code bytes}: large writes back to back, until the sink's ack. */
    private static double streamOnce(SocketChannel c, ByteBuffer out, ByteBuffer ack, long bytes) throws IOException {
        long t0 = System.nanoTime();
        ByteBuffer h = ByteBuffer.allocate(8).putLong(0, bytes);
        writeFully(c, h);
        for (long left = bytes; left > 0; ) {
            ByteBuffer o = out.duplicate().clear().limit((int) Math.min(STREAM_WRITE, left));
            left -= o.remaining();
            writeFully(c, o);
        }
        ack.clear();
        readFully(c, ack);
        return bytes / ((System.nanoTime() - t0) / 1e9);
    }

    // ------------------------------------------------------------------ the table

    static void printHeader(PrintStream out, String from, String to, int streams, int chunkBytes) {
        out.printf(Locale.ROOT, "# transfer bench across hosts: %s -> %s, %s, %d cpus; engine tcp writes (%d streams, pieces of "
                        + "up to %d bytes), one at a time (issue, await), beside raw socket rounds (the bytes, an 8-byte ack)%n",
                from, to, System.getProperty("java.vm.name") + " " + Runtime.version(), Runtime.getRuntime().availableProcessors(),
                streams, chunkBytes);
    }

    static void printStream(PrintStream out, double bytesPerSecond, int sockets, double parallelBytesPerSecond) {
        out.printf(Locale.ROOT, "# raw stream (4 MiB writes back to back, best of %d): one socket %.2f GB/s; %d sockets at once "
                + "(as many as the engine's streams) %.2f GB/s%n", TRIALS, bytesPerSecond / 1e9, sockets, parallelBytesPerSecond / 1e9);
        out.printf(Locale.ROOT, "%10s %10s %9s %9s %12s %9s %9s %10s %10s %6s%n", "bytes", "tcp GB/s", "tcp p50", "tcp p99",
                "raw rnd GB/s", "raw p50", "raw p99", "tcp/round", "tcp/stream", ">=90%");
    }

    static void printRow(PrintStream out, Row r, double stream) {
        int n = r.bytes();
        double tcp = n / r.tcp();
        double raw = n / r.raw();
        out.printf(Locale.ROOT, "%10d %10.3f %9.1f %9.1f %12.3f %9.1f %9.1f %9.0f%% %9.0f%% %6s%n", n, tcp / 1e9,
                us(r.tcpLat(), 50), us(r.tcpLat(), 99), raw / 1e9, us(r.rawLat(), 50), us(r.rawLat(), 99), 100 * tcp / raw,
                100 * tcp / stream, tcp >= 0.9 * raw ? "yes" : "no");
    }

    /** The closing lines: the goal at the largest size (engine against the raw stream). */
    static boolean printVerdict(PrintStream out, Result r) {
        Row last = r.rows().get(r.rows().size() - 1);
        double ratio = last.bytes() / last.tcp() / r.streamBytesPerSecond();
        boolean met = ratio >= 0.9;
        out.printf(Locale.ROOT, "# latencies in us (HdrHistogram, every trial); >=90%%: the engine's write at least 90%% of the raw "
                + "round of that size%n");
        out.printf(Locale.ROOT, "# goal (the engine's largest write >= 90%% of one raw socket's stream between the hosts): %.0f%% "
                + "at %d bytes: %s; %.0f%% of %d raw sockets' stream%n", 100 * ratio, last.bytes(), met ? "met" : "NOT met",
                100 * last.bytes() / last.tcp() / r.parallelStreamBytesPerSecond(), r.streams());
        return met;
    }

    private static double us(Histogram h, double percentile) {
        return h.getValueAtPercentile(percentile) / 1000.0;
    }

    /** The sizes of a run (those of the one-host table). */
    static List<Integer> sizes(int minBytes, int maxBytes) {
        return TransferBench.sizes(minBytes, maxBytes);
    }
}
