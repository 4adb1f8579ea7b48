package io.jcomm.tools.bench.rdzv;

import io.jcomm.cpu.store.internal.Numbering;
import io.jcomm.cpu.store.internal.Op;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.StandardSocketOptions;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.SelectionKey;
import java.nio.channels.Selector;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.HdrHistogram.Histogram;

/**
 * A rendezvous load generator: N simulated torch 1.13 TCPStore clients in this process, each a small
 * state machine over a preallocated buffer, driven by one or a few {@link Selector} threads (no thread
 * per client, no allocation per operation once the sockets are open).
 *
 * <p>Each client does torchrun's pattern in the torch 1.13 dialect (legacy numbering; a 1.13 client
 * sends neither VALIDATE nor PING, and has no MULTI_GET):
 * <ol>
 *   <li>connect: the store connection, then the second, silent connection a 1.13 client opens for
 *       {@code watch_key} ({@code connectionsPerClient} = 2);</li>
 *   <li>set: SET {@code /<prefix>/r/<rank>} (no reply in the protocol: the time until the bytes are
 *       handed to the kernel), pipelined with</li>
 *   <li>add: ADD {@code /<prefix>/count} 1 (round trip); the client whose ADD returns N sets
 *       {@code /<prefix>/last};</li>
 *   <li>wait: WAIT {@code /<prefix>/last} (until the last client's SET);</li>
 *   <li>get: WAIT for eight peers' keys and eight GETs in one write (what a 1.13 client's
 *       {@code get} does per key, pipelined), every value checked;</li>
 *   <li>close both connections.</li>
 * </ol>
 * Not thread safe: one {@link #run()} per instance.
 */
final class RdzvLoad {

    /** How clients arrive. */
    enum Arrival {
        /** Every client connects at once; a failed connect is a failure. */
        BURST,
        /** Client i starts at {@code i * window / N}; a failed connect is a failure. */
        STAGGER,
        /** Every client at once; a refused, reset or stalled connect is retried after a jittered, doubling delay. */
        BACKOFF
    }

    static final int CONNECT = 0;
    static final int SET = 1;
    static final int ADD = 2;
    static final int WAIT = 3;
    static final int GET = 4;
    static final List<String> OP_NAMES = List.of("connect", "set", "add", "wait", "get");

    private static final int C_SET = Numbering.TORCH_1_13.code(Op.SET);
    private static final int C_GET = Numbering.TORCH_1_13.code(Op.GET);
    private static final int C_ADD = Numbering.TORCH_1_13.code(Op.ADD);
    private static final int C_WAIT = Numbering.TORCH_1_13.code(Op.WAIT);
    private static final int RANK_DIGITS = 7;
    private static final long MAX_MICROS = TimeUnit.MINUTES.toMicros(30);
    private static final long BACKOFF_BASE_NANOS = TimeUnit.MILLISECONDS.toNanos(10);
    private static final long BACKOFF_MAX_NANOS = TimeUnit.SECONDS.toNanos(1);
    /** A connect under BACKOFF that has not completed by then is abandoned and retried. */
    private static final long BACKOFF_CONNECT_STALL_NANOS = TimeUnit.SECONDS.toNanos(2);
    private static final int MAX_FAILURE_MESSAGES = 5;

    /**
     * What to run.
     *
     * @param server               the store server
     * @param clients              simulated clients (1 to 1,000,000)
     * @param arrival              how they arrive
     * @param connectionsPerClient 1, or 2 as a torch 1.13 client
     * @param peers                keys each client reads at the end (at most clients - 1, at most 64)
     * @param sources              local addresses to bind, round-robin (empty: the kernel picks)
     * @param threads              selector threads (1 to 8)
     * @param timeout              deadline of the whole run; a client not done by then is a failure
     * @param window               the STAGGER arrival window
     * @param prefix               key prefix (ASCII letters, digits, '-', '_'; 1 to 32 characters)
     * @param valueBytes           bytes of each client's value (16 to 1024)
     */
    record Config(InetSocketAddress server, int clients, Arrival arrival, int connectionsPerClient, int peers,
                  List<InetAddress> sources, int threads, Duration timeout, Duration window, String prefix,
                  int valueBytes) {
        Config {
            Objects.requireNonNull(server, "server");
            Objects.requireNonNull(arrival, "arrival");
            sources = List.copyOf(sources);
            Objects.requireNonNull(timeout, "timeout");
            Objects.requireNonNull(window, "window");
            if (clients < 1 || clients > 1_000_000) {
                throw new IllegalArgumentException("clients must be 1..1000000: " + clients);
            }
            if (connectionsPerClient < 1 || connectionsPerClient > 2) {
                throw new IllegalArgumentException("connectionsPerClient must be 1 or 2: " + connectionsPerClient);
            }
            if (peers < 0 || peers > 64) {
                throw new IllegalArgumentException("peers must be 0..64: " + peers);
            }
            if (threads < 1 || threads > 8) {
                throw new IllegalArgumentException("threads must be 1..8: " + threads);
            }
            if (timeout.isNegative() || timeout.isZero() || window.isNegative()) {
                throw new IllegalArgumentException("timeout must be positive and window not negative");
            }
            if (!prefix.matches("[A-Za-z0-9_-]{1,32}")) {
                throw new IllegalArgumentException("prefix must be 1..32 of [A-Za-z0-9_-]: " + prefix);
            }
            if (valueBytes < 16 || valueBytes > 1024) {
                throw new IllegalArgumentException("valueBytes must be 16..1024: " + valueBytes);
            }
        }

        int effectivePeers() {
            return Math.min(peers, clients - 1);
        }
    }

    /**
     * What a run measured. Percentiles in microseconds, indexed by {@link #CONNECT} .. {@link #GET}.
     *
     * @param totalNanos      first connect to the last client done
     * @param acceptsPerSecond connections established per second, first connect to last established
     * @param fanoutNanos     the last client's SET of the release key to the last waiter woken (-1: none)
     * @param failures        clients that did not finish every step with the right values
     * @param failureMessages the first few failures, for the log
     */
    record Result(int clients, int connections, long totalNanos, double acceptsPerSecond, long[] p50Micros,
                  long[] p99Micros, long[] maxMicros, long fanoutNanos, int completed, int failures,
                  List<String> failureMessages) {
    }

    // client states
    private static final int S_IDLE = 0;
    private static final int S_CONNECT_MAIN = 1;
    private static final int S_CONNECT_CB = 2;
    private static final int S_FLUSH = 3;
    private static final int S_AWAIT_ADD = 4;
    private static final int S_AWAIT_WAIT = 5;
    private static final int S_AWAIT_GET = 6;
    private static final int S_DONE = 7;
    private static final int S_FAILED = 8;

    private final Config cfg;
    private final byte[] prefixBytes;
    private final byte[] countKey;
    private final byte[] lastKey;
    private final int rankKeyLength;
    private final int peers;
    private final int getReplyBytes;
    private final AtomicLong lastSetAt = new AtomicLong(-1);
    private final AtomicLong firstConnectAt = new AtomicLong(Long.MAX_VALUE);

    RdzvLoad(Config cfg) {
        this.cfg = cfg;
        this.prefixBytes = ("/" + cfg.prefix()).getBytes(StandardCharsets.US_ASCII);
        this.countKey = ("/" + cfg.prefix() + "/count").getBytes(StandardCharsets.US_ASCII);
        this.lastKey = ("/" + cfg.prefix() + "/last").getBytes(StandardCharsets.US_ASCII);
        this.rankKeyLength = prefixBytes.length + 3 + RANK_DIGITS;
        this.peers = cfg.effectivePeers();
        this.getReplyBytes = 1 + peers * (8 + cfg.valueBytes());
    }

    /** Runs every client to the end (done or failed) or to the deadline; never longer than the timeout plus 1 s. */
    Result run() throws IOException, InterruptedException {
        int t = Math.min(cfg.threads(), cfg.clients());
        List<Worker> workers = new ArrayList<>(t);
        long start = System.nanoTime();
        for (int i = 0; i < t; i++) {
            workers.add(new Worker(i, t, start));
        }
        List<Thread> threads = new ArrayList<>(t);
        for (Worker w : workers) {
            Thread th = new Thread(w, "rdzv-load-" + w.index);
            th.setDaemon(true);
            threads.add(th);
            th.start();
        }
        long joinDeadline = start + cfg.timeout().toNanos() + TimeUnit.SECONDS.toNanos(5);
        for (Thread th : threads) {
            long left = joinDeadline - System.nanoTime();
            if (left > 0) {
                TimeUnit.NANOSECONDS.timedJoin(th, left);
            }
        }
        long end = start;
        long lastWake = -1;
        long lastEstablished = -1;
        int completed = 0;
        int failures = 0;
        int connections = 0;
        List<String> messages = new ArrayList<>();
        Histogram[] merged = new Histogram[OP_NAMES.size()];
        for (int op = 0; op < merged.length; op++) {
            merged[op] = new Histogram(MAX_MICROS, 3);
        }
        for (Worker w : workers) {
            if (w.error != null) {
                throw new IOException("load thread " + w.index + " failed: " + w.error, w.error);
            }
            if (!w.finished) {
                throw new IOException("load thread " + w.index + " did not stop by its deadline");
            }
            end = Math.max(end, w.lastDone);
            lastWake = Math.max(lastWake, w.lastWake);
            lastEstablished = Math.max(lastEstablished, w.lastEstablished);
            completed += w.completed;
            failures += w.failed;
            connections += w.connections;
            for (int op = 0; op < merged.length; op++) {
                merged[op].add(w.hist[op]);
            }
            for (String m : w.messages) {
                if (messages.size() < MAX_FAILURE_MESSAGES) {
                    messages.add(m);
                }
            }
        }
        long[] p50 = new long[merged.length];
        long[] p99 = new long[merged.length];
        long[] max = new long[merged.length];
        for (int op = 0; op < merged.length; op++) {
            p50[op] = merged[op].getTotalCount() == 0 ? -1 : merged[op].getValueAtPercentile(50);
            p99[op] = merged[op].getTotalCount() == 0 ? -1 : merged[op].getValueAtPercentile(99);
            max[op] = merged[op].getTotalCount() == 0 ? -1 : merged[op].getMaxValue();
        }
        long first = firstConnectAt.get();
        double acceptsPerSecond = lastEstablished > first && connections > 0
                ? connections / ((lastEstablished - first) / 1e9) : 0;
        long set = lastSetAt.get();
        long fanout = set > 0 && lastWake >= set ? lastWake - set : -1;
        return new Result(cfg.clients(), connections, end - start, acceptsPerSecond, p50, p99, max, fanout,
                completed, failures, List.copyOf(messages));
    }

    /** One simulated client. */
    private static final class Client {
        final int rank;
        final ByteBuffer out;
        final ByteBuffer in;
        SocketChannel main;
        SocketChannel cb;
        SelectionKey mainKey;
        int state = S_IDLE;
        int next;
        int attempt;
        long startAt;
        long connectStart;
        long attemptStart;
        long opStart;
        boolean last;

        Client(int rank, ByteBuffer out, ByteBuffer in) {
            this.rank = rank;
            this.out = out;
            this.in = in;
        }
    }

    /** One selector thread and the clients it owns (rank = index + k * threads). */
    private final class Worker implements Runnable {
        final int index;
        final Client[] clients;
        final Histogram[] hist = new Histogram[OP_NAMES.size()];
        final List<String> messages = new ArrayList<>();
        final long start;
        final long deadline;
        final SplittableRandom random;
        final Consumer<SelectionKey> onReady = this::ready;
        Selector selector;
        int nextToStart;
        int active;
        int completed;
        int failed;
        int connections;
        long lastDone;
        long lastWake = -1;
        long lastEstablished = -1;
        volatile boolean finished;
        volatile Throwable error;

        Worker(int index, int threads, long start) {
            this.index = index;
            this.start = start;
            this.deadline = start + cfg.timeout().toNanos();
            this.random = new SplittableRandom(index * 7919L + cfg.clients());
            int n = (cfg.clients() - index + threads - 1) / threads;
            this.clients = new Client[n];
            int outBytes = Math.max(Math.max(
                    // SET + ADD
                    (1 + 8 + rankKeyLength + 8 + cfg.valueBytes()) + (1 + 8 + countKey.length + 8),
                    // SET last + WAIT last
                    (1 + 8 + lastKey.length + 8 + 1) + (1 + 8 + 8 + lastKey.length)),
                    // WAIT peers + GET each
                    (1 + 8 + peers * (8 + rankKeyLength)) + peers * (1 + 8 + rankKeyLength));
            int inBytes = Math.max(8, getReplyBytes);
            ByteBuffer slab = ByteBuffer.allocateDirect(n * (outBytes + inBytes));
            long stagger = cfg.arrival() == Arrival.STAGGER ? cfg.window().toNanos() : 0;
            for (int i = 0; i < n; i++) {
                int rank = index + i * threads;
                int off = i * (outBytes + inBytes);
                Client c = new Client(rank, slab.slice(off, outBytes).order(ByteOrder.LITTLE_ENDIAN),
                        slab.slice(off + outBytes, inBytes).order(ByteOrder.LITTLE_ENDIAN));
                c.startAt = start + stagger * rank / cfg.clients();
                clients[i] = c;
            }
            for (int op = 0; op < hist.length; op++) {
                hist[op] = new Histogram(MAX_MICROS, 3);
            }
        }

        @Override
        public void run() {
            try (Selector s = Selector.open()) {
                selector = s;
                active = clients.length;
                long lastSweep = System.nanoTime();
                while (active > 0) {
                    long now = System.nanoTime();
                    startDue(now);
                    if (now - lastSweep >= TimeUnit.MILLISECONDS.toNanos(20) || now >= deadline) {
                        sweep(now);
                        lastSweep = now;
                    }
                    if (active == 0) {
                        break;
                    }
                    long wait = 10;
                    if (nextToStart < clients.length) {
                        wait = Math.max(1, Math.min(wait, (clients[nextToStart].startAt - now) / 1_000_000));
                    }
                    s.select(onReady, wait);
                }
                for (Client c : clients) {
                    closeQuietly(c);
                }
            } catch (Throwable e) {
                error = e;
                for (Client c : clients) {
                    closeQuietly(c);
                }
            } finally {
                finished = true;
            }
        }

        /** Starts the clients whose arrival time has come (clients are in arrival order). */
        private void startDue(long now) {
            while (nextToStart < clients.length && clients[nextToStart].startAt <= now) {
                Client c = clients[nextToStart++];
                c.connectStart = now;
                firstConnectAt.accumulateAndGet(now, Math::min);
                connectMain(c, now);
            }
        }

        /** Deadlines, BACKOFF retries and stalled connects; a scan over this thread's clients every 20 ms. */
        private void sweep(long now) {
            for (Client c : clients) {
                if (c.state == S_DONE || c.state == S_FAILED) {
                    continue;
                }
                if (now >= deadline) {
                    fail(c, "timeout", null);
                } else if (c.state == S_IDLE && c.attempt > 0 && c.startAt <= now) {
                    connectMain(c, now);
                } else if (cfg.arrival() == Arrival.BACKOFF && (c.state == S_CONNECT_MAIN || c.state == S_CONNECT_CB)
                        && now - c.attemptStart > BACKOFF_CONNECT_STALL_NANOS) {
                    retryOrFail(c, now, "connect stalled for " + TimeUnit.NANOSECONDS.toMillis(now - c.attemptStart)
                            + " ms");
                }
            }
        }

        private SocketChannel open(Client c, int which) throws IOException {
            SocketChannel ch = SocketChannel.open();
            ch.configureBlocking(false);
            ch.setOption(StandardSocketOptions.TCP_NODELAY, true);
            List<InetAddress> src = cfg.sources();
            if (!src.isEmpty()) {
                ch.bind(new InetSocketAddress(src.get((c.rank * cfg.connectionsPerClient() + which) % src.size()), 0));
            }
            return ch;
        }

        private void connectMain(Client c, long now) {
            c.attemptStart = now;
            c.state = S_CONNECT_MAIN;
            try {
                c.main = open(c, 0);
                if (c.main.connect(cfg.server())) {
                    c.mainKey = c.main.register(selector, 0, c);
                    mainConnected(c, System.nanoTime());
                } else {
                    c.mainKey = c.main.register(selector, SelectionKey.OP_CONNECT, c);
                }
            } catch (IOException e) {
                retryOrFail(c, now, "connect: " + e);
            }
        }

        private void mainConnected(Client c, long now) throws IOException {
            connections++;
            lastEstablished = Math.max(lastEstablished, now);
            if (cfg.connectionsPerClient() == 2) {
                c.state = S_CONNECT_CB;
                c.mainKey.interestOps(0);
                c.cb = open(c, 1);
                if (c.cb.connect(cfg.server())) {
                    c.cb.register(selector, 0, c);
                    connected(c, System.nanoTime());
                } else {
                    c.cb.register(selector, SelectionKey.OP_CONNECT, c);
                }
            } else {
                connected(c, now);
            }
        }

        private void connected(Client c, long now) throws IOException {
            if (c.cb != null) {
                connections++;
                lastEstablished = Math.max(lastEstablished, now);
            }
            record(CONNECT, now - c.connectStart);
            // SET /<prefix>/r/<rank> value, then ADD /<prefix>/count 1
            ByteBuffer o = c.out;
            o.clear();
            o.put((byte) C_SET);
            putRankKey(o, c.rank);
            o.putLong(cfg.valueBytes());
            putValue(o, c.rank);
            o.put((byte) C_ADD);
            o.putLong(countKey.length).put(countKey);
            o.putLong(1);
            o.flip();
            c.opStart = now;
            startWrite(c, S_AWAIT_ADD);
        }

        private void startWrite(Client c, int next) throws IOException {
            c.next = next;
            c.main.write(c.out);
            if (c.out.hasRemaining()) {
                c.state = S_FLUSH;
                c.mainKey.interestOps(SelectionKey.OP_WRITE);
            } else {
                flushed(c, System.nanoTime());
            }
        }

        private void flushed(Client c, long now) {
            if (c.next == S_AWAIT_ADD) {
                record(SET, now - c.opStart);
            } else if (c.next == S_AWAIT_WAIT && c.last) {
                lastSetAt.set(now);
            }
            c.state = c.next;
            c.in.clear();
            c.mainKey.interestOps(SelectionKey.OP_READ);
        }

        private void ready(SelectionKey k) {
            Client c = (Client) k.attachment();
            long now = System.nanoTime();
            try {
                if (!k.isValid()) {
                    return;
                }
                switch (c.state) {
                    case S_CONNECT_MAIN -> {
                        if (c.main.finishConnect()) {
                            mainConnected(c, now);
                        }
                    }
                    case S_CONNECT_CB -> {
                        if (k.channel() == c.cb && c.cb.finishConnect()) {
                            k.interestOps(0);
                            connected(c, now);
                        }
                    }
                    case S_FLUSH -> {
                        c.main.write(c.out);
                        if (!c.out.hasRemaining()) {
                            flushed(c, now);
                        }
                    }
                    case S_AWAIT_ADD, S_AWAIT_WAIT, S_AWAIT_GET -> readReply(c, now);
                    default -> k.interestOps(0);
                }
            } catch (IOException e) {
                if (c.state == S_CONNECT_MAIN || c.state == S_CONNECT_CB) {
                    retryOrFail(c, now, "connect: " + e);
                } else {
                    fail(c, "io in state " + c.state, e);
                }
            }
        }

        private void readReply(Client c, long now) throws IOException {
            ByteBuffer in = c.in;
            int n = c.main.read(in);
            if (n < 0) {
                fail(c, "the server closed the connection in state " + c.state, null);
                return;
            }
            switch (c.state) {
                case S_AWAIT_ADD -> {
                    if (in.position() < 8) {
                        return;
                    }
                    record(ADD, now - c.opStart);
                    long v = in.getLong(0);
                    if (v < 1 || v > cfg.clients()) {
                        fail(c, "ADD returned " + v + " (expected 1.." + cfg.clients() + ")", null);
                        return;
                    }
                    c.last = v == cfg.clients();
                    ByteBuffer o = c.out;
                    o.clear();
                    if (c.last) {
                        o.put((byte) C_SET);
                        o.putLong(lastKey.length).put(lastKey);
                        o.putLong(1).put((byte) 'g');
                    }
                    o.put((byte) C_WAIT);
                    o.putLong(1);
                    o.putLong(lastKey.length).put(lastKey);
                    o.flip();
                    c.opStart = now;
                    startWrite(c, S_AWAIT_WAIT);
                }
                case S_AWAIT_WAIT -> {
                    if (in.position() < 1) {
                        return;
                    }
                    lastWake = Math.max(lastWake, now);
                    record(WAIT, now - c.opStart);
                    if (in.get(0) != 0 || in.position() != 1) {
                        fail(c, "WAIT reply " + in.get(0) + " (" + in.position() + " bytes)", null);
                        return;
                    }
                    ByteBuffer o = c.out;
                    o.clear();
                    o.put((byte) C_WAIT);
                    o.putLong(peers);
                    for (int j = 1; j <= peers; j++) {
                        putRankKey(o, peer(c.rank, j));
                    }
                    for (int j = 1; j <= peers; j++) {
                        o.put((byte) C_GET);
                        putRankKey(o, peer(c.rank, j));
                    }
                    o.flip();
                    c.opStart = now;
                    if (peers == 0) {
                        done(c, now);
                        return;
                    }
                    startWrite(c, S_AWAIT_GET);
                }
                case S_AWAIT_GET -> {
                    if (in.position() < getReplyBytes) {
                        return;
                    }
                    record(GET, now - c.opStart);
                    if (in.position() != getReplyBytes || in.get(0) != 0) {
                        fail(c, "multi-get reply of " + in.position() + " bytes (expected " + getReplyBytes + ")", null);
                        return;
                    }
                    int p = 1;
                    for (int j = 1; j <= peers; j++) {
                        long len = in.getLong(p);
                        p += 8;
                        if (len != cfg.valueBytes() || !valueMatches(in, p, peer(c.rank, j))) {
                            fail(c, "wrong value for rank " + peer(c.rank, j), null);
                            return;
                        }
                        p += cfg.valueBytes();
                    }
                    done(c, now);
                }
                default -> throw new IllegalStateException("state " + c.state);
            }
        }

        private int peer(int rank, int j) {
            return (rank + j) % cfg.clients();
        }

        private void done(Client c, long now) {
            closeQuietly(c);
            c.state = S_DONE;
            completed++;
            active--;
            lastDone = Math.max(lastDone, now);
        }

        private void retryOrFail(Client c, long now, String why) {
            closeQuietly(c);
            if (cfg.arrival() == Arrival.BACKOFF && now < deadline) {
                long delay = Math.min(BACKOFF_MAX_NANOS, BACKOFF_BASE_NANOS << Math.min(c.attempt, 20));
                c.attempt++;
                c.state = S_IDLE;
                c.startAt = now + delay / 2 + random.nextLong(delay);
                return;
            }
            fail(c, why, null);
        }

        private void fail(Client c, String why, Throwable cause) {
            if (c.state == S_DONE || c.state == S_FAILED) {
                return;
            }
            closeQuietly(c);
            c.state = S_FAILED;
            failed++;
            active--;
            lastDone = Math.max(lastDone, System.nanoTime());
            if (messages.size() < MAX_FAILURE_MESSAGES) {
                messages.add("client " + c.rank + ": " + why + (cause == null ? "" : ": " + cause));
            }
        }

        private void record(int op, long nanos) {
            hist[op].recordValue(Math.min(MAX_MICROS, Math.max(0, nanos / 1000)));
        }
    }

    private void putRankKey(ByteBuffer o, int rank) {
        o.putLong(rankKeyLength);
        o.put(prefixBytes).put((byte) '/').put((byte) 'r').put((byte) '/');
        putDigits(o, rank, RANK_DIGITS);
    }

    /** The value of {@code rank}: {@code v<10 digits>} then {@code x} up to valueBytes. */
    private void putValue(ByteBuffer o, int rank) {
        o.put((byte) 'v');
        putDigits(o, rank, 10);
        for (int i = 11; i < cfg.valueBytes(); i++) {
            o.put((byte) 'x');
        }
    }

    private boolean valueMatches(ByteBuffer in, int at, int rank) {
        if (in.get(at) != 'v') {
            return false;
        }
        int r = rank;
        for (int i = 10; i >= 1; i--) {
            if (in.get(at + i) != '0' + r % 10) {
                return false;
            }
            r /= 10;
        }
        for (int i = 11; i < cfg.valueBytes(); i++) {
            if (in.get(at + i) != 'x') {
                return false;
            }
        }
        return true;
    }

    private static void putDigits(ByteBuffer o, int v, int digits) {
        int p = o.position();
        int r = v;
        for (int i = digits - 1; i >= 0; i--) {
            o.put(p + i, (byte) ('0' + r % 10));
            r /= 10;
        }
        o.position(p + digits);
    }

    private static void closeQuietly(Client c) {
        try {
            if (c.main != null) {
                c.main.close();
            }
        } catch (IOException e) {
            // closing: nothing to do
        }
        try {
            if (c.cb != null) {
                c.cb.close();
            }
        } catch (IOException e) {
            // closing: nothing to do
        }
        c.main = null;
        c.cb = null;
        c.mainKey = null;
    }
}
