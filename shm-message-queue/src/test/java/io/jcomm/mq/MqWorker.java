package io.jcomm.mq;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProtocolException;
import io.jcomm.cpu.codec.ForyCodec;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.agrona.DirectBuffer;
import org.agrona.concurrent.UnsafeBuffer;

/**
 * Worker JVM of the multi-JVM queue tests. Rank 0 is the writer; it launches the host's media
 * driver and writes the queue handle to {@code $MQ_DIR}; readers attach to that driver (local) or
 * launch their own (remote, {@code MQ_REMOTE=1}), then read the handle.
 *
 * <p>Arguments: {@code <scenario> <local ranks> <remote ranks> [slow rank]}, ranks comma separated
 * ({@code -} for none).
 */
public final class MqWorker {

    /** A registered message type. */
    public record Tick(long id, String text) {
    }

    /** Registered on the writer only: readers cannot decode it. */
    public record WriterOnly(int x) {
    }

    /** Registered nowhere. */
    public record Unregistered(int x) {
    }

    static final int[] SIZES = {0, 1, 100, 1 << 20, 64 << 20};
    static final int STREAM = 100_000;
    static final Duration T = Duration.ofSeconds(60);

    private MqWorker() {
    }

    static byte pat(int i, int size) {
        return (byte) (i * 31 + (i >>> 9) + size);
    }

    static List<Integer> ranks(String s) {
        List<Integer> out = new ArrayList<>();
        if (!s.equals("-")) {
            for (String p : s.split(",")) {
                out.add(Integer.parseInt(p.trim()));
            }
        }
        return out;
    }

    static void log(String s) {
        System.out.println(s);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String scenario = args[0];
        List<Integer> local = ranks(args[1]);
        List<Integer> remote = ranks(args[2]);
        int slow = args.length > 3 ? Integer.parseInt(args[3]) : -1;
        int rank = Integer.parseInt(System.getenv("RANK"));
        Path dir = Path.of(System.getenv("MQ_DIR"));
        AeronMedia.Options mo = AeronMedia.Options.builder().tag(System.getenv("MQ_TAG")).build();
        ForyCodec codec = rank == 0 ? ForyCodec.builder().register(Tick.class, WriterOnly.class).build()
                : ForyCodec.builder().register(Tick.class).build();
        MessageQueueOptions opts = MessageQueueOptions.builder().udpAddress("127.0.0.1").codec(codec).build();
        if (rank == 0) {
            try (AeronMedia media = AeronMedia.launch(mo);
                 QueueWriter w = QueueWriter.create(media, "it", 0, local, remote, 0, opts)) {
                writeAtomically(dir.resolve("aeron.dir"), media.directory().toString().getBytes());
                writeAtomically(dir.resolve("handle.bin"), w.handle().encode());
                w.awaitReaders(Deadline.after(T));
                log("WRITER READY " + w.connectedReaders());
                switch (scenario) {
                    case "stream":
                        writeStream(w, slow, local.size() + remote.size());
                        break;
                    case "flood":
                        flood(w);
                        break;
                    default:
                        throw new IllegalArgumentException(scenario);
                }
            }
            log("WRITER DONE");
            return;
        }
        boolean isRemote = remote.contains(rank);
        Path handleFile = dir.resolve("handle.bin");
        Deadline d = Deadline.after(T);
        while (!Files.exists(handleFile)) {
            if (d.isExpired()) {
                throw new AssertionError("no handle file");
            }
            Thread.sleep(20);
        }
        QueueHandle h = QueueHandle.decode(Files.readAllBytes(handleFile));
        AeronMedia media = isRemote ? AeronMedia.launch(mo)
                : AeronMedia.attach(Path.of(Files.readString(dir.resolve("aeron.dir"))), mo);
        try (media; QueueReader r = QueueReader.open(media, h, rank, isRemote ? rank : 0, opts, Deadline.after(T))) {
            if (r.isRemote() != isRemote) {
                throw new AssertionError("remote flag");
            }
            log("READER " + rank + " OPEN " + (isRemote ? "udp" : "ipc"));
            switch (scenario) {
                case "stream":
                    readStream(r, rank, slow);
                    break;
                case "flood":
                    readForever(r);
                    break;
                default:
                    throw new IllegalArgumentException(scenario);
            }
        }
        log("READER " + rank + " DONE");
    }

    static void writeAtomically(Path file, byte[] bytes) throws Exception {
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        Files.write(tmp, bytes);
        Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE);
    }

    // ------------------------------------------------------------------ stream scenario

    static void writeStream(QueueWriter w, int slow, int readers) {
        for (int size : SIZES) {
            byte[] b = new byte[size];
            for (int i = 0; i < size; i++) {
                b[i] = pat(i, size);
            }
            w.enqueue(b, T);
        }
        log("SIZES SENT");
        UnsafeBuffer m = new UnsafeBuffer(new byte[24]);
        for (int i = 0; i < STREAM; i++) {
            m.putLong(0, i);
            m.putLong(8, ~i);
            m.putLong(16, i * 7L);
            w.enqueue(m, 0, 24, T);
        }
        log("STREAM SENT");
        w.enqueueObject(new Tick(1, "one"), T);
        w.enqueue(new byte[] {1, 2, 3}, T);
        w.enqueueObject(new WriterOnly(5), T);
        try {
            w.enqueueObject(new Unregistered(1), T);
            throw new AssertionError("unregistered type was encoded");
        } catch (IllegalArgumentException e) {
            log("WRITER REFUSED UNREGISTERED " + e.getMessage());
        }
        w.enqueueObject(new Tick(2, "two"), T);
        if (slow >= 0) {
            w.enqueueObject(new Tick(-1, "slow " + slow), T);
            UnsafeBuffer f = new UnsafeBuffer(new byte[1024]);
            int n = 0;
            long deadlineEnd = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (true) {
                f.putInt(0, n);
                try {
                    w.enqueue(f, 0, 1024, Duration.ofMillis(1000));
                    n++;
                } catch (CommTimeoutException e) {
                    log("BACKPRESSURE after " + n + ": " + e.getMessage());
                    break;
                }
                if (System.nanoTime() - deadlineEnd > 0) {
                    throw new AssertionError("never back pressured");
                }
            }
            f.putInt(0, n);
            w.enqueue(f, 0, 1024, T); // the writer is still usable once the slow reader catches up
            n++;
            UnsafeBuffer end = new UnsafeBuffer(new byte[8]);
            end.putInt(0, n);
            w.enqueue(end, 0, 8, T);
        }
        long last = w.enqueueObject(new Tick(3, "three"), T);
        w.awaitDelivered(last, T);
        log("DELIVERED " + last + " to " + readers + " readers");
    }

    static void readStream(QueueReader r, int rank, int slow) throws Exception {
        for (int size : SIZES) {
            DirectBuffer v = r.dequeue(T);
            if (v.capacity() != size) {
                throw new AssertionError("size " + v.capacity() + " != " + size);
            }
            for (int i = 0; i < size; i++) {
                if (v.getByte(i) != pat(i, size)) {
                    throw new AssertionError("byte " + i + " of the " + size + "-byte message differs");
                }
            }
        }
        log("SIZES OK");
        for (int i = 0; i < STREAM; i++) {
            DirectBuffer v = r.dequeue(T);
            if (v.capacity() != 24 || v.getLong(0) != i || v.getLong(8) != ~i || v.getLong(16) != i * 7L) {
                throw new AssertionError("stream message " + i + " wrong: got " + v.getLong(0));
            }
        }
        log("STREAM OK " + STREAM);
        expect(new Tick(1, "one"), r.dequeueObject(Tick.class, T));
        try {
            r.dequeueObject(Tick.class, T);
            throw new AssertionError("garbage decoded");
        } catch (ProtocolException e) {
            log("GARBAGE REJECTED " + e.getMessage());
        }
        try {
            Object o = r.dequeueObject(Tick.class, T);
            throw new AssertionError("type unknown to the reader decoded: " + o);
        } catch (ProtocolException e) {
            log("UNREGISTERED REJECTED " + e.getMessage());
        }
        expect(new Tick(2, "two"), r.dequeueObject(Tick.class, T));
        if (slow >= 0) {
            Tick s = r.dequeueObject(Tick.class, T);
            expect("slow " + slow, s.text());
            if (rank == slow) {
                log("SLEEPING");
                Thread.sleep(4000);
            }
            int n = 0;
            while (true) {
                DirectBuffer v = r.dequeue(T);
                if (v.capacity() == 8) {
                    expect(n, v.getInt(0)); // the end marker carries the count
                    break;
                }
                if (v.capacity() != 1024 || v.getInt(0) != n) {
                    throw new AssertionError("flood message " + n + " wrong: " + v.getInt(0));
                }
                n++;
            }
            log("FLOOD OK " + n);
        }
        expect(new Tick(3, "three"), r.dequeueObject(Tick.class, T));
        try {
            r.dequeue(T);
            throw new AssertionError("message after the last");
        } catch (CommClosedException e) {
            log("CLOSED " + e.getMessage());
        }
    }

    static void expect(Object want, Object got) {
        if (!want.equals(got)) {
            throw new AssertionError("expected " + want + " got " + got);
        }
    }

    // ------------------------------------------------------------------ failure scenarios

    /** Writes small messages until something fails; reports what and when (System.nanoTime). */
    static void flood(QueueWriter w) {
        UnsafeBuffer m = new UnsafeBuffer(new byte[64]);
        long i = 0;
        try {
            while (true) {
                m.putLong(0, i++);
                w.enqueue(m, 0, 64, T);
                if ((i & 127) == 0) {
                    Thread.onSpinWait();
                    java.util.concurrent.locks.LockSupport.parkNanos(100_000);
                }
            }
        } catch (CommException e) {
            report(e);
        }
    }

    static void readForever(QueueReader r) {
        long i = 0;
        try {
            while (true) {
                DirectBuffer v = r.dequeue(T);
                if (v.getLong(0) != i) {
                    throw new AssertionError("message " + i + " got " + v.getLong(0));
                }
                i++;
                if (i == 1000) {
                    log("READING");
                }
            }
        } catch (CommException e) {
            report(e);
        }
    }

    static void report(CommException e) {
        long now = System.nanoTime();
        int peer = e instanceof PeerFailureException p ? p.peerRank() : -9;
        log("FAILURE " + e.getClass().getSimpleName() + " peer=" + peer + " nanos=" + now + " msg=" + e.getMessage());
    }
}
