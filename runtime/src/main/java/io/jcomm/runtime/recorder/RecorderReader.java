package io.jcomm.runtime.recorder;

import io.jcomm.runtime.shm.ShmFiles;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Reads another process's {@link FlightRecorder} file without disturbing it (read-only mapping; a
 * slot being written is retried). Timestamps are {@code System.nanoTime()} values, which on Linux are
 * comparable between processes of one host (CLOCK_MONOTONIC).
 */
public final class RecorderReader {

    private RecorderReader() {
    }

    /** What one group of the process was doing when read. */
    public record GroupState(String group, int rank, int size, long started, long finished, String op, int state,
                             long seq, long startNanos, long endNanos, boolean async, long bytes) {

        /** Whether it is inside an operation. */
        public boolean running() {
            return state == FlightRecorder.RUNNING;
        }

        /** "allReduce #50 (running 12.3 s)" or "idle after barrier #49 (0.2 s ago)". */
        public String describe(long nowNanos) {
            if (seq == 0) {
                return "no operation yet";
            }
            String what = op + " #" + seq + (async ? " (async)" : "");
            if (running()) {
                return "in " + what + " for " + seconds(nowNanos - startNanos);
            }
            return (state == FlightRecorder.FAILED ? "failed " : "idle after ") + what + ", " + seconds(nowNanos - endNanos)
                    + " ago";
        }
    }

    /** A process's recorder as read. */
    public record Snapshot(long pid, Path file, List<GroupState> groups) {

        /** The group named {@code name}, if this process is a member. */
        public Optional<GroupState> group(String name) {
            return groups.stream().filter(g -> g.group().equals(name)).findFirst();
        }
    }

    static String seconds(long nanos) {
        return String.format(java.util.Locale.ROOT, "%.1f s", Math.max(0, nanos) / 1e9);
    }

    /**
     * What process {@code pid} (on this host) is doing according to its recorder, for error messages:
     * its running operations ({@code "in pp:0 recvObject #412 for 9.8 s"}), else its latest finished one;
     * empty when it has no readable recorder (another host, recorder off, gone). Reads the default directory
     * ({@code JCOMM_RECORDER_DIR}, else {@code /dev/shm}).
     */
    public static Optional<String> describeProcess(long pid) {
        if (pid <= 0) {
            return Optional.empty();
        }
        Path dir = FlightRecorder.directory(System.getenv());
        for (Path f : filesOf(dir, pid)) {
            Optional<Snapshot> s = read(f);
            if (s.isPresent()) {
                return Optional.of(describe(s.get().groups(), System.nanoTime()));
            }
        }
        return Optional.empty();
    }

    /**
     * What a process whose groups are {@code groups} is doing at {@code nowNanos}, as error messages say it:
     * its running operations ({@code "in pp:0 recvObject #412 for 9.8 s"}), else its latest finished one
     * ({@code "in no operation; last world allReduce #19 ended 3.0 s ago"}), else {@code "in no operation yet"}.
     */
    public static String describe(List<GroupState> groups, long nowNanos) {
        List<String> running = new ArrayList<>();
        GroupState latest = null;
        for (GroupState g : groups) {
            if (g.running()) {
                running.add("in " + g.group() + " " + g.op() + " #" + g.seq() + " for " + seconds(nowNanos - g.startNanos()));
            } else if (g.seq() > 0 && (latest == null || g.endNanos() - latest.endNanos() > 0)) {
                latest = g;
            }
        }
        if (!running.isEmpty()) {
            return String.join(", ", running);
        }
        if (latest != null) {
            return "in no operation; last " + latest.group() + " " + latest.op() + " #" + latest.seq()
                    + " ended " + seconds(nowNanos - latest.endNanos()) + " ago";
        }
        return "in no operation yet";
    }

    /** The recorder files of process {@code pid} in {@code dir} (normally one). */
    public static List<Path> filesOf(Path dir, long pid) {
        List<Path> out = new ArrayList<>();
        try (DirectoryStream<Path> ds = Files.newDirectoryStream(dir, FlightRecorder.PREFIX + "*-" + pid + "-*")) {
            ds.forEach(out::add);
        } catch (IOException e) {
            // none
        }
        return out;
    }

    /** Reads a recorder file; empty when it is not one (or is gone). */
    public static Optional<Snapshot> read(Path file) {
        MappedByteBuffer m;
        try {
            m = ShmFiles.mapExisting(file, false, FlightRecorder.fileBytes(), FlightRecorder.fileBytes());
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
        try {
            return read(m, file);
        } finally {
            ShmFiles.unmap(m);
        }
    }

    /** Reads a recorder's mapping (another process's, or this process's own); empty when it is not one. */
    static Optional<Snapshot> read(ByteBuffer map, Path file) {
        ByteBuffer m = map.duplicate().order(ByteOrder.LITTLE_ENDIAN);
        if (m.getLong(0) != FlightRecorder.MAGIC || m.getLong(8) != FlightRecorder.VERSION) {
            return Optional.empty();
        }
        long pid = m.getLong(16);
        String[] ops = new String[FlightRecorder.MAX_OPS];
        for (int i = 0; i < FlightRecorder.MAX_OPS; i++) {
            ops[i] = text(m, FlightRecorder.OPS_AT + i * FlightRecorder.OP_NAME, FlightRecorder.OP_NAME);
        }
        ops[0] = "other";
        List<GroupState> groups = new ArrayList<>();
        for (int slot = 0; slot < FlightRecorder.GROUPS; slot++) {
            int at = FlightRecorder.HEADER + slot * FlightRecorder.GROUP_BYTES;
            GroupState g = null;
            for (int attempt = 0; attempt < 100 && g == null; attempt++) {
                long v = m.getLong(at);
                if (v == 0) {
                    break; // never used: the slots are taken in order
                }
                if ((v & 1) != 0) {
                    Thread.onSpinWait();
                    continue;
                }
                int id = m.getInt(at + 80);
                GroupState s = new GroupState(text(m, at + 8, FlightRecorder.NAME_BYTES), m.getInt(at + 56),
                        m.getInt(at + 60), m.getLong(at + 64), m.getLong(at + 72),
                        id >= 0 && id < ops.length && ops[id] != null ? ops[id] : "?", m.getInt(at + 84),
                        m.getLong(at + 88), m.getLong(at + 96), m.getLong(at + 104), m.getInt(at + 112) != 0,
                        m.getLong(at + 120));
                if (m.getLong(at) == v) {
                    g = s;
                }
            }
            if (m.getLong(at) == 0) {
                break;
            }
            if (g != null) {
                groups.add(g);
            }
        }
        return Optional.of(new Snapshot(pid, file, List.copyOf(groups)));
    }

    private static String text(ByteBuffer m, int at, int max) {
        byte[] b = new byte[max];
        int n = 0;
        while (n < max && m.get(at + n) != 0) {
            b[n] = m.get(at + n);
            n++;
        }
        return new String(b, 0, n, StandardCharsets.UTF_8);
    }
}
