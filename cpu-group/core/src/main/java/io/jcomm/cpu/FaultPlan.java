package io.jcomm.cpu;

import io.jcomm.api.config.Settings;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Properties;

/**
 * Faults to inject into the CPU groups of this process, so that an application can test its own
 * recovery the way this SDK's reliability tests do: kill the process, stall an operation, or cut a
 * group's connections, at a chosen rank, group, operation and sequence number. Immutable.
 *
 * <p>Off unless configured: {@link #process()} is read once from the system property
 * {@code jcomm.fault} or, when that is not set, the environment variable {@code JCOMM_FAULT} (the
 * process's configuration, like {@code RANK}); a group can be given its own plan with
 * {@link CpuGroupOptions.Builder#fault(FaultPlan)}. A group that no fault targets costs nothing more
 * per operation than one check of a final field.
 *
 * <h2>Grammar</h2>
 * <pre>
 *   plan   = fault *( ";" fault )                 (an empty text is no fault)
 *   fault  = action "@" key "=" value *( "," key "=" value )
 *   action = "kill" | "stall:" duration | "cut"
 *   duration = digits ( "ms" | "s" | "m" )        e.g. 500ms, 5s, 1m
 * </pre>
 * <table>
 *   <caption>Keys</caption>
 *   <tr><th>key</th><th>meaning</th><th>default</th></tr>
 *   <tr><td>{@code rank}</td><td>the global rank ({@code RANK}) that the fault hits</td><td>required</td></tr>
 *   <tr><td>{@code group}</td><td>group name, exact ({@code tp:0}) or a glob where {@code *} matches any text
 *       ({@code tp:*})</td><td>{@code *}</td></tr>
 *   <tr><td>{@code op}</td><td>operation name as the flight recorder and error messages name it
 *       ({@code allReduce}; {@code all_reduce} and {@code allreduce} are accepted for it), or {@code *}
 *       ({@link #OPERATIONS})</td><td>{@code *}</td></tr>
 *   <tr><td>{@code seq}</td><td>the group's operation sequence number, counted from 1 over every operation
 *       of the group (the flight recorder's number): the fault fires at the first matching operation whose
 *       number is at least this</td><td>1</td></tr>
 *   <tr><td>{@code phase}</td><td>{@code before} the operation communicates, or {@code after} it
 *       completed on this rank</td><td>{@code before}</td></tr>
 * </table>
 *
 * <p>Each fault fires at most once in each group it matches (name one group to have it fire once).
 * Keys and actions are case-insensitive; spaces around tokens are ignored. A malformed text is
 * rejected with an {@link IllegalArgumentException} naming the part at fault; nothing is ignored.
 *
 * <h2>Actions</h2>
 * <ul>
 *   <li>{@code kill}: the process ends at once, as after {@code kill -9} (it sends itself SIGKILL; where
 *       there is no {@code kill} command, {@link Runtime#halt}): exit code {@value #KILL_EXIT_CODE}, no
 *       shutdown hooks, no goodbye to the peers or to the store.</li>
 *   <li>{@code stall:D}: the thread running the operation stops for {@code D} (interrupts do not end
 *       it), then the operation goes on. Peers waiting for this rank meet their deadline; the rest of the
 *       process (other groups, the progress thread) goes on.</li>
 *   <li>{@code cut}: this rank closes its connections of the group at once without a goodbye (a reset,
 *       as a crash looks to the peers); the process lives on, and the operation fails with a
 *       {@link io.jcomm.api.BackendException} naming the fault ({@code phase=after}: the operation
 *       completes, the next one fails). Peers fail with {@link io.jcomm.api.PeerFailureException}.</li>
 * </ul>
 *
 * <p>Example: {@code JCOMM_FAULT='kill@rank=1,group=tp:*,op=allReduce,seq=200;stall:5s@rank=2,group=world'}.
 */
public final class FaultPlan {

    /** Exit code of a process ended by {@code kill} (128 + SIGKILL, as a shell reports {@code kill -9}). */
    public static final int KILL_EXIT_CODE = 137;
    /** No fault. */
    public static final FaultPlan NONE = new FaultPlan(List.of());

    /**
     * The names {@code op} accepts: every operation of a {@link io.jcomm.api.ProcessGroup}, as the flight
     * recorder names it (an asynchronous variant has the name of its synchronous one).
     */
    public static final List<String> OPERATIONS = List.of("barrier", "monitoredBarrier", "broadcast", "allReduce",
            "allGather", "allGatherV", "allToAll", "allToAllV", "gather", "scatter", "reduceScatter", "send", "recv",
            "batchIsendIrecv", "broadcastObject", "allGatherObject", "gatherObject", "sendObject", "recvObject");

    /** The longest stall. */
    public static final Duration MAX_STALL = Duration.ofDays(1);

    /** Any group, any operation. */
    public static final String ANY = "*";

    /** What a fault does. */
    public enum Action {
        /** End the process as {@code kill -9} does (exit code {@value FaultPlan#KILL_EXIT_CODE}). */
        KILL,
        /** Stop the operation's thread for {@link Fault#stall()}. */
        STALL,
        /** Close this rank's connections of the group without a goodbye. */
        CUT
    }

    /** When a fault fires, relative to its operation. */
    public enum Phase {
        /** When the operation starts, before it communicates. */
        BEFORE,
        /** When the operation completed on this rank. */
        AFTER
    }

    /**
     * One fault.
     *
     * @param action what it does
     * @param stall  how long a {@link Action#STALL} lasts (positive, whole milliseconds); {@link Duration#ZERO}
     *               for the others
     * @param rank   the global rank it hits (&ge; 0)
     * @param group  group name or glob ({@code *} matches any text)
     * @param op     an operation of {@link #OPERATIONS}, or {@link #ANY}
     * @param seq    the first sequence number at which it may fire (&ge; 1)
     * @param phase  before or after the operation
     */
    public record Fault(Action action, Duration stall, int rank, String group, String op, long seq, Phase phase) {

        public Fault {
            Objects.requireNonNull(action, "action");
            Objects.requireNonNull(stall, "stall");
            Objects.requireNonNull(group, "group");
            Objects.requireNonNull(op, "op");
            Objects.requireNonNull(phase, "phase");
            if (action == Action.STALL ? stall.isNegative() || stall.isZero() : !stall.isZero()) {
                throw new IllegalArgumentException(action == Action.STALL ? "a stall needs a positive duration, got " + stall
                        : "only a stall has a duration, " + action + " got " + stall);
            }
            if (stall.compareTo(MAX_STALL) > 0) {
                throw new IllegalArgumentException("a stall lasts at most " + MAX_STALL + ", got " + stall);
            }
            if (stall.toNanos() % 1_000_000 != 0) {
                throw new IllegalArgumentException("a stall is a whole number of milliseconds, got " + stall);
            }
            if (rank < 0) {
                throw new IllegalArgumentException("rank must be >= 0, got " + rank);
            }
            if (group.isEmpty()) {
                throw new IllegalArgumentException("group must not be empty (use * for any)");
            }
            if (!op.equals(ANY) && !OPERATIONS.contains(op)) {
                throw new IllegalArgumentException("unknown operation '" + op + "'; known: * " + String.join(" ", OPERATIONS));
            }
            if (seq < 1) {
                throw new IllegalArgumentException("seq must be >= 1, got " + seq);
            }
        }

        /** Whether this fault targets the group named {@code name} on the process of global rank {@code globalRank}. */
        public boolean targets(String name, int globalRank) {
            return globalRank == rank && glob(group, 0, name, 0);
        }

        /** Whether operation {@code name} with sequence number {@code sequence}, in {@code when}, fires it. */
        public boolean firesAt(String name, long sequence, Phase when) {
            return when == phase && sequence >= seq && (op.equals(ANY) || op.equals(name));
        }

        /** The fault in the grammar of {@link FaultPlan}; {@link FaultPlan#parse} reads it back. */
        @Override
        public String toString() {
            String a = switch (action) {
                case KILL -> "kill";
                case CUT -> "cut";
                case STALL -> "stall:" + durationText(stall);
            };
            return a + "@rank=" + rank + ",group=" + group + ",op=" + op + ",seq=" + seq + ",phase="
                    + phase.name().toLowerCase(Locale.ROOT);
        }
    }

    private final List<Fault> faults;

    private FaultPlan(List<Fault> faults) {
        this.faults = List.copyOf(faults);
    }

    /** A plan of the given faults. */
    public static FaultPlan of(List<Fault> faults) {
        return faults.isEmpty() ? NONE : new FaultPlan(faults);
    }

    /**
     * This process's plan: {@code jcomm.fault} when set, else {@code JCOMM_FAULT}, else {@link #NONE}; read once,
     * the first time a group asks.
     *
     * @throws IllegalArgumentException (each call) if the text is malformed; the message names the source
     *         and the bad part
     */
    public static FaultPlan process() {
        if (Configured.ERROR != null) {
            throw new IllegalArgumentException(Configured.ERROR);
        }
        return Configured.PLAN;
    }

    /** Read once into immutable values: the process's configuration, not state. */
    private static final class Configured {
        static final FaultPlan PLAN;
        static final String ERROR;

        static {
            FaultPlan plan = NONE;
            String error = null;
            try {
                plan = from(System.getenv(), System.getProperties());
            } catch (IllegalArgumentException e) {
                error = e.getMessage();
            }
            PLAN = plan;
            ERROR = error;
        }
    }

    /**
     * The plan of {@code properties}' {@code jcomm.fault} when set, else of {@code env}'s {@code JCOMM_FAULT}.
     *
     * @throws IllegalArgumentException if the text is malformed; the message starts with the source's name
     */
    public static FaultPlan from(Map<String, String> env, Properties properties) {
        String prop = Settings.FAULT_PROPERTY.value(properties).orElse(null);
        String source = prop != null ? "-D" + Settings.FAULT_PROPERTY.name() : Settings.FAULT.name();
        String text = prop != null ? prop : Settings.FAULT.value(env).orElse(null);
        if (text == null) {
            return NONE;
        }
        try {
            return parse(text);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(source + ": " + e.getMessage(), e);
        }
    }

    /**
     * Parses the grammar above; an empty or blank text is {@link #NONE}.
     *
     * @throws IllegalArgumentException naming the fault and the part that is wrong
     */
    public static FaultPlan parse(String text) {
        Objects.requireNonNull(text, "text");
        if (text.isBlank()) {
            return NONE;
        }
        List<Fault> out = new ArrayList<>();
        String[] parts = text.split(";", -1);
        for (int i = 0; i < parts.length; i++) {
            String part = parts[i].trim();
            try {
                if (part.isEmpty()) {
                    throw new IllegalArgumentException("empty fault (a ';' too many?)");
                }
                out.add(parseFault(part));
            } catch (IllegalArgumentException e) {
                throw new IllegalArgumentException("fault " + (i + 1) + " '" + part + "': " + e.getMessage(), e);
            }
        }
        return new FaultPlan(out);
    }

    private static Fault parseFault(String text) {
        int at = text.indexOf('@');
        if (at < 0) {
            throw new IllegalArgumentException("expected action@key=value,... (e.g. kill@rank=1,seq=100), found no '@'");
        }
        String actionText = text.substring(0, at).trim();
        Action action;
        Duration stall = Duration.ZERO;
        String a = actionText.toLowerCase(Locale.ROOT);
        if (a.equals("kill")) {
            action = Action.KILL;
        } else if (a.equals("cut")) {
            action = Action.CUT;
        } else if (a.startsWith("stall")) {
            action = Action.STALL;
            String rest = a.substring("stall".length()).trim();
            if (!rest.startsWith(":")) {
                throw new IllegalArgumentException("stall needs a duration: stall:5s, stall:500ms");
            }
            stall = parseDuration(rest.substring(1).trim());
        } else {
            throw new IllegalArgumentException("unknown action '" + actionText + "'; known: kill, stall:DURATION, cut");
        }
        Integer rank = null;
        String group = ANY;
        String op = ANY;
        long seq = 1;
        Phase phase = Phase.BEFORE;
        List<String> seen = new ArrayList<>();
        for (String kv : text.substring(at + 1).split(",", -1)) {
            int eq = kv.indexOf('=');
            if (eq < 0) {
                throw new IllegalArgumentException("'" + kv.trim() + "' is not key=value");
            }
            String key = kv.substring(0, eq).trim().toLowerCase(Locale.ROOT);
            String value = kv.substring(eq + 1).trim();
            if (value.isEmpty()) {
                throw new IllegalArgumentException("empty value for " + key);
            }
            if (seen.contains(key)) {
                throw new IllegalArgumentException("key '" + key + "' given twice");
            }
            seen.add(key);
            switch (key) {
                case "rank" -> rank = (int) parseLong(key, value, 0, Integer.MAX_VALUE);
                case "group" -> group = value;
                case "op" -> op = operation(value);
                case "seq" -> seq = parseLong(key, value, 1, Long.MAX_VALUE);
                case "phase" -> phase = switch (value.toLowerCase(Locale.ROOT)) {
                    case "before" -> Phase.BEFORE;
                    case "after" -> Phase.AFTER;
                    default -> throw new IllegalArgumentException("phase must be before or after, got '" + value + "'");
                };
                default -> throw new IllegalArgumentException("unknown key '" + kv.substring(0, eq).trim()
                        + "'; known: rank, group, op, seq, phase");
            }
        }
        if (rank == null) {
            throw new IllegalArgumentException("rank=N is required (the global rank the fault hits)");
        }
        return new Fault(action, stall, rank, group, op, seq, phase);
    }

    /** The canonical name of an operation written as {@code allReduce}, {@code all_reduce} or {@code allreduce}. */
    private static String operation(String value) {
        if (value.equals(ANY)) {
            return ANY;
        }
        String key = value.replace("_", "").toLowerCase(Locale.ROOT);
        for (String o : OPERATIONS) {
            if (o.toLowerCase(Locale.ROOT).equals(key)) {
                return o;
            }
        }
        throw new IllegalArgumentException("unknown operation '" + value + "'; known: * " + String.join(" ", OPERATIONS));
    }

    private static long parseLong(String key, String value, long min, long max) {
        long v;
        try {
            v = Long.parseLong(value);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(key + " is not an integer: '" + value + "'", e);
        }
        if (v < min || v > max) {
            throw new IllegalArgumentException(key + " must be in [" + min + ", " + max + "], got " + v);
        }
        return v;
    }

    private static Duration parseDuration(String text) {
        int i = 0;
        while (i < text.length() && Character.isDigit(text.charAt(i))) {
            i++;
        }
        String unit = text.substring(i).trim();
        if (i == 0) {
            throw new IllegalArgumentException("stall duration '" + text + "' must be digits and a unit: 500ms, 5s, 1m");
        }
        long n;
        try {
            n = Long.parseLong(text.substring(0, i));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("stall duration '" + text + "' is too large", e);
        }
        Duration d;
        try {
            d = switch (unit) {
                case "ms" -> Duration.ofMillis(n);
                case "s" -> Duration.ofSeconds(n);
                case "m" -> Duration.ofMinutes(n);
                default -> throw new IllegalArgumentException("stall duration '" + text + "' needs a unit ms, s or m");
            };
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException("stall duration '" + text + "' is too large", e);
        }
        if (d.isZero()) {
            throw new IllegalArgumentException("stall duration must be positive, got '" + text + "'");
        }
        return d;
    }

    private static String durationText(Duration d) {
        long ms = d.toMillis();
        if (ms % 60_000 == 0) {
            return ms / 60_000 + "m";
        }
        return ms % 1000 == 0 ? ms / 1000 + "s" : ms + "ms";
    }

    /** Whether {@code pattern} from {@code p} matches {@code s} from {@code i}; {@code *} matches any text. */
    private static boolean glob(String pattern, int p, String s, int i) {
        while (p < pattern.length()) {
            char c = pattern.charAt(p);
            if (c == '*') {
                for (int k = i; k <= s.length(); k++) {
                    if (glob(pattern, p + 1, s, k)) {
                        return true;
                    }
                }
                return false;
            }
            if (i >= s.length() || s.charAt(i) != c) {
                return false;
            }
            p++;
            i++;
        }
        return i == s.length();
    }

    /** The faults, in the order given. */
    public List<Fault> faults() {
        return faults;
    }

    /** Whether there is no fault. */
    public boolean isEmpty() {
        return faults.isEmpty();
    }

    /** The faults that target the group {@code name} on the process of global rank {@code globalRank}. */
    public List<Fault> targeting(String name, int globalRank) {
        List<Fault> out = new ArrayList<>();
        for (Fault f : faults) {
            if (f.targets(name, globalRank)) {
                out.add(f);
            }
        }
        return out;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof FaultPlan && ((FaultPlan) o).faults.equals(faults);
    }

    @Override
    public int hashCode() {
        return faults.hashCode();
    }

    /** The plan in its grammar ({@code ""} for {@link #NONE}); {@link #parse} reads it back to an equal plan. */
    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder();
        for (Fault f : faults) {
            if (sb.length() > 0) {
                sb.append(';');
            }
            sb.append(f);
        }
        return sb.toString();
    }
}
