package io.jcomm.runtime.recorder;

import io.jcomm.api.config.Setting;
import io.jcomm.api.config.Settings;
import io.jcomm.runtime.shm.ProcessIdentity;
import io.jcomm.runtime.shm.ShmFiles;
import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.nio.MappedByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The process's flight recorder: what every group of this process is doing, in a memory-mapped file
 * that another process (commrun's stall report, a debugger) reads while this JVM is wedged (a long GC,
 * a deadlock, a stuck native call). One file per process, {@code /dev/shm/jcomm-rec-<tag>-<pid>-<hex>}
 * ({@link ShmFiles} owned name: removed at exit, swept when its owner is dead), made when the first group
 * registers; {@code JCOMM_RECORDER=off} disables it, {@code JCOMM_RECORDER_DIR} moves it.
 *
 * <h2>Layout (little-endian, 64-byte aligned)</h2>
 * <pre>
 *   header (4096)   [0] magic, [8] version, [16] pid, [24] start ticks of the pid, [32] group slots,
 *                   [40] ring slots, [56] epoch ms and [64] nanoTime at creation
 *                   (to turn nanoTime stamps into wall time), [72] op name table (64 x 24 bytes)
 *   groups (128 B each)  [0] version (odd while written), [8] name (48 B, UTF-8, zero-padded),
 *                   [56] rank, [60] size, [64] ops started, [72] ops finished, [80] current op id,
 *                   [84] state (0 idle, 1 running, 2 done, 3 failed), [88] its sequence number,
 *                   [96] its start (nanoTime), [104] its end (nanoTime), [112] async,
 *                   [120] payload bytes of the operations started (as the caller passed them)
 *   rings (16 x 64 B per group slot) [0] version (odd while written), [8] group slot, [12] op id,
 *                   [16] sequence, [24] start, [32] end, [40] state
 * </pre>
 * A group's slot says what it does now; its ring keeps its last 16 finished operations. Writers are the
 * threads running a group's operations, one at a time per group, so every store is plain except the
 * versions' release stores (no atomic read-modify-write): a record costs a few tens of nanoseconds
 * (mostly the two {@code System.nanoTime()} reads). Readers retry a slot whose version is odd or changed.
 */
public final class FlightRecorder {

    private static final Logger LOG = LoggerFactory.getLogger(FlightRecorder.class);
    private static final VarHandle LONGS = MethodHandles.byteBufferViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);

    public static final long MAGIC = 0x4A434F4D4D524543L; // "JCOMMREC"
    public static final int VERSION = 1;
    public static final String PREFIX = "jcomm-rec-";
    static final int HEADER = 4096;
    static final int OPS_AT = 72;
    static final int MAX_OPS = 64;
    static final int OP_NAME = 24;
    static final int GROUPS = 256;
    static final int GROUP_BYTES = 128;
    static final int RING_PER_GROUP = 16;
    static final int RING = GROUPS * RING_PER_GROUP;
    static final int RECORD_BYTES = 64;
    static final int NAME_BYTES = 48;

    public static final int IDLE = 0;
    public static final int RUNNING = 1;
    public static final int DONE = 2;
    public static final int FAILED = 3;

    private static final class Holder {
        static final FlightRecorder PROCESS = open();
    }

    /** The file this process made, for {@link #releaseFile()} (set once, when the recorder is created). */
    private static volatile Path created;

    private final MappedByteBuffer map;
    private final Path file;
    private final ConcurrentHashMap<String, Integer> opIds = new ConcurrentHashMap<>();
    private int groups;

    private FlightRecorder(MappedByteBuffer map, Path file) {
        this.map = map;
        this.file = file;
    }

    /** Bytes of a recorder file. */
    static long fileBytes() {
        return HEADER + (long) GROUPS * GROUP_BYTES + (long) RING * RECORD_BYTES;
    }

    /** This process's recorder, or null when it is disabled or cannot be created (then nothing is recorded). */
    public static FlightRecorder process() {
        return Holder.PROCESS;
    }

    /** Where recorder files are ({@code JCOMM_RECORDER_DIR} in {@code env}, else {@code /dev/shm}). */
    public static Path directory(Map<String, String> env) {
        return Settings.RECORDER_DIR.value(env).map(Path::of).orElse(ShmFiles.DEFAULT_DIR);
    }

    private static FlightRecorder open() {
        Map<String, String> env = System.getenv();
        if (Settings.RECORDER.value(env).filter(Setting::isOff).isPresent()) {
            return null;
        }
        Path dir = directory(env);
        ShmFiles.cleanStale(dir, PREFIX);
        String tag = Settings.RUN_ID.valueOr(env, "job");
        Path file = dir.resolve(ShmFiles.ownedName(PREFIX, tag));
        try {
            MappedByteBuffer m = ShmFiles.createMapped(file, fileBytes(), "the flight recorder", Settings.RECORDER.name() + "=off");
            m.order(ByteOrder.LITTLE_ENDIAN);
            ProcessIdentity me = ProcessIdentity.self();
            m.putLong(8, VERSION);
            m.putLong(16, me.pid());
            m.putLong(24, me.startTicks());
            m.putLong(32, GROUPS);
            m.putLong(40, RING);
            m.putLong(56, System.currentTimeMillis());
            m.putLong(64, System.nanoTime());
            LONGS.setRelease(m, 0, MAGIC);
            FlightRecorder r = new FlightRecorder(m, file);
            created = file;
            Thread hook = new Thread(() -> ShmFiles.unlink(file), "jcomm-recorder-cleanup");
            Runtime.getRuntime().addShutdownHook(hook);
            return r;
        } catch (IOException | RuntimeException e) {
            LOG.debug("no flight recorder: {}", e.toString());
            return null;
        }
    }

    /**
     * Removes this process's recorder file now, if it made one (the mapping stays valid). For code that
     * ends the JVM with {@code Runtime.halt}, which skips the shutdown hook that normally does it.
     */
    public static void releaseFile() {
        Path p = created;
        if (p != null) {
            ShmFiles.unlink(p);
        }
    }

    /** The file (for tools and tests). */
    public Path file() {
        return file;
    }

    /** What every group of this process is doing now, read from its own mapping (no file access). */
    public RecorderReader.Snapshot snapshot() {
        return RecorderReader.read(map, file).orElseThrow();
    }

    /** The id of an operation name (names live in the file's table; a 65th name records as "other"). */
    int opId(String op) {
        Integer id = opIds.get(op);
        if (id != null) {
            return id;
        }
        synchronized (opIds) {
            id = opIds.get(op);
            if (id == null) {
                id = opIds.size() < MAX_OPS - 1 ? opIds.size() + 1 : 0;
                if (id > 0) {
                    byte[] b = op.getBytes(StandardCharsets.UTF_8);
                    int at = OPS_AT + id * OP_NAME;
                    for (int i = 0; i < OP_NAME; i++) {
                        map.put(at + i, i < b.length && i < OP_NAME - 1 ? b[i] : 0);
                    }
                }
                opIds.put(op, id);
            }
            return id;
        }
    }

    /**
     * Registers a group of this process; returns its handle, or null when every slot is taken (the
     * group is then not recorded). Slots are not reused: a process makes a few dozen groups.
     */
    public synchronized Group group(String name, int rank, int size) {
        if (groups >= GROUPS) {
            return null;
        }
        int slot = groups++;
        int at = HEADER + slot * GROUP_BYTES;
        byte[] b = name.getBytes(StandardCharsets.UTF_8);
        for (int i = 0; i < NAME_BYTES; i++) {
            map.put(at + 8 + i, i < b.length && i < NAME_BYTES - 1 ? b[i] : 0);
        }
        map.putInt(at + 56, rank);
        map.putInt(at + 60, size);
        LONGS.setRelease(map, at, 2L);
        return new Group(this, slot, at);
    }

    /** One group's record. Its operations run one at a time (the group's own rule). */
    public static final class Group {
        private final FlightRecorder rec;
        private final int slot;
        private final int at;
        private long version = 2;
        private long started;
        private long finished;
        private long bytes;
        private String lastOp;
        private int lastId;
        private long start;

        Group(FlightRecorder rec, int slot, int at) {
            this.rec = rec;
            this.slot = slot;
            this.at = at;
        }

        /** An operation starts now; returns its sequence number in this group (counted from 1). */
        public long begin(String op, boolean async) {
            return begin(op, async, System.nanoTime());
        }

        /**
         * An operation started at {@code nowNanos} ({@code System.nanoTime()}, e.g. the one its deadline
         * was computed from: one clock read less); returns its sequence number in this group.
         */
        public long begin(String op, boolean async, long nowNanos) {
            return begin(op, async, nowNanos, 0);
        }

        /**
         * {@link #begin(String, boolean, long)} of an operation that moves {@code payloadBytes} (this rank's
         * buffer: what it contributes or receives), added to the group's byte count (for rates, e.g.
         * {@code commtop}'s bytes/s).
         */
        public long begin(String op, boolean async, long nowNanos, long payloadBytes) {
            MappedByteBuffer m = rec.map;
            int id;
            if (op == lastOp) {
                id = lastId;
            } else {
                id = rec.opId(op);
                lastOp = op;
                lastId = id;
            }
            long seq = ++started;
            long now = nowNanos;
            start = now;
            LONGS.setRelease(m, at, ++version);
            m.putLong(at + 64, seq);
            m.putInt(at + 80, id);
            m.putInt(at + 84, RUNNING);
            m.putLong(at + 88, seq);
            m.putLong(at + 96, now);
            m.putLong(at + 104, 0L);
            m.putInt(at + 112, async ? 1 : 0);
            m.putLong(at + 120, bytes += payloadBytes);
            LONGS.setRelease(m, at, ++version);
            return seq;
        }

        /** The operation {@link #begin} returned {@code seq} for ended. */
        public void end(String op, long seq, boolean ok) {
            end(op, seq, ok, 0);
        }

        /**
         * {@link #end(String, long, boolean)}, adding {@code payloadBytes} known only now (what a receive got)
         * to the group's byte count.
         */
        public void end(String op, long seq, boolean ok, long payloadBytes) {
            MappedByteBuffer m = rec.map;
            long now = System.nanoTime();
            int id = op == lastOp ? lastId : rec.opId(op);
            finished++;
            LONGS.setRelease(m, at, ++version);
            m.putLong(at + 72, finished);
            m.putInt(at + 84, ok ? DONE : FAILED);
            m.putLong(at + 104, now);
            if (payloadBytes != 0) {
                m.putLong(at + 120, bytes += payloadBytes);
            }
            LONGS.setRelease(m, at, ++version);
            // this group's ring: the next of its slots
            int r = HEADER + GROUPS * GROUP_BYTES + (slot * RING_PER_GROUP + (int) (finished % RING_PER_GROUP)) * RECORD_BYTES;
            long odd = m.getLong(r) + 1;
            LONGS.setRelease(m, r, odd);
            m.putInt(r + 8, slot);
            m.putInt(r + 12, id);
            m.putLong(r + 16, seq);
            m.putLong(r + 24, start);
            m.putLong(r + 32, now);
            m.putInt(r + 40, ok ? DONE : FAILED);
            LONGS.setRelease(m, r, odd + 1);
        }
    }
}
