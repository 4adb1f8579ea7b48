package io.jcomm.tools.bench;

import io.jcomm.api.ProcessGroup;
import io.jcomm.runtime.shm.ShmFiles;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.file.Path;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import org.HdrHistogram.Histogram;

/**
 * The raw shared-memory floor of a benchmark run: ranks 0 and 1 (two worker processes of the run)
 * play ping-pong on one cache line of a file in {@code /dev/shm}, both busy-spinning: rank 0 writes a
 * sequence number (release), rank 1 waits for it (acquire) and echoes it, rank 0 waits for the echo.
 * One way = round trip / 2, recorded per round trip in an HdrHistogram. Nothing any API of this SDK
 * does between two processes can be faster; the figure shows how far each table is above it on this
 * machine, at this moment (it moves with the load and with {@code --pin}).
 *
 * <p>The file follows {@link ShmFiles}' lifecycle: an owned name made by rank 0, offered to rank 1
 * over the control group and checked there, unlinked as soon as both mapped it (so a worker that dies
 * later leaves nothing behind); a file of a worker that died before that is removed by
 * {@link #cleanStale()} (the launcher calls it after the workers ended, and rank 0 before it makes one).
 */
final class ShmFloor {

    /** Name prefix of the ping-pong files in {@code /dev/shm}. */
    static final String PREFIX = "jcomm-bench-floor-";
    /** Prefix of rank 0's result line on stdout. */
    static final String LINE_PREFIX = "FLOOR ";

    private static final int BYTES = 4096;
    private static final int PING = 0;
    private static final int PONG = 8; // same 64-byte line as PING: one line bounces between the cores
    private static final long STOP = -1;
    private static final long PEER_TIMEOUT_NANOS = TimeUnit.SECONDS.toNanos(10);
    private static final long WARM_NANOS = TimeUnit.MILLISECONDS.toNanos(200);
    /** Timed round trips: at least {@link #MIN_ROUND_TRIPS} and this long, at most 3 s or {@link #MAX_ROUND_TRIPS}. */
    private static final long MEASURE_NANOS = TimeUnit.MILLISECONDS.toNanos(500);
    private static final long MAX_MEASURE_NANOS = TimeUnit.SECONDS.toNanos(3);
    private static final int MIN_ROUND_TRIPS = 10_000;
    private static final int MAX_ROUND_TRIPS = 1_000_000;
    private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.nativeOrder());

    private ShmFloor() {
    }

    /**
     * One-way latency percentiles in microseconds and the number of timed round trips; or
     * {@code problem}, why there is no figure.
     */
    record Result(double p50Us, double p99Us, long roundTrips, String problem) {

        static Result none(String why) {
            return new Result(0, 0, 0, why);
        }

        boolean measured() {
            return problem == null;
        }

        String toLine() {
            if (!measured()) {
                return LINE_PREFIX + "- " + problem.replace('\n', ' ');
            }
            return LINE_PREFIX + String.format(Locale.ROOT, "%.4f %.4f %d", p50Us, p99Us, roundTrips);
        }

        static Result parse(String line) {
            String rest = line.substring(LINE_PREFIX.length()).trim();
            if (rest.startsWith("-")) {
                return none(rest.substring(1).trim());
            }
            String[] f = rest.split(" ");
            return new Result(Double.parseDouble(f[0]), Double.parseDouble(f[1]), Long.parseLong(f[2]), null);
        }

        /** The line printed with a table. */
        String describe() {
            if (!measured()) {
                return "# shm ping-pong floor (one way): not measured (" + problem + ")";
            }
            return String.format(Locale.ROOT, "# shm ping-pong floor (one way): p50 %.2f us p99 %.2f us  (ranks 0 and 1 "
                    + "spinning on one cache line in /dev/shm, %d round trips, this run)", p50Us, p99Us, roundTrips);
        }
    }

    /** Removes ping-pong files whose owner died (before it unlinked them); never a live process's. */
    static List<Path> cleanStale() {
        return ShmFiles.cleanStale(ShmFiles.DEFAULT_DIR, PREFIX);
    }

    /**
     * Measures the floor between ranks 0 and 1; collective over {@code ctl} (the other ranks wait in its
     * barrier). Every rank returns the same kind of answer; only rank 0's carries the figures.
     */
    static Result measure(ProcessGroup ctl) {
        if (ctl.size() < 2) {
            return Result.none("one rank");
        }
        int rank = ctl.rank();
        MappedByteBuffer map = null;
        Path file = null;
        String problem = null;
        if (rank == 0) {
            cleanStale();
            file = ShmFiles.DEFAULT_DIR.resolve(ShmFiles.ownedName(PREFIX, "pingpong"));
            try {
                map = ShmFiles.createMapped(file, BYTES, "the shm ping-pong floor", "--no-floor");
            } catch (IOException e) {
                problem = e.getMessage();
                file = null;
            }
        }
        String offered = ctl.broadcastObject(rank == 0 ? (file == null ? "" : file.toString()) : null, 0, String.class);
        if (rank == 1 && !offered.isEmpty()) {
            Path p = ShmFiles.offered(ShmFiles.DEFAULT_DIR, offered, PREFIX);
            try {
                if (p == null) {
                    problem = "rank 0 offered an unexpected file " + offered;
                } else {
                    map = ShmFiles.mapExisting(p, true, BYTES, BYTES);
                }
            } catch (IOException e) {
                problem = e.getMessage();
            }
        }
        // every rank learns whether both mapped it; then the name goes (the mappings stay valid)
        List<String> problems = ctl.allGatherObject(problem == null ? "" : problem, String.class);
        if (file != null) {
            ShmFiles.unlink(file);
        }
        String first = problems.stream().filter(s -> !s.isEmpty()).findFirst().orElse(null);
        Result r;
        if (first != null) {
            r = Result.none(first);
        } else if (rank == 0) {
            r = ping(map);
        } else if (rank == 1) {
            r = pong(map);
        } else {
            r = Result.none("not rank 0");
        }
        ctl.barrier();
        ShmFiles.unmap(map);
        return r;
    }

    /**
     * Rank 0: warm up, then time round trips (a loaded machine gives few per second: the time is
     * stretched up to 3 s for enough of them); always stops the peer.
     */
    private static Result ping(ByteBuffer line) {
        Histogram rtt = new Histogram(3);
        long seq = 0;
        try {
            long warmEnd = System.nanoTime() + WARM_NANOS;
            for (int i = 0; i < MAX_ROUND_TRIPS && System.nanoTime() < warmEnd; i++) {
                roundTrip(line, ++seq);
            }
            long start = System.nanoTime();
            long t0 = start;
            for (int i = 0; i < MAX_ROUND_TRIPS; i++) {
                roundTrip(line, ++seq);
                long t1 = System.nanoTime();
                rtt.recordValue(Math.max(1, t1 - t0));
                t0 = t1;
                long elapsed = t1 - start;
                if (elapsed >= MAX_MEASURE_NANOS || elapsed >= MEASURE_NANOS && i + 1 >= MIN_ROUND_TRIPS) {
                    break;
                }
            }
        } catch (IllegalStateException e) {
            return Result.none(e.getMessage());
        } finally {
            LONGS.setRelease(line, PING, STOP);
        }
        return new Result(rtt.getValueAtPercentile(50) / 2000.0, rtt.getValueAtPercentile(99) / 2000.0,
                rtt.getTotalCount(), null);
    }

    private static void roundTrip(ByteBuffer line, long seq) {
        LONGS.setRelease(line, PING, seq);
        long since = 0;
        int spins = 0;
        while ((long) LONGS.getAcquire(line, PONG) != seq) {
            Thread.onSpinWait();
            if ((++spins & 0xFFFF) == 0) {
                long now = System.nanoTime();
                if (since == 0) {
                    since = now;
                } else if (now - since > PEER_TIMEOUT_NANOS) {
                    throw new IllegalStateException("rank 1 did not answer the ping-pong within 10 s");
                }
            }
        }
    }

    /** Rank 1: echoes every sequence number until rank 0 writes {@link #STOP}. */
    private static Result pong(ByteBuffer line) {
        long last = 0;
        while (true) {
            long v;
            long since = 0;
            int spins = 0;
            while ((v = (long) LONGS.getAcquire(line, PING)) == last) {
                Thread.onSpinWait();
                if ((++spins & 0xFFFF) == 0) {
                    long now = System.nanoTime();
                    if (since == 0) {
                        since = now;
                    } else if (now - since > PEER_TIMEOUT_NANOS) {
                        return Result.none("rank 0 stopped pinging for 10 s");
                    }
                }
            }
            if (v == STOP) {
                return Result.none("not rank 0");
            }
            LONGS.setRelease(line, PONG, v);
            last = v;
        }
    }
}
