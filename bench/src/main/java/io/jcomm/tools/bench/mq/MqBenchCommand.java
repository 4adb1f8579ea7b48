package io.jcomm.tools.bench.mq;

import io.aeron.ExclusivePublication;
import io.aeron.Image;
import io.aeron.Subscription;
import io.jcomm.api.Deadline;
import io.jcomm.mq.AeronMedia;
import io.jcomm.mq.IdleConfig;
import io.jcomm.mq.MessageQueueOptions;
import io.jcomm.mq.QueueWriter;
import io.jcomm.tools.bench.WorkerJvms;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;
import org.agrona.concurrent.IdleStrategy;
import org.agrona.concurrent.UnsafeBuffer;
import picocli.CommandLine;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code commbench mq}: latency of the shared-memory message queue (1 writer, N reader processes),
 * in the style of nccl-tests. For each message size the writer enqueues a message stamped with
 * {@code System.nanoTime()}, then waits until every reader consumed it; readers record the one-way
 * latency (stamp to receipt, same host clock), the writer the round trip (enqueue to all readers
 * done). Then, in the same run: the raw Aeron IPC ping-pong between the writer and reader 1 as the
 * floor, and the idle CPU of every process (readers blocked in {@code dequeue}, writer idle).
 *
 * <p>The command is the writer; it starts the readers as child JVMs with the same class path and
 * JVM flags. {@code --remote} makes them remote readers over UDP on loopback (each with its own
 * media driver, as on another host). It uses {@link QueueWriter}/{@code QueueReader} opened from an
 * explicit handle (a file), i.e. the data path of {@code MessageQueue} without the CPU group.
 *
 * <p>Registered as {@code commbench mq} by {@code CommBench.commandLine()}.
 */
@Command(name = "mq", mixinStandardHelpOptions = true,
        description = "Latency of the one-writer, many-reader message queue (Aeron IPC / UDP) and idle CPU.")
public final class MqBenchCommand implements Callable<Integer> {

    static final int STAMP_OFFSET = 0;
    static final int PHASE_OFFSET = 8;
    static final int ARG_OFFSET = 12;
    static final int HEADER = 24;
    static final int PHASE_WARMUP = 0;
    static final int PHASE_MEASURE = 1;
    static final int PHASE_END_OF_SIZE = 2;
    static final int PHASE_FLOOR = 3;

    @Option(names = "--readers", description = "number of reader processes (default ${DEFAULT-VALUE})")
    int readers = 1;

    @Option(names = "--remote", description = "readers are remote: UDP on loopback, own media driver each")
    boolean remote;

    @Option(names = {"-b", "--minbytes"}, description = "smallest size (K/M suffixes); with -e and -f instead of --sizes")
    String minBytes;

    @Option(names = {"-e", "--maxbytes"}, description = "largest size")
    String maxBytes;

    @Option(names = {"-f", "--stepfactor"}, description = "size multiplier between -b and -e (default ${DEFAULT-VALUE})")
    int factor = 2;

    @Option(names = "--sizes", split = ",", description = "sizes to measure (default ${DEFAULT-VALUE})")
    List<String> sizes = List.of("100", "4K", "1M");

    @Option(names = {"-n", "--iters"}, description = "measured messages per size (default ${DEFAULT-VALUE}; fewer for big sizes)")
    int iterations = 20_000;

    @Option(names = {"-w", "--warmup"}, description = "warm-up messages per size (default ${DEFAULT-VALUE})")
    int warmup = 20_000;

    @Option(names = "--idle", description = "readers' idle strategy: auto, spin, yield, backoff, yieldpark or "
            + "spinUs,yieldUs,minParkUs,maxParkUs (default ${DEFAULT-VALUE}: backoff if every process has a core, else yieldpark)")
    String readerIdle = "auto";

    @Option(names = "--writer-idle", description = "writer's idle strategy while waiting for acknowledgements (default ${DEFAULT-VALUE})")
    String writerIdle = "auto";

    @Option(names = "--idle-seconds", description = "length of the idle-CPU window (default ${DEFAULT-VALUE})")
    double idleSeconds = 3;

    @Option(names = "--floor-iters", description = "raw Aeron IPC ping-pong round trips (0 = skip; default ${DEFAULT-VALUE})")
    int floorIterations = 50_000;

    @Option(names = "--floor-idle", description = "idle strategy of both ends of the floor ping-pong: auto (spin if the "
            + "writer and readers each have a core, else yield), spin or yield (default ${DEFAULT-VALUE})")
    String floorIdle = "auto";

    @Option(names = "--floor-seconds", description = "time cap of the floor measurement (default ${DEFAULT-VALUE})")
    double floorSeconds = 20;

    @Option(names = "--gap-us", description = "pause between messages, so that waiting readers reach their park "
            + "phase (latency after idle periods; default ${DEFAULT-VALUE})")
    long gapMicros = 0;

    @Option(names = "--no-wakeups", description = "idle local readers park in a loop instead of sleeping until woken")
    boolean noWakeups;

    @Option(names = "--ipc-term", description = "IPC term length (default ${DEFAULT-VALUE})")
    String ipcTerm = "4M";

    @Option(names = "--udp-address", description = "address for UDP endpoints (default ${DEFAULT-VALUE})")
    String udpAddress = "127.0.0.1";

    private final PrintStream out = System.out;

    /** Standalone entry point ({@code bin/_launch io.jcomm.tools.bench.mq.MqBenchCommand ...}). */
    public static void main(String[] args) {
        if (System.getProperty("org.slf4j.simpleLogger.defaultLogLevel") == null) {
            System.setProperty("org.slf4j.simpleLogger.defaultLogLevel", "warn");
        }
        System.exit(new CommandLine(new MqBenchCommand()).execute(args));
    }

    static int parseSize(String s) {
        String t = s.trim().toUpperCase(Locale.ROOT);
        if (t.endsWith("B")) {
            t = t.substring(0, t.length() - 1);
        }
        long mult = 1;
        if (t.endsWith("K")) {
            mult = 1024;
            t = t.substring(0, t.length() - 1);
        } else if (t.endsWith("M")) {
            mult = 1024 * 1024;
            t = t.substring(0, t.length() - 1);
        } else if (t.endsWith("G")) {
            mult = 1024L * 1024 * 1024;
            t = t.substring(0, t.length() - 1);
        }
        long v = Long.parseLong(t) * mult;
        if (v < 0 || v > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("size out of range: " + s);
        }
        return (int) v;
    }

    List<Integer> sizeList() {
        List<Integer> out = new ArrayList<>();
        if (minBytes != null || maxBytes != null) {
            int b = parseSize(minBytes == null ? "100" : minBytes);
            int e = parseSize(maxBytes == null ? minBytes : maxBytes);
            for (long s = b; s <= e; s *= Math.max(2, factor)) {
                out.add((int) s);
            }
        } else {
            for (String s : sizes) {
                out.add(parseSize(s));
            }
        }
        for (int i = 0; i < out.size(); i++) {
            out.set(i, Math.max(HEADER, out.get(i)));
        }
        return out;
    }

    /** A started reader JVM and the lines it printed. */
    private static final class Child {
        final int rank;
        final Process process;
        final BlockingQueue<String> lines = new LinkedBlockingQueue<>();

        Child(int rank, Process process) {
            this.rank = rank;
            this.process = process;
            Thread t = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                    String l;
                    while ((l = r.readLine()) != null) {
                        if (l.startsWith("HIST ") || l.startsWith("READY") || l.startsWith("FLOOR") || l.startsWith("BYE")) {
                            lines.add(l);
                        } else {
                            System.err.println("[reader " + rank + "] " + l);
                        }
                    }
                } catch (IOException ignored) {
                    // child gone
                }
                lines.add("EOF");
            }, "reader-" + rank + "-out");
            t.setDaemon(true);
            t.start();
        }

        String await(String prefix, Duration timeout) throws InterruptedException {
            long end = System.nanoTime() + timeout.toNanos();
            while (true) {
                String l = lines.poll(Math.max(1, end - System.nanoTime()), TimeUnit.NANOSECONDS);
                if (l == null) {
                    throw new IllegalStateException("reader " + rank + " did not print '" + prefix + "' in time");
                }
                if (l.equals("EOF")) {
                    throw new IllegalStateException("reader " + rank + " exited (" + (process.isAlive() ? "?" : process.exitValue())
                            + ") before printing '" + prefix + "'");
                }
                if (l.startsWith(prefix)) {
                    return l;
                }
            }
        }
    }

    /** {@code auto}: spin first only if every process of the benchmark (writer + readers) has a core. */
    private String resolveIdle(String s) {
        if (!s.equals("auto")) {
            return s;
        }
        return readers + 1 <= Runtime.getRuntime().availableProcessors() ? "backoff" : "yieldpark";
    }

    @Override
    public Integer call() throws Exception {
        if (readers < 1) {
            throw new CommandLine.ParameterException(new CommandLine(this), "--readers must be >= 1");
        }
        readerIdle = resolveIdle(readerIdle);
        writerIdle = resolveIdle(writerIdle);
        if (floorIdle.equals("auto")) {
            floorIdle = readers + 1 <= Runtime.getRuntime().availableProcessors() ? "spin" : "yield";
        }
        List<Integer> sizeList = sizeList();
        String tag = "bench" + ProcessHandle.current().pid();
        IdleConfig wIdle = IdleConfig.parse(writerIdle);
        int maxSize = sizeList.stream().mapToInt(Integer::intValue).max().orElse(HEADER);
        MessageQueueOptions opts = MessageQueueOptions.builder().idle(wIdle).udpAddress(udpAddress)
                .ipcTermLength(parseSize(ipcTerm)).maxMessageBytes(Math.max(maxSize, 1024)).build();
        Path tmp = Files.createTempDirectory("jcomm-mqbench", PosixFilePermissions.asFileAttribute(
                PosixFilePermissions.fromString("rwx------")));
        List<Child> children = new ArrayList<>();
        Thread killer = new Thread(() -> children.forEach(c -> c.process.destroyForcibly()));
        Runtime.getRuntime().addShutdownHook(killer);
        try (AeronMedia media = AeronMedia.launch(AeronMedia.Options.builder().tag(tag)
                .ownerLinger(Duration.ofSeconds(3)).build())) {
            List<Integer> ranks = new ArrayList<>();
            for (int r = 1; r <= readers; r++) {
                ranks.add(r);
            }
            try (QueueWriter w = QueueWriter.create(media, "bench", 0, remote ? List.of() : ranks, remote ? ranks : List.of(),
                    0, opts)) {
                Path handleFile = tmp.resolve("handle");
                Files.write(handleFile, w.handle().encode());
                for (int r : ranks) {
                    children.add(startReader(r, handleFile, media.directory(), tag));
                }
                for (Child c : children) {
                    c.await("READY", Duration.ofSeconds(90));
                }
                w.awaitReaders(Deadline.after(Duration.ofSeconds(60)));
                printHeader(sizeList, wIdle);
                UnsafeBuffer msg = new UnsafeBuffer(ByteBuffer.allocateDirect(maxSize));
                for (int size : sizeList) {
                    measureSize(w, msg, size, children);
                }
                if (floorIterations > 0) {
                    floor(media, w, msg, children.get(0));
                }
                idleCpu(children);
            }
            for (Child c : children) {
                c.process.waitFor(20, TimeUnit.SECONDS);
            }
        } finally {
            children.forEach(c -> c.process.destroyForcibly());
            try {
                Runtime.getRuntime().removeShutdownHook(killer);
            } catch (IllegalStateException ignored) {
                // shutting down
            }
            Files.deleteIfExists(tmp.resolve("handle"));
            Files.deleteIfExists(tmp);
        }
        return 0;
    }

    private Child startReader(int rank, Path handleFile, Path aeronDir, String tag) throws IOException {
        List<String> cmd = WorkerJvms.javaCommand(List.of("-XX:+UseSerialGC", "-Xmx1g"), MqBenchReader.class);
        cmd.addAll(List.of(handleFile.toString(), Integer.toString(rank), remote ? "1" : "0",
                readerIdle, aeronDir.toString(), tag, udpAddress, noWakeups ? "0" : "1"));
        ProcessBuilder pb = new ProcessBuilder(cmd);
        pb.redirectErrorStream(true);
        return new Child(rank, pb.start());
    }

    private void printHeader(List<Integer> sizeList, IdleConfig wIdle) {
        out.printf(Locale.ROOT, "# jcomm mq: 1 writer -> %d %s reader%s (%s), reader idle=%s, writer idle=%s, ipc term=%s%s%n",
                readers, remote ? "remote" : "local", readers == 1 ? "" : "s",
                remote ? "Aeron UDP loopback + HMAC-SHA256" : "Aeron IPC", readerIdle, writerIdle, ipcTerm,
                gapMicros > 0 ? ", gap " + gapMicros + " us between messages" : "");
        out.printf(Locale.ROOT, "# one-way = writer stamp -> reader receipt (all readers); round trip = enqueue -> every reader done%n");
        out.printf(Locale.ROOT, "# %10s %8s | %28s | %28s%n", "", "", "one-way (us)", "round trip (us)");
        out.printf(Locale.ROOT, "# %10s %8s | %8s %8s %10s | %8s %8s %10s%n", "size(B)", "iters", "p50", "p99", "p99.9",
                "p50", "p99", "p99.9");
    }

    private int itersFor(int size, int base) {
        long budget = 2L << 30; // bytes per size
        return (int) Math.max(200, Math.min(base, budget / Math.max(1, size)));
    }

    private void measureSize(QueueWriter w, UnsafeBuffer msg, int size, List<Child> children) throws Exception {
        int warm = itersFor(size, warmup);
        int iters = itersFor(size, iterations);
        if (gapMicros > 0) { // keep the run short: a pause per message
            long cap = Math.max(200, 20_000_000L / Math.max(1, gapMicros));
            warm = (int) Math.min(warm, cap / 4);
            iters = (int) Math.min(iters, cap);
        }
        Histogram rtt = new Histogram(3_600_000_000_000L, 3);
        Duration t = Duration.ofSeconds(30);
        for (int i = 0; i < warm + iters; i++) {
            int phase = i < warm ? PHASE_WARMUP : PHASE_MEASURE;
            if (gapMicros > 0) {
                java.util.concurrent.locks.LockSupport.parkNanos(gapMicros * 1000);
            }
            msg.putInt(PHASE_OFFSET, phase);
            long t0 = System.nanoTime();
            msg.putLong(STAMP_OFFSET, t0);
            long s = w.enqueue(msg, 0, size, t);
            w.awaitDelivered(s, t);
            long t1 = System.nanoTime();
            if (phase == PHASE_MEASURE) {
                rtt.recordValue(t1 - t0);
            }
        }
        msg.putInt(PHASE_OFFSET, PHASE_END_OF_SIZE);
        msg.putInt(ARG_OFFSET, size);
        w.enqueue(msg, 0, HEADER, t);
        Histogram oneWay = new Histogram(3_600_000_000_000L, 3);
        for (Child c : children) {
            String line = c.await("HIST " + c.rank + " " + size + " ", Duration.ofSeconds(60));
            byte[] bytes = Base64.getDecoder().decode(line.substring(line.lastIndexOf(' ') + 1));
            oneWay.add(Histogram.decodeFromCompressedByteBuffer(ByteBuffer.wrap(bytes), 0));
        }
        out.printf(Locale.ROOT, "  %10d %8d | %8.2f %8.2f %10.2f | %8.2f %8.2f %10.2f%n", size, iters,
                us(oneWay, 50), us(oneWay, 99), us(oneWay, 99.9), us(rtt, 50), us(rtt, 99), us(rtt, 99.9));
        out.flush();
    }

    private static double us(Histogram h, double percentile) {
        return h.getValueAtPercentile(percentile) / 1000.0;
    }

    /** Raw Aeron IPC ping-pong with reader 1 (same driver, same idle strategy): the floor. */
    private void floor(AeronMedia media, QueueWriter w, UnsafeBuffer msg, Child echo) throws Exception {
        if (remote) {
            out.println("# floor: skipped (raw Aeron IPC floor needs local readers)");
            return;
        }
        int stream = 0x7000_0000 + (int) (ProcessHandle.current().pid() & 0xFFFF) * 2;
        int total = floorIterations + floorIterations / 2;
        try (ExclusivePublication pub = media.aeron().addExclusivePublication("aeron:ipc?term-length=4m", stream);
             Subscription sub = media.aeron().addSubscription("aeron:ipc", stream + 1)) {
            msg.putInt(PHASE_OFFSET, PHASE_FLOOR);
            msg.putInt(ARG_OFFSET, stream);
            msg.putInt(ARG_OFFSET + 4, echo.rank); // only this reader answers
            msg.putInt(ARG_OFFSET + 8, floorIdle.equals("spin") ? 1 : 0);
            w.enqueue(msg, 0, HEADER, Duration.ofSeconds(10));
            echo.await("FLOOR READY", Duration.ofSeconds(30));
            while (sub.imageCount() == 0 || !pub.isConnected()) {
                Thread.onSpinWait();
            }
            Image image = sub.imageAtIndex(0);
            IdleStrategy idle = IdleConfig.parse(floorIdle).newStrategy();
            long capEnd = System.nanoTime() + (long) (floorSeconds * 1e9);
            int done = 0;
            UnsafeBuffer ping = new UnsafeBuffer(ByteBuffer.allocateDirect(100));
            Histogram h = new Histogram(3_600_000_000_000L, 3);
            boolean[] got = {false};
            for (int i = 0; i < total; i++) {
                long t0 = System.nanoTime();
                ping.putLong(0, t0);
                while (pub.offer(ping, 0, 100) < 0) {
                    Thread.onSpinWait();
                }
                got[0] = false;
                while (!got[0]) {
                    int n = image.poll((b, o, l, hd) -> got[0] = true, 1);
                    idle.idle(n);
                }
                long t1 = System.nanoTime();
                if (i >= floorIterations / 2) {
                    h.recordValue(t1 - t0);
                    done++;
                }
                if (t1 - capEnd > 0) {
                    break;
                }
            }
            ping.putLong(0, -1); // tells the echo to stop
            while (pub.offer(ping, 0, 100) < 0) {
                Thread.onSpinWait();
            }
            out.printf(Locale.ROOT, "# floor: raw Aeron IPC ping-pong 100 B with reader 1, round trip p50 %.2f p99 %.2f "
                    + "p99.9 %.2f us (%d iters, idle=%s both ends)%n", us(h, 50), us(h, 99), us(h, 99.9), done, floorIdle);
        }
    }

    /** CPU time of every process over a window in which no message flows. */
    private void idleCpu(List<Child> children) throws InterruptedException {
        Map<String, ProcessHandle> procs = new java.util.LinkedHashMap<>();
        procs.put("writer (+driver)", ProcessHandle.current());
        for (Child c : children) {
            procs.put("reader " + c.rank + (remote ? " (+driver)" : ""), c.process.toHandle());
        }
        Thread.sleep(1000); // let everyone reach its park phase (and the JIT finish)
        Map<String, Long> before = new ConcurrentHashMap<>();
        procs.forEach((k, p) -> before.put(k, cpuNanos(p)));
        long t0 = System.nanoTime();
        Thread.sleep((long) (idleSeconds * 1000));
        long wall = System.nanoTime() - t0;
        StringBuilder sb = new StringBuilder("# idle CPU over " + idleSeconds + " s (% of one core):");
        procs.forEach((k, p) -> sb.append(String.format(Locale.ROOT, " %s %.2f%%", k,
                100.0 * (cpuNanos(p) - before.get(k)) / wall)));
        out.println(sb);
    }

    private static long cpuNanos(ProcessHandle p) {
        return p.info().totalCpuDuration().map(Duration::toNanos).orElse(-1L);
    }
}
