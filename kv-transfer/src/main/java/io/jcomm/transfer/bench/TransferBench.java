package io.jcomm.transfer.bench;

import io.jcomm.api.store.InMemoryStore;
import io.jcomm.transfer.MemoryRegion;
import io.jcomm.transfer.Permission;
import io.jcomm.transfer.RemoteDescriptor;
import io.jcomm.transfer.TransferAgent;
import io.jcomm.transfer.TransferOptions;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.time.Duration;
import java.util.EnumSet;
import java.util.Locale;
import java.util.Set;

/**
 * Same-host figures of the transfer engine: for each size, one-at-a-time writes (issue, await; best of three interleaved trials) from
 * an initiator agent into an owner agent's region over {@code shm} (a shared region) and over
 * {@code tcp} (an off-heap region), beside a {@code memcpy} of the same size (direct buffer to
 * direct buffer) and a raw tcp loopback round (the bytes one way, an 8-byte ack back) measured in
 * the same run. Both agents live in this JVM (independent instances, real sockets and files).
 *
 * <p>Usage: {@code TransferBench [maxBytes (default 64 MiB)] [seconds per point (default 1)]}.
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

    public static void main(String[] args) throws Exception {
        int max = args.length > 0 ? Integer.parseInt(args[0]) : 64 << 20;
        double seconds = args.length > 1 ? Double.parseDouble(args[1]) : 1.0;
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
            System.out.printf(Locale.ROOT, "# transfer bench: %s, %s, one transfer at a time (issue, await)%n",
                    System.getProperty("java.vm.name") + " " + Runtime.version(), Runtime.getRuntime().availableProcessors() + " cpus");
            System.out.printf(Locale.ROOT, "%10s %12s %12s %8s %12s %12s %8s %12s%n", "bytes", "memcpy GB/s", "shm GB/s",
                    "shm us", "shm/memcpy", "tcp GB/s", "tcp us", "raw tcp GB/s");
            time(() -> init.write(src.slice(0, 4096), sd.slice(0, 4096), null).await(), 2 * seconds); // JIT warm-up
            for (int size = 4096; size <= max; size *= 4) {
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
                System.out.printf(Locale.ROOT, "%10d %12.2f %12.2f %8.2f %11.0f%% %12.2f %8.1f %12.2f%n", n, n / mem / 1e9,
                        n / shm / 1e9, shm * 1e6, 100 * mem / shm, n / tcp / 1e9, tcp * 1e6, n / rawTcp / 1e9);
            }
        }
    }

    /** A loopback socket pair: {@link #round} sends n bytes, the echo thread reads them and answers 8 bytes. */
    private static final class RawTcp implements AutoCloseable {
        final ServerSocketChannel server;
        final SocketChannel client;
        final SocketChannel peer;
        final ByteBuffer out;
        final ByteBuffer ack = ByteBuffer.allocateDirect(8);
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
            ByteBuffer h = ByteBuffer.allocate(4).putInt(0, n);
            while (h.hasRemaining()) {
                client.write(h);
            }
            ByteBuffer o = out.duplicate().clear().limit(n);
            while (o.hasRemaining()) {
                client.write(o);
            }
            ack.clear();
            readFully(client, ack);
        }

        @Override
        public void close() throws IOException {
            client.close();
            peer.close();
            server.close();
        }
    }
}
