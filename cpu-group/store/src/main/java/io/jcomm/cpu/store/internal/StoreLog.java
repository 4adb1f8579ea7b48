package io.jcomm.cpu.store.internal;

import java.io.BufferedInputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.zip.CRC32C;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The durable image of a store: one append-only file of checksummed records in a data directory,
 * written through before the server replies, read back when a server starts on the directory.
 *
 * <h2>Format</h2>
 * {@code store.log}: a 16-byte header ({@code JCSTORE1}, u32 version, u32 zero), then records:
 * u32 payload length, u32 CRC-32C of the payload, payload. Payload: u8 flags (bit 0: tagged), when
 * tagged the request id (16 bytes client id, u64 sequence) and u64 result, then u32 op count and the
 * ops: {@code 1} put (u32 key length, key, u32 value length, value) or {@code 2} delete (u32 key
 * length, key). Little-endian. Every record holds the whole effect of one request (a MULTI_SET is one
 * record), so a request is either entirely in the image or not at all.
 *
 * <h2>Durability</h2>
 * A record is handed to the operating system ({@code write(2)}) before the reply is sent. The page
 * cache survives the death of the store process (kill -9 included), so a restarted store has every
 * mutation any client saw acknowledged. Without {@code fsync} a crash of the machine or a power loss
 * can lose the last writes; with it ({@code fsync = true}) each record is forced to the device before
 * the reply ({@code fdatasync}), at the cost of one device flush per mutation. A record cut short by a
 * crash, or one whose checksum does not match, ends the image: it and anything after it is dropped
 * (logged) and the file is truncated there.
 *
 * <h2>Bounds</h2>
 * The file never grows past {@code maxBytes}. When it reaches twice its size after the last rewrite
 * (at least {@value #MIN_COMPACT_BYTES} bytes), or when the next record would pass {@code maxBytes},
 * it is rewritten with only the live keys (a new file, forced, then renamed over the old one; the
 * server's event loop pauses for the time of that write). When even the rewritten file would not
 * leave room for the record, the write is refused ({@link StoreFault}, "data file full") and the
 * store is unchanged. A write that fails (disk full, I/O error) is refused the same way and the file
 * is cut back to its last whole record; if even that fails the log refuses every later write.
 *
 * <p>Not thread safe: used on the server's event loop only. A directory is used by one server at a
 * time ({@code store.lock}, an OS file lock, released by the OS when the process dies).
 */
public final class StoreLog implements AutoCloseable {

    private static final Logger LOG = LoggerFactory.getLogger("io.jcomm.cpu.store.TcpStoreServer");

    public static final String FILE = "store.log";
    static final String TMP = "store.log.tmp";
    static final String LOCK = "store.lock";
    private static final byte[] MAGIC = {'J', 'C', 'S', 'T', 'O', 'R', 'E', '1'};
    private static final int VERSION = 1;
    static final int HEADER_BYTES = 16;
    static final int RECORD_HEADER_BYTES = 8;
    /** Record overhead without a tag: header, flags, op count. */
    static final int RECORD_OVERHEAD = RECORD_HEADER_BYTES + 1 + 4;
    /** A request id and result. */
    static final int TAG_BYTES = 16 + 8 + 8;
    /** Op overhead of a put: kind, key length, value length. */
    static final int PUT_OVERHEAD = 1 + 4 + 4;
    static final int OP_PUT = 1;
    static final int OP_DELETE = 2;
    private static final int F_TAGGED = 1;
    /** The file is not rewritten before it reaches this size. */
    public static final long MIN_COMPACT_BYTES = 64L * 1024 * 1024;
    private static final int SNAPSHOT_RECORD_BYTES = 1 << 20;
    private static final int RETAINED_BUFFER = 1 << 20;

    /** What a loaded image is applied to, record by record, in order. */
    public interface Loader {
        void put(byte[] key, byte[] value);

        void delete(byte[] key);

        /** The request id of a record (after its ops) and the result the request had. */
        void request(long clientHi, long clientLo, long seq, long result);
    }

    /** The live state, written out by a rewrite. */
    public interface Snapshot {
        /** An upper bound of the bytes {@link #writeTo} writes (the header included). */
        long estimatedBytes();

        void writeTo(SnapshotWriter w) throws IOException;
    }

    /** Receives the live state during a rewrite. */
    public interface SnapshotWriter {
        void put(Key key, byte[] value) throws IOException;

        void request(long clientHi, long clientLo, long seq, long result) throws IOException;
    }

    private final Path dir;
    private final Path file;
    private final long maxBytes;
    private final boolean fsync;
    private final FileChannel lockChannel;
    private final FileLock lock;
    private final CRC32C crc = new CRC32C();
    private FileChannel ch;
    private long size;
    private long compactAt;
    private ByteBuffer rec = ByteBuffer.allocate(4096).order(ByteOrder.LITTLE_ENDIAN);
    private int opCountPos;
    private int ops;
    private String broken;
    private long rewrites;

    private StoreLog(Path dir, long maxBytes, boolean fsync, FileChannel lockChannel, FileLock lock) {
        this.dir = dir;
        this.file = dir.resolve(FILE);
        this.maxBytes = maxBytes;
        this.fsync = fsync;
        this.lockChannel = lockChannel;
        this.lock = lock;
    }

    /**
     * Opens (creating when absent) the image in {@code dir}, applies it to {@code loader}, and returns
     * the log ready for appending.
     *
     * @throws UncheckedIOException when the directory cannot be used, is locked by another server, or
     *                              the file is not a store image
     */
    public static StoreLog open(Path dir, long maxBytes, boolean fsync, Loader loader) {
        FileChannel lc = null;
        try {
            Files.createDirectories(dir);
            lc = FileChannel.open(dir.resolve(LOCK), StandardOpenOption.CREATE, StandardOpenOption.WRITE);
            FileLock l;
            try {
                l = lc.tryLock();
            } catch (OverlappingFileLockException e) {
                l = null;
            }
            if (l == null) {
                throw new IOException("the data directory " + dir + " is in use by another store server");
            }
            StoreLog log = new StoreLog(dir, maxBytes, fsync, lc, l);
            try {
                log.load(loader);
            } catch (IOException | RuntimeException e) {
                log.close();
                throw e;
            }
            return log;
        } catch (IOException e) {
            if (lc != null) {
                try {
                    lc.close();
                } catch (IOException ignored) {
                    // reporting the first failure
                }
            }
            throw new UncheckedIOException("store data directory " + dir + ": " + e.getMessage(), e);
        }
    }

    private void load(Loader loader) throws IOException {
        Files.deleteIfExists(dir.resolve(TMP)); // a rewrite that did not finish
        ch = FileChannel.open(file, StandardOpenOption.CREATE, StandardOpenOption.READ, StandardOpenOption.WRITE);
        long length = ch.size();
        if (length == 0) {
            writeHeader(ch);
            ch.force(true);
            size = HEADER_BYTES;
        } else {
            size = replay(length, loader);
            if (size < length) {
                LOG.warn("store data file {}: {} bytes after offset {} are not a whole checksummed record (a write cut "
                        + "short by a crash); they are dropped", file, length - size, size);
                ch.truncate(size);
                ch.force(true);
            }
        }
        compactAt = Math.max(MIN_COMPACT_BYTES, 2 * size);
    }

    private static void writeHeader(FileChannel c) throws IOException {
        ByteBuffer h = ByteBuffer.allocate(HEADER_BYTES).order(ByteOrder.LITTLE_ENDIAN);
        h.put(MAGIC).putInt(VERSION).putInt(0).flip();
        while (h.hasRemaining()) {
            c.write(h, h.position());
        }
    }

    /** Applies the records; returns the offset after the last whole one. */
    private long replay(long length, Loader loader) throws IOException {
        ch.position(0);
        InputStream in = new BufferedInputStream(Channels.newInputStream(ch), 1 << 16);
        byte[] h = new byte[HEADER_BYTES];
        if (length < HEADER_BYTES || in.readNBytes(h, 0, HEADER_BYTES) != HEADER_BYTES
                || !Arrays.equals(h, 0, MAGIC.length, MAGIC, 0, MAGIC.length)) {
            throw new IOException(file + " is not a store data file (no JCSTORE1 header)");
        }
        int version = ByteBuffer.wrap(h).order(ByteOrder.LITTLE_ENDIAN).getInt(8);
        if (version != VERSION) {
            throw new IOException(file + " has format version " + version + "; this server reads version " + VERSION);
        }
        long pos = HEADER_BYTES;
        byte[] rh = new byte[RECORD_HEADER_BYTES];
        while (pos + RECORD_HEADER_BYTES <= length) {
            if (in.readNBytes(rh, 0, RECORD_HEADER_BYTES) != RECORD_HEADER_BYTES) {
                break;
            }
            ByteBuffer hb = ByteBuffer.wrap(rh).order(ByteOrder.LITTLE_ENDIAN);
            long len = Integer.toUnsignedLong(hb.getInt(0));
            int sum = hb.getInt(4);
            if (len < 5 || len > length - pos - RECORD_HEADER_BYTES) {
                break;
            }
            byte[] payload = new byte[(int) len];
            if (in.readNBytes(payload, 0, payload.length) != payload.length) {
                break;
            }
            crc.reset();
            crc.update(payload);
            if ((int) crc.getValue() != sum || !apply(payload, loader)) {
                break;
            }
            pos += RECORD_HEADER_BYTES + len;
        }
        return pos;
    }

    /** Applies one payload; false when it is malformed (then nothing of it is applied). */
    private static boolean apply(byte[] payload, Loader loader) {
        ByteBuffer b = ByteBuffer.wrap(payload).order(ByteOrder.LITTLE_ENDIAN);
        try {
            int flags = b.get();
            boolean tagged = (flags & F_TAGGED) != 0;
            long hi = 0;
            long lo = 0;
            long seq = 0;
            long result = 0;
            if (tagged) {
                hi = b.getLong();
                lo = b.getLong();
                seq = b.getLong();
                result = b.getLong();
            }
            int n = b.getInt();
            if (n < 0) {
                return false;
            }
            // validate the whole record before applying any of it
            int start = b.position();
            for (int i = 0; i < n; i++) {
                int kind = b.get();
                if (kind != OP_PUT && kind != OP_DELETE) {
                    return false;
                }
                skip(b);
                if (kind == OP_PUT) {
                    skip(b);
                }
            }
            if (b.hasRemaining()) {
                return false;
            }
            b.position(start);
            for (int i = 0; i < n; i++) {
                int kind = b.get();
                byte[] key = read(b);
                if (kind == OP_PUT) {
                    loader.put(key, read(b));
                } else {
                    loader.delete(key);
                }
            }
            if (tagged) {
                loader.request(hi, lo, seq, result);
            }
            return true;
        } catch (java.nio.BufferUnderflowException | IllegalArgumentException e) {
            return false;
        }
    }

    private static void skip(ByteBuffer b) {
        int len = b.getInt();
        if (len < 0 || len > b.remaining()) {
            throw new IllegalArgumentException("bad length");
        }
        b.position(b.position() + len);
    }

    private static byte[] read(ByteBuffer b) {
        byte[] v = new byte[b.getInt()];
        b.get(v);
        return v;
    }

    // ------------------------------------------------------------------ appending

    /** Bytes of the file now. */
    public long size() {
        return size;
    }

    public long maxBytes() {
        return maxBytes;
    }

    public Path directory() {
        return dir;
    }

    public boolean fsync() {
        return fsync;
    }

    /** Rewrites so far. */
    public long rewrites() {
        return rewrites;
    }

    /** Starts a record; {@code tagged}: it carries a request id and the request's result. */
    public void begin(boolean tagged, long clientHi, long clientLo, long seq, long result) {
        rec.clear();
        rec.position(RECORD_HEADER_BYTES);
        rec.put((byte) (tagged ? F_TAGGED : 0));
        if (tagged) {
            rec.putLong(clientHi).putLong(clientLo).putLong(seq).putLong(result);
        }
        opCountPos = rec.position();
        rec.putInt(0);
        ops = 0;
    }

    public void put(Key key, byte[] value) {
        ensure(PUT_OVERHEAD + key.length() + value.length);
        rec.put((byte) OP_PUT).putInt(key.length()).put(key.array(), 0, key.length()).putInt(value.length).put(value);
        ops++;
    }

    public void delete(Key key) {
        ensure(1 + 4 + key.length());
        rec.put((byte) OP_DELETE).putInt(key.length()).put(key.array(), 0, key.length());
        ops++;
    }

    private void ensure(int n) {
        if (rec.remaining() < n) {
            long need = (long) rec.position() + n;
            if (need > Integer.MAX_VALUE - 16) {
                throw new StoreFault("a store record of " + need + " bytes is too large for the data file");
            }
            ByteBuffer nb = ByteBuffer.allocate((int) Math.max(need, Math.min(Integer.MAX_VALUE - 16L,
                    2L * rec.capacity()))).order(ByteOrder.LITTLE_ENDIAN);
            rec.flip();
            nb.put(rec);
            rec = nb;
        }
    }

    /**
     * Writes the record begun by {@link #begin} (rewriting the file first when due).
     *
     * @throws StoreFault when the file is full or the write failed; nothing of the record is in the file
     */
    public void commit(Snapshot live) {
        if (broken != null) {
            throw new StoreFault("store data file " + file + " is unusable since an earlier failure (" + broken
                    + "); the store refuses every change");
        }
        int len = rec.position();
        rec.putInt(opCountPos, ops);
        crc.reset();
        crc.update(rec.array(), RECORD_HEADER_BYTES, len - RECORD_HEADER_BYTES);
        rec.putInt(0, len - RECORD_HEADER_BYTES).putInt(4, (int) crc.getValue());
        if (size + len > compactAt || size + len > maxBytes) {
            long est = live.estimatedBytes();
            if (est + len <= maxBytes) {
                rewrite(live);
            } else if (size + len > maxBytes) {
                throw new StoreFault("store data file full: the live keys need up to " + est + " bytes and this "
                        + "change " + len + " more, over maxDataBytes " + maxBytes + " (" + file + ")");
            } // else a rewrite could not promise room, but the record fits as the file is
        }
        rec.limit(len).position(0);
        long at = size;
        try {
            while (rec.hasRemaining()) {
                ch.write(rec, at + rec.position());
            }
            if (fsync) {
                ch.force(false);
            }
        } catch (IOException e) {
            cutBack(at, e);
            throw new StoreFault("store data file " + file + ": write failed (" + e.getMessage() + "); the change "
                    + "was not made");
        }
        size = at + len;
        if (rec.capacity() > RETAINED_BUFFER) {
            rec = ByteBuffer.allocate(4096).order(ByteOrder.LITTLE_ENDIAN);
        }
    }

    private void cutBack(long at, IOException cause) {
        try {
            ch.truncate(at);
        } catch (IOException e) {
            broken = "a failed write (" + cause.getMessage() + ") could not be cut back: " + e.getMessage();
            LOG.error("store data file {}: {}", file, broken);
        }
    }

    /** Writes the live state to a new file and renames it over the log. */
    private void rewrite(Snapshot live) {
        long t0 = System.nanoTime();
        Path tmp = dir.resolve(TMP);
        long before = size;
        try (FileChannel out = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING,
                StandardOpenOption.WRITE)) {
            writeHeader(out);
            SnapshotOut w = new SnapshotOut(out);
            live.writeTo(w);
            w.flush();
            out.force(true);
            Files.move(tmp, file, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            forceDirectory();
            FileChannel old = ch;
            ch = FileChannel.open(file, StandardOpenOption.READ, StandardOpenOption.WRITE);
            size = w.position;
            old.close();
        } catch (IOException e) {
            try {
                Files.deleteIfExists(tmp);
            } catch (IOException ignored) {
                // the next start deletes it
            }
            throw new StoreFault("store data file " + file + ": rewrite failed (" + e.getMessage() + "); the change "
                    + "was not made");
        }
        rewrites++;
        compactAt = Math.max(MIN_COMPACT_BYTES, 2 * size);
        LOG.info("store data file {}: rewritten with the live keys, {} -> {} bytes in {} ms", file, before, size,
                (System.nanoTime() - t0) / 1_000_000);
    }

    private void forceDirectory() {
        try (FileChannel d = FileChannel.open(dir, StandardOpenOption.READ)) {
            d.force(true);
        } catch (IOException e) {
            // not every file system lets a directory be opened; the rename is still atomic
        }
    }

    /** Writes snapshot entries in records of about {@value #SNAPSHOT_RECORD_BYTES} bytes. */
    private final class SnapshotOut implements SnapshotWriter {
        private final FileChannel out;
        private ByteBuffer b = ByteBuffer.allocate(SNAPSHOT_RECORD_BYTES + 64).order(ByteOrder.LITTLE_ENDIAN);
        private int n;
        long position = HEADER_BYTES;

        SnapshotOut(FileChannel out) {
            this.out = out;
            start();
        }

        private void start() {
            b.clear();
            b.position(RECORD_HEADER_BYTES);
            b.put((byte) 0);
            b.putInt(0);
            n = 0;
        }

        @Override
        public void put(Key key, byte[] value) throws IOException {
            int need = PUT_OVERHEAD + key.length() + value.length;
            if (n > 0 && b.position() + need > SNAPSHOT_RECORD_BYTES) {
                flush();
            }
            if (b.remaining() < need) {
                ByteBuffer nb = ByteBuffer.allocate(b.position() + need).order(ByteOrder.LITTLE_ENDIAN);
                b.flip();
                nb.put(b);
                b = nb;
            }
            b.put((byte) OP_PUT).putInt(key.length()).put(key.array(), 0, key.length()).putInt(value.length).put(value);
            n++;
        }

        @Override
        public void request(long clientHi, long clientLo, long seq, long result) throws IOException {
            flush();
            b.clear();
            b.position(RECORD_HEADER_BYTES);
            b.put((byte) F_TAGGED).putLong(clientHi).putLong(clientLo).putLong(seq).putLong(result).putInt(0);
            n = 0;
            write(b.position());
            start();
        }

        void flush() throws IOException {
            if (n > 0) {
                b.putInt(RECORD_HEADER_BYTES + 1, n);
                write(b.position());
            }
            if (b.capacity() > SNAPSHOT_RECORD_BYTES + 64) {
                b = ByteBuffer.allocate(SNAPSHOT_RECORD_BYTES + 64).order(ByteOrder.LITTLE_ENDIAN);
            }
            start();
        }

        private void write(int len) throws IOException {
            crc.reset();
            crc.update(b.array(), RECORD_HEADER_BYTES, len - RECORD_HEADER_BYTES);
            b.putInt(0, len - RECORD_HEADER_BYTES).putInt(4, (int) crc.getValue());
            if (position + len > maxBytes) {
                throw new EOFException("the rewritten file would pass maxDataBytes " + maxBytes);
            }
            b.limit(len).position(0);
            while (b.hasRemaining()) {
                out.write(b, position + b.position());
            }
            position += len;
            b.limit(b.capacity());
        }
    }

    /** Closes the file and releases the directory. Idempotent. */
    @Override
    public void close() {
        try {
            if (ch != null) {
                ch.close();
            }
        } catch (IOException ignored) {
            // closing anyway
        }
        try {
            if (lock.isValid()) {
                lock.release();
            }
            lockChannel.close();
        } catch (IOException ignored) {
            // the OS releases it with the process
        }
    }
}
