package io.jcomm.transfer.bench;

import io.jcomm.api.store.InMemoryStore;
import io.jcomm.transfer.MemoryRegion;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import io.jcomm.transfer.TransferAgent;
import io.jcomm.transfer.TransferOptions;
import java.io.IOException;
import java.io.PrintStream;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.function.Consumer;

/**
 * Same-host figures of the transfer engine: for each size, one-at-a-time writes (issue, await; best of three interleaved trials) from
 * an initiator agent into an owner agent's region over {@code shm} (a shared region) and over
 * {@code tcp} (an off-heap region), beside a {@code memcpy} of the same size (direct buffer to
 * direct buffer) and a raw tcp loopback round (the bytes one way, an 8-byte ack back) measured in
 * the same run. Both agents live in this JVM (independent instances, real sockets and files).
 *
 * <p>Usage: {@code TransferBench [maxBytes (default 64 MiB)] [seconds per point (default 1)]}; {@code commbench transfer}
 * runs the same measurement ({@link #measure}) beside torch gloo.
 */
public final class TransferBench {

    private static final int TRIALS = 3;

    private TransferBench() {
    }

    private interface Op {
        void run() throws Exception;
    }

    /** Mean seconds per op over about {@code seconds}, after a warm-up of a third of that. */
    private static double time(Op op, double seconds) throws Exception {
        long warm = System.nanoTime() + (long) (seconds / 3 * 1e9);
        while (System.nanoTime() < warm) {
            op.run();
        }
        long n = 0;
        long t0 = System.nanoTime();
        long end = t0 + (long) (seconds * 1e9);
        long t;
        do {
            op.run();
            n++;
            t = System.nanoTime();
        } while (t < end);
        return (t - t0) / 1e9 / n;
    }

    /**
     * One size's figures: mean seconds per op of each path, best of the interleaved trials.
     *
     * @param bytes   bytes per op
     * @param memcpy  a direct-to-direct buffer copy
     * @param shm     an agent's write into a shared region over the {@code shm} transport, awaited
     * @param tcp     an agent's write into an off-heap region over the {@code tcp} transport, awaited
     * @param rawTcp  the bytes over a plain loopback socket and an 8-byte ack back
     */
    public record Row(int bytes, double memcpy, double shm, double tcp, double rawTcp) {
    }

    /** The sizes measured: {@code minBytes}, then times 4 up to {@code maxBytes}. */
    public static List<Integer> sizes(int minBytes, int maxBytes) {
        if (minBytes < 1 || maxBytes < minBytes) {
            throw new IllegalArgumentException("sizes need 1 <= minBytes <= maxBytes, got " + minBytes + ", " + maxBytes);
        }
        List<Integer> l = new ArrayList<>();
        for (long size = minBytes; size <= maxBytes; size *= 4) {
            l.add((int) size);
        }
        return l;
    }

    /**
     * Measures every size of {@link #sizes(int, int)} with two agents in this JVM (independent
     * instances, real sockets and files), about {@code secondsPerPoint} per path and size, and hands
     * each row to {@code each} as it is done.
     */
    public static List<Row> measure(int minBytes, int maxBytes, double secondsPerPoint, Consumer<Row> each) throws Exception {
        List<Integer> sizes = sizes(minBytes, maxBytes);
        int max = maxBytes;
        double seconds = secondsPerPoint;
        List<Row> rows = new ArrayList<>();
        Set<Permission> rw = EnumSet.of(Permission.READ, Permission.WRITE);
        try (InMemoryStore store = new InMemoryStore(Duration.ofSeconds(10));
             TransferAgent owner = TransferAgent.open(store, TransferOptions.builder("bench-owner").build());
             TransferAgent init = TransferAgent.open(store, TransferOptions.builder("bench-init").build());
             RawTcp raw = new RawTcp(max)) {
            MemoryRegion shared = owner.allocateShared(max, rw);
            MemoryRegion offHeap = owner.register(ByteBuffer.allocateDirect(max), rw);
            MemoryRegion src = init.register(ByteBuffer.allocateDirect(max), Set.of());
            ByteBuffer a = ByteBuffer.allocateDirect(max);
            ByteBuffer b = ByteBuffer.allocateDirect(max);
            for (int i = 0; i < max; i++) {
                a.put(i, (byte) i);
            }
            src.buffer().put(a.duplicate());
            RemoteDescriptor sd = shared.descriptor();
            RemoteDescriptor td = offHeap.descriptor();
            int warm = Math.min(4096, max);
            time(() -> init.write(src.slice(0, warm), sd.slice(0, warm), null).await(), 2 * seconds); // JIT warm-up
            for (int size : sizes) {
                final int n = size;
                double mem = Double.MAX_VALUE;
                double shm = Double.MAX_VALUE;
                double tcp = Double.MAX_VALUE;
                double rawTcp = Double.MAX_VALUE;
                for (int trial = 0; trial < TRIALS; trial++) { // interleaved, best of each: a shared machine's noise hits all alike
                    mem = Math.min(mem, time(() -> b.duplicate().limit(n).put(a.duplicate().limit(n)), seconds / TRIALS));
                    shm = Math.min(shm, time(() -> init.write(src.slice(0, n), sd.slice(0, n), null).await(), seconds / TRIALS));
                    tcp = Math.min(tcp, time(() -> init.write(src.slice(0, n), td.slice(0, n), null).await(), seconds / TRIALS));
                    rawTcp = Math.min(rawTcp, time(() -> raw.round(n), seconds / TRIALS));
                }
                Row r = new Row(n, mem, shm, tcp, rawTcp);
                rows.add(r);
                each.accept(r);
            }
        }
        return rows;
    }

    /** The table's header lines. */
    public static void printHeader(PrintStream out) {
        out.printf(Locale.ROOT, "# transfer bench: %s, %s, one transfer at a time (issue, await)%n",
                System.getProperty("java.vm.name") + " " + Runtime.version(), Runtime.getRuntime().availableProcessors() + " cpus");
        out.printf(Locale.ROOT, "%10s %12s %12s %8s %12s %12s %8s %12s%n", "bytes", "memcpy GB/s", "shm GB/s",
                "shm us", "shm/memcpy", "tcp GB/s", "tcp us", "raw tcp GB/s");
    }

    /** One row of the table. */
    public static void printRow(PrintStream out, Row r) {
        int n = r.bytes();
        out.printf(Locale.ROOT, "%10d %12.2f %12.2f %8.2f %11.0f%% %12.2f %8.1f %12.2f%n", n, n / r.memcpy() / 1e9,
                n / r.shm() / 1e9, r.shm() * 1e6, 100 * r.memcpy() / r.shm(), n / r.tcp() / 1e9, r.tcp() * 1e6,
                n / r.rawTcp() / 1e9);
    }

    public static void main(String[] args) throws Exception {
        int max = args.length > 0 ? Integer.parseInt(args[0]) : 64 << 20;
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 1.0;
        printHeader(System.out);
        measure(4096, max, seconds, r -> printRow(System.out, r));
    }

    /**
     * One raw socket round as these benchmarks measure it, against an echo that acknowledges each message:
     * a 4-byte length (big-endian), the first {@code n} bytes of {@code payload}, then an 8-byte ack read
     * back. {@code head} (at least 4 bytes) and {@code ack} (8 bytes) are the caller's scratch buffers.
     */
    public static void rawRound(SocketChannel c, int n, ByteBuffer payload, ByteBuffer head, ByteBuffer ack) throws IOException {
        head.clear().putInt(0, n).limit(4);
        while (head.hasRemaining()) {
            c.write(head);
        }
        ByteBuffer o = payload.duplicate().clear().limit(n);
        while (o.hasRemaining()) {
            c.write(o);
        }
        ack.clear();
        RawTcp.readFully(c, ack);
    }

    /** A plain loopback socket pair: the bytes one way, an 8-byte ack back ({@link #round}). */
    static final class RawTcp implements AutoCloseable {
        final ServerSocketChannel server;
        final SocketChannel client;
        final SocketChannel peer;
        final ByteBuffer out;
        final ByteBuffer ack = ByteBuffer.allocateDirect(8);
        final ByteBuffer head = ByteBuffer.allocateDirect(4);
        final Thread echo;

        RawTcp(int max) throws IOException {
            server = ServerSocketChannel.open().bind(new InetSocketAddress("127.0.0.1", 0));
            client = SocketChannel.open(server.getLocalAddress());
            peer = server.accept();
            for (SocketChannel c : new SocketChannel[] {client, peer}) {
                c.setOption(StandardSocketOptions.TCP_NODELAY, true);
                c.setOption(StandardSocketOptions.SO_RCVBUF, 4 << 20);
                c.setOption(StandardSocketOptions.SO_SNDBUF, 4 << 20);
            }
            out = ByteBuffer.allocateDirect(max);
            echo = new Thread(() -> {
                ByteBuffer in = ByteBuffer.allocateDirect(max + 4);
                ByteBuffer reply = ByteBuffer.allocateDirect(8);
                try {
                    while (true) {
                        in.clear().limit(4);
                        readFully(peer, in);
                        int n = in.getInt(0);
                        in.clear().limit(n);
                        readFully(peer, in);
                        reply.clear();
                        while (reply.hasRemaining()) {
                            peer.write(reply);
                        }
                    }
                } catch (IOException e) {
                    // closed
                }
            }, "raw-tcp-echo");
            echo.setDaemon(true);
            echo.start();
        }

        static void readFully(SocketChannel c, ByteBuffer b) throws IOException {
            while (b.hasRemaining()) {
                if (c.read(b) < 0) {
                    throw new IOException("closed");
                }
            }
        }

        void round(int n) throws IOException {
            rawRound(client, n, out, head, ack);
        }

        @Override
        public void close() throws IOException {
            client.close();
            peer.close();
            server.close();
        }
    }
}
