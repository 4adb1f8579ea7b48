package io.jcomm.kvcache;

import io.jcomm.api.HostIdentity;
import io.jcomm.api.config.Setting;
import io.jcomm.api.config.Settings;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.time.Duration;
import java.util.HexFormat;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;

/**
 * How a process opens the host's block index ({@link HostBlockIndex}). Immutable; made with
 * {@link #builder(Path)} or {@link #fromEnvironment()}.
 */
public final class IndexOptions {

    /** Default bound in entries. */
    public static final long DEFAULT_MAX_ENTRIES = 1L << 20;
    /** Smallest and largest bound. */
    public static final long MIN_MAX_ENTRIES = 16;
    public static final long MAX_MAX_ENTRIES = 1L << 28;

    private final Path file;
    private final long maxEntries;
    private final Duration sweepInterval;
    private final int pendingPublishes;

    private IndexOptions(Builder b) {
        this.file = Objects.requireNonNull(b.file, "file");
        this.maxEntries = b.maxEntries;
        this.sweepInterval = Objects.requireNonNull(b.sweepInterval, "sweepInterval");
        this.pendingPublishes = b.pendingPublishes;
        if (maxEntries < MIN_MAX_ENTRIES || maxEntries > MAX_MAX_ENTRIES) {
            throw new IllegalArgumentException("maxEntries is " + MIN_MAX_ENTRIES + ".." + MAX_MAX_ENTRIES + ", got " + maxEntries);
        }
        if (sweepInterval.isNegative() || pendingPublishes < 0 || pendingPublishes > 1 << 20) {
            throw new IllegalArgumentException("sweepInterval " + sweepInterval + ", pendingPublishes " + pendingPublishes);
        }
    }

    public static Builder builder(Path file) {
        return new Builder(file);
    }

    /**
     * The options this process's environment gives ({@link Settings#KV_INDEX},
     * {@link Settings#KV_INDEX_ENTRIES}); empty when the index is turned off.
     */
    public static Optional<IndexOptions> fromEnvironment() {
        return fromEnvironment(System.getenv(), HostIdentity.local());
    }

    /** {@link #fromEnvironment()} of the given environment and host identity. */
    public static Optional<IndexOptions> fromEnvironment(Map<String, String> env, String hostId) {
        Optional<String> path = Settings.KV_INDEX.value(env);
        if (path.isPresent() && Setting.isOff(path.get())) {
            return Optional.empty();
        }
        Builder b = builder(path.map(Path::of).orElse(defaultFile(hostId)));
        Settings.KV_INDEX_ENTRIES.intValue(env).ifPresent(b::maxEntries);
        return Optional.of(b.build());
    }

    /** {@code /dev/shm/jcomm-kv-index-<first 16 hex digits of SHA-256(hostId)>.cmap}. */
    public static Path defaultFile(String hostId) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(hostId.getBytes(StandardCharsets.UTF_8));
            return Path.of("/dev/shm", "jcomm-kv-index-" + HexFormat.of().formatHex(d, 0, 8) + ".cmap");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JVM has SHA-256", e);
        }
    }

    /** The map's file. */
    public Path file() {
        return file;
    }

    /** The bound in entries, when this process creates the file. */
    public long maxEntries() {
        return maxEntries;
    }

    /** How often the background sweep removes dead owners' entries; zero: no background sweep. */
    public Duration sweepInterval() {
        return sweepInterval;
    }

    /** Publishes kept while the map is being opened in the background (more are dropped, and counted). */
    public int pendingPublishes() {
        return pendingPublishes;
    }

    @Override
    public String toString() {
        return "IndexOptions[" + file + ", " + maxEntries + " entries, sweep every " + sweepInterval + "]";
    }

    /** Mutable builder of {@link IndexOptions}. */
    public static final class Builder {
        private final Path file;
        private long maxEntries = DEFAULT_MAX_ENTRIES;
        private Duration sweepInterval = Duration.ofSeconds(5);
        private int pendingPublishes = 4096;

        private Builder(Path file) {
            this.file = file;
        }

        /** The bound in entries (16 .. 2^28; default 2^20), used when this process creates the file. */
        public Builder maxEntries(long v) {
            this.maxEntries = v;
            return this;
        }

        /** The background sweep's period (default 5 s; zero: none). */
        public Builder sweepInterval(Duration v) {
            this.sweepInterval = v;
            return this;
        }

        /** Publishes kept while opening in the background (default 4,096). */
        public Builder pendingPublishes(int v) {
            this.pendingPublishes = v;
            return this;
        }

        public IndexOptions build() {
            return new IndexOptions(this);
        }
    }
}
