package io.jcomm.runtime.recorder;

import io.jcomm.api.CommException;
import io.jcomm.runtime.recorder.RecorderReader.GroupState;
import io.jcomm.runtime.recorder.RecorderReader.Snapshot;
import io.jcomm.api.store.Store;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * A {@link FlightRecorder} snapshot as text that travels through the job's store, for ranks whose
 * recorder file another host cannot read: error messages ({@link StatePublisher}) and {@code commrun}'s
 * merged stall report. Timestamps travel as ages relative to the moment of writing, together with
 * that moment in wall-clock milliseconds, so that the reader maps them onto its own
 * {@code System.nanoTime()}; only the skew of the two hosts' wall clocks (NTP: milliseconds) enters.
 *
 * <pre>
 *   jcomm-state 1
 *   host NAME
 *   pid PID
 *   at EPOCH_MILLIS
 *   g GROUP \t RANK \t SIZE \t STARTED \t FINISHED \t OP \t STATE \t SEQ \t START_AGE_NS \t END_AGE_NS \t ASYNC \t BYTES
 * </pre>
 */
public final class RecorderSummary {

    private static final String MAGIC = "jcomm-state 1";

    /** A summary as read: where it comes from, and its groups on the reader's clock. */
    public record Decoded(String host, long pid, long writtenEpochMillis, List<GroupState> groups) {

        /** What the process is doing now, as {@link RecorderReader#describe} says it. */
        public String describe() {
            return RecorderReader.describe(groups, System.nanoTime());
        }

        /** As a snapshot of the reader's clock (no file). */
        public Snapshot snapshot() {
            return new Snapshot(pid, null, groups);
        }
    }

    private RecorderSummary() {
    }

    /** {@code snap}, written now, as a summary from host {@code host}. */
    public static String encode(Snapshot snap, String host) {
        return encode(snap.groups(), snap.pid(), host, System.nanoTime(), System.currentTimeMillis());
    }

    /** {@code groups}, read at {@code nowNanos} (= {@code nowEpochMillis}), as a summary. */
    public static String encode(List<GroupState> groups, long pid, String host, long nowNanos, long nowEpochMillis) {
        StringBuilder sb = new StringBuilder(MAGIC).append('\n');
        sb.append("host ").append(clean(host)).append('\n');
        sb.append("pid ").append(pid).append('\n');
        sb.append("at ").append(nowEpochMillis).append('\n');
        for (GroupState g : groups) {
            sb.append("g ").append(clean(g.group())).append('\t').append(g.rank()).append('\t').append(g.size()).append('\t')
                    .append(g.started()).append('\t').append(g.finished()).append('\t').append(clean(g.op())).append('\t')
                    .append(g.state()).append('\t').append(g.seq()).append('\t')
                    .append(g.seq() == 0 ? 0 : nowNanos - g.startNanos()).append('\t')
                    .append(g.seq() == 0 || g.running() ? 0 : nowNanos - g.endNanos()).append('\t')
                    .append(g.async() ? 1 : 0).append('\t').append(g.bytes()).append('\n');
        }
        return sb.toString();
    }

    private static String clean(String s) {
        return s.replace('\t', ' ').replace('\n', ' ');
    }

    /** Decodes a summary onto this host's clock; empty when {@code text} is not one. */
    public static Optional<Decoded> decode(String text) {
        return decode(text, System.nanoTime(), System.currentTimeMillis());
    }

    /** Decodes a summary read at {@code nowNanos} (= {@code nowEpochMillis} on this host's wall clock). */
    public static Optional<Decoded> decode(String text, long nowNanos, long nowEpochMillis) {
        String[] lines = text.split("\n");
        if (lines.length < 4 || !lines[0].equals(MAGIC)) {
            return Optional.empty();
        }
        try {
            String host = field(lines[1], "host ");
            long pid = Long.parseLong(field(lines[2], "pid "));
            long at = Long.parseLong(field(lines[3], "at "));
            // the writer's "now" on this host's nanoTime (wall-clock skew between the hosts enters here)
            long writtenNanos = nowNanos - Math.max(0, nowEpochMillis - at) * 1_000_000L;
            List<GroupState> groups = new ArrayList<>();
            for (int i = 4; i < lines.length; i++) {
                if (!lines[i].startsWith("g ")) {
                    continue;
                }
                String[] f = lines[i].substring(2).split("\t", -1);
                if (f.length < 12) {
                    return Optional.empty();
                }
                groups.add(new GroupState(f[0], Integer.parseInt(f[1]), Integer.parseInt(f[2]), Long.parseLong(f[3]),
                        Long.parseLong(f[4]), f[5], Integer.parseInt(f[6]), Long.parseLong(f[7]),
                        writtenNanos - Long.parseLong(f[8]), writtenNanos - Long.parseLong(f[9]), f[10].equals("1"),
                        Long.parseLong(f[11])));
            }
            return Optional.of(new Decoded(host, pid, at, List.copyOf(groups)));
        } catch (RuntimeException e) {
            return Optional.empty();
        }
    }

    private static String field(String line, String name) {
        if (!line.startsWith(name)) {
            throw new IllegalArgumentException("expected " + name.trim());
        }
        return line.substring(name.length());
    }

    /**
     * The summary under {@code key} in {@code store}: at once when it is there, else waiting up to
     * {@code wait} for it to appear; empty when it does not, or the store cannot be read (the store's own
     * failures are not this caller's: an error message is being written).
     */
    public static Optional<Decoded> fetch(Store store, String key, Duration wait) {
        try {
            byte[] v;
            if (store.check(List.of(key))) {
                v = store.get(key, Duration.ofSeconds(1));
            } else if (wait.isZero() || wait.isNegative()) {
                return Optional.empty();
            } else {
                v = store.get(key, wait);
            }
            return decode(new String(v, StandardCharsets.UTF_8));
        } catch (CommException | IllegalStateException e) {
            return Optional.empty();
        }
    }
}
