package io.jcomm.cpu.store;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProtocolException;
import io.jcomm.api.StoreException;
import io.jcomm.api.store.Store;
import io.jcomm.runtime.Backoff;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import net.openhft.chronicle.map.ChronicleMap;
import net.openhft.chronicle.map.ChronicleMapBuilder;

/**
 * A node-local {@link Store} in a Chronicle Map file shared by the processes of one host (default
 * under {@code /dev/shm}), for same-host registries such as queue handles or an actor directory.
 * No server and no network: every process maps the same file; updates ({@link #add},
 * {@link #compareSet}, {@link #append}) are atomic across processes (Chronicle's segment locks live
 * in the shared memory).
 *
 * <p>The file is created {@code 0600}. Chronicle Map has no change notifications, so waits poll
 * with a {@link Backoff} (default: park 50 µs doubling up to 5 ms, {@link Options.Builder#pauses}) and are bounded by
 * their timeout. The map is sized when the file is created ({@link Options}); a value larger than
 * {@link Options#maxValueBytes()} is refused with {@link IllegalArgumentException} before it is written.
 *
 * <p>Cost: the first map a JVM opens costs about 3 s (Chronicle generates and compiles code at
 * run time); later opens are fast. The message queue does not use this store on its creation path;
 * open it where that delay does not matter (or once, early, in the background).
 *
 * <p>{@code cpu-group-store} declares Chronicle Map optional: an application that uses this
 * class adds {@code net.openhft:chronicle-map} to its own dependencies (2026.1 is the version jcomm is built and
 * tested with).
 *
 * <p>Thread safe. {@link #close()} unmaps the file; the creator (or whoever passes
 * {@code deleteOnClose}) deletes it.
 */
public final class ChronicleMapStore implements Store {

    private final Path file;
    private final Options options;
    private final ChronicleMap<String, byte[]> map;
    private final boolean deleteOnClose;
    private volatile boolean closed;

    private ChronicleMapStore(Path file, Options options, ChronicleMap<String, byte[]> map, boolean deleteOnClose) {
        this.file = file;
        this.options = options;
        this.map = map;
        this.deleteOnClose = deleteOnClose;
    }

    /**
     * Opens the store in {@code file}, creating it ({@code 0600}, sized by {@code options}) if it
     * does not exist. Several processes may open the same file concurrently.
     *
     * @param deleteOnClose delete the file when this instance closes (the job's owner of the file)
     * @throws StoreException if the file cannot be created or mapped
     */
    public static ChronicleMapStore open(Path file, Options options, boolean deleteOnClose) {
        Objects.requireNonNull(file, "file");
        Objects.requireNonNull(options, "options");
        OpContext ctx = OpContext.of("store", -1, "open");
        try {
            Path parent = file.toAbsolutePath().getParent();
            if (parent == null || !Files.isDirectory(parent)) {
                throw new StoreException(ctx, "directory of " + file + " does not exist");
            }
            try {
                // an empty 0600 file first, so the map's data is never readable by others
                Files.createFile(file, PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rw-------")));
            } catch (java.nio.file.FileAlreadyExistsException e) {
                // another process created it: open it
            }
            ChronicleMap<String, byte[]> m = ChronicleMapBuilder.of(String.class, byte[].class)
                    .name("jcomm-node-store")
                    .entries(options.entries)
                    .averageKeySize(options.averageKeyBytes)
                    .averageValueSize(options.averageValueBytes)
                    .maxBloatFactor(4.0)
                    .createPersistedTo(file.toFile());
            return new ChronicleMapStore(file, options, m, deleteOnClose);
        } catch (IOException | RuntimeException e) {
            if (e instanceof StoreException se) {
                throw se;
            }
            throw new StoreException(ctx, "cannot open the Chronicle Map store " + file + ": " + e, e);
        }
    }

    private static OpContext ctx(String op) {
        return OpContext.of("store", -1, op);
    }

    private void checkOpen(String op) {
        if (closed) {
            throw new CommClosedException(ctx(op), "store " + file + " is closed");
        }
    }

    private static void checkKey(String key) {
        if (key == null || key.isEmpty()) {
            throw OpContext.NONE.invalidArgument("store keys must be non-empty");
        }
    }

    private void checkValue(String op, byte[] value) {
        Objects.requireNonNull(value, "value");
        if (value.length > options.maxValueBytes) {
            throw ctx(op).invalidArgument("value of " + value.length + " bytes exceeds the store's maxValueBytes "
                    + options.maxValueBytes);
        }
    }

    /** Runs a map operation, turning Chronicle's failures (map full, entry too large) into StoreException. */
    /** A bad argument found inside a map operation: {@link #guarded} passes it on as it is. */
    private static final class ArgumentRefused extends IllegalArgumentException {
        private static final long serialVersionUID = 1L;

        ArgumentRefused(OpContext ctx, String detail) {
            super(ctx.invalidArgument(detail).getMessage());
        }
    }

    private <T> T guarded(String op, java.util.function.Supplier<T> action) {
        checkOpen(op);
        try {
            return action.get();
        } catch (ArgumentRefused e) {
            throw e;
        } catch (IllegalArgumentException | IllegalStateException e) {
            throw new StoreException(ctx(op), "Chronicle Map store " + file + " refused the operation: " + e.getMessage(), e);
        }
    }

    /** The backing file. */
    public Path file() {
        return file;
    }

    @Override
    public Duration timeout() {
        return options.timeout;
    }

    @Override
    public void set(String key, byte[] value) {
        checkKey(key);
        checkValue("set", value);
        byte[] copy = value.clone();
        guarded("set", () -> map.put(key, copy));
    }

    @Override
    public byte[] get(String key, Duration timeout) {
        checkKey(key);
        awaitKeys(List.of(key), timeout, "get");
        byte[] v = guarded("get", () -> map.get(key));
        if (v == null) {
            // deleted between the wait and the read: wait again for the remaining time
            awaitKeys(List.of(key), timeout, "get");
            v = guarded("get", () -> map.get(key));
        }
        if (v == null) {
            throw new CommTimeoutException(ctx("get"), "key '" + key + "' disappeared while being read");
        }
        return v;
    }

    private void awaitKeys(List<String> keys, Duration timeout, String op) {
        long end = System.nanoTime() + timeout.toNanos();
        Backoff pauses = Backoff.doubling(options.firstPause, options.maxPause);
        while (true) {
            checkOpen(op);
            List<String> missing = null;
            for (String k : keys) {
                if (!map.containsKey(k)) {
                    if (missing == null) {
                        missing = new ArrayList<>();
                    }
                    missing.add(k);
                }
            }
            if (missing == null) {
                return;
            }
            if (System.nanoTime() - end >= 0) {
                throw new CommTimeoutException(ctx(op), "timed out after " + timeout.toMillis() + " ms waiting for keys "
                        + missing + " in " + file);
            }
            pauses.pauseUntil(end);
        }
    }

    @Override
    public long add(String key, long delta) {
        checkKey(key);
        long[] out = new long[1];
        guarded("add", () -> map.compute(key, (k, cur) -> {
            long v;
            try {
                v = cur == null ? 0 : Long.parseLong(new String(cur, StandardCharsets.US_ASCII));
            } catch (NumberFormatException e) {
                throw new ProtocolException(ctx("add"), "value of '" + key + "' is not an integer");
            }
            out[0] = v + delta;
            return Long.toString(out[0]).getBytes(StandardCharsets.US_ASCII);
        }));
        return out[0];
    }

    @Override
    public byte[] compareSet(String key, byte[] expected, byte[] desired) {
        checkKey(key);
        checkValue("compareSet", desired);
        byte[][] out = new byte[1][];
        guarded("compareSet", () -> map.compute(key, (k, cur) -> {
            if (cur == null) {
                if (expected.length == 0) {
                    out[0] = desired.clone();
                    return desired.clone();
                }
                out[0] = expected.clone();
                return null;
            }
            if (Arrays.equals(cur, expected)) {
                out[0] = desired.clone();
                return desired.clone();
            }
            out[0] = cur;
            return cur;
        }));
        return out[0];
    }

    @Override
    public boolean check(List<String> keys) {
        return guarded("check", () -> {
            for (String k : keys) {
                if (!map.containsKey(k)) {
                    return false;
                }
            }
            return true;
        });
    }

    @Override
    public void wait(List<String> keys, Duration timeout) {
        awaitKeys(keys, timeout, "wait");
    }

    @Override
    public boolean deleteKey(String key) {
        return guarded("deleteKey", () -> map.remove(key) != null);
    }

    @Override
    public long numKeys() {
        return guarded("numKeys", map::longSize);
    }

    @Override
    public List<byte[]> multiGet(List<String> keys, Duration timeout) {
        awaitKeys(keys, timeout, "multiGet");
        List<byte[]> out = new ArrayList<>(keys.size());
        for (String k : keys) {
            out.add(get(k, timeout));
        }
        return out;
    }

    @Override
    public void multiSet(List<String> keys, List<byte[]> values) {
        if (keys.size() != values.size()) {
            throw ctx("multiSet").invalidArgument(keys.size() + " keys but " + values.size() + " values");
        }
        for (int i = 0; i < keys.size(); i++) {
            set(keys.get(i), values.get(i));
        }
    }

    @Override
    public void append(String key, byte[] value) {
        checkKey(key);
        Objects.requireNonNull(value, "value");
        guarded("append", () -> map.compute(key, (k, cur) -> {
            int curLen = cur == null ? 0 : cur.length;
            if ((long) curLen + value.length > options.maxValueBytes) {
                throw new ArgumentRefused(ctx("append"), "appending " + value.length + " bytes to '" + key
                        + "' would exceed maxValueBytes " + options.maxValueBytes);
            }
            byte[] n = new byte[curLen + value.length];
            if (cur != null) {
                System.arraycopy(cur, 0, n, 0, curLen);
            }
            System.arraycopy(value, 0, n, curLen, value.length);
            return n;
        }));
    }

    /**
     * A snapshot of the entries whose key starts with {@code prefix} (keys in no particular order; an
     * entry changed during the walk appears with one of its values or not at all). Never waits.
     */
    public Map<String, byte[]> entries(String prefix) {
        Objects.requireNonNull(prefix, "prefix");
        return guarded("entries", () -> {
            Map<String, byte[]> out = new HashMap<>();
            for (String k : map.keySet()) {
                if (k.startsWith(prefix)) {
                    byte[] v = map.get(k);
                    if (v != null) {
                        out.put(k, v);
                    }
                }
            }
            return out;
        });
    }

    /** Unmaps the file; deletes it if this instance was opened with {@code deleteOnClose}. Idempotent. */
    @Override
    public synchronized void close() {
        if (closed) {
            return;
        }
        closed = true;
        map.close();
        if (deleteOnClose) {
            try {
                Files.deleteIfExists(file);
            } catch (IOException e) {
                // best effort; the file is in a tmpfs
            }
        }
    }

    @Override
    public String toString() {
        return "ChronicleMapStore{" + file + "}";
    }

    /** Immutable sizing and waiting options. */
    public static final class Options {
        private final long entries;
        private final int averageKeyBytes;
        private final int averageValueBytes;
        private final int maxValueBytes;
        private final Duration timeout;
        private final Duration firstPause;
        private final Duration maxPause;

        private Options(Builder b) {
            this.entries = b.entries;
            this.averageKeyBytes = b.averageKeyBytes;
            this.averageValueBytes = b.averageValueBytes;
            this.maxValueBytes = b.maxValueBytes;
            this.timeout = Objects.requireNonNull(b.timeout, "timeout");
            this.firstPause = Objects.requireNonNull(b.firstPause, "firstPause");
            this.maxPause = Objects.requireNonNull(b.maxPause, "maxPause");
            if (firstPause.isNegative() || firstPause.isZero() || maxPause.compareTo(firstPause) < 0) {
                throw new IllegalArgumentException("invalid store pauses: first=" + firstPause + " max=" + maxPause);
            }
            if (entries < 1 || averageKeyBytes < 1 || averageValueBytes < 1 || maxValueBytes < averageValueBytes) {
                throw new IllegalArgumentException("invalid store sizing: entries=" + entries + " key=" + averageKeyBytes
                        + " value=" + averageValueBytes + " max=" + maxValueBytes);
            }
        }

        public static Builder builder() {
            return new Builder();
        }

        public static Options defaults() {
            return builder().build();
        }

        public long entries() { return entries; }
        public int averageKeyBytes() { return averageKeyBytes; }
        public int averageValueBytes() { return averageValueBytes; }
        public int maxValueBytes() { return maxValueBytes; }
        public Duration timeout() { return timeout; }
        /** The first pause of a wait for a key; each next one is twice as long, up to {@link #maxPause()}. */
        public Duration firstPause() { return firstPause; }
        public Duration maxPause() { return maxPause; }

        /** Mutable builder of {@link Options}. */
        public static final class Builder {
            private long entries = 4096;
            private int averageKeyBytes = 48;
            private int averageValueBytes = 256;
            private int maxValueBytes = 64 * 1024;
            private Duration timeout = Duration.ofSeconds(30);
            private Duration firstPause = Duration.ofNanos(50_000);
            private Duration maxPause = Duration.ofMillis(5);

            private Builder() {
            }

            /** Entries the map is sized for (it can grow somewhat beyond, see Chronicle's bloat factor). */
            public Builder entries(long v) { this.entries = v; return this; }
            public Builder averageKeyBytes(int v) { this.averageKeyBytes = v; return this; }
            public Builder averageValueBytes(int v) { this.averageValueBytes = v; return this; }
            /** Largest value accepted (checked before writing). */
            public Builder maxValueBytes(int v) { this.maxValueBytes = v; return this; }
            public Builder timeout(Duration v) { this.timeout = v; return this; }
            /** How a wait for a key polls: park {@code first}, doubling up to {@code max} (default 50 µs, 5 ms). */
            public Builder pauses(Duration first, Duration max) { this.firstPause = first; this.maxPause = max; return this; }

            public Options build() {
                return new Options(this);
            }
        }
    }
}
