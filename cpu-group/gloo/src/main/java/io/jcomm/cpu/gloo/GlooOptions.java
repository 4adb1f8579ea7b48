package io.jcomm.cpu.gloo;

import io.jcomm.cpu.BackendOptions;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * Typed, validated options of the {@code gloo} backend (the keys are {@link GlooBackend}'s
 * {@code *_OPTION} constants, where each is documented). Give them to a group with
 * {@link io.jcomm.cpu.CpuGroupOptions.Builder#options(BackendOptions)}, e.g.
 * {@code .options(GlooOptions.builder().devices(2).ifname("lo").build())}; the backend reads text options
 * through {@link #fromMap(Map)}, so both meet the same rules. Options left unset take their defaults (and are
 * absent from {@link #asMap()}).
 *
 * <p>Immutable; equal when the same options are set to the same values.
 */
public final class GlooOptions implements BackendOptions {

    /** Every key of the gloo backend. */
    public static final Set<String> KEYS = Set.of(GlooBackend.DEVICES_OPTION, GlooBackend.IFNAME_OPTION,
            GlooBackend.HOSTNAME_OPTION, GlooBackend.GOODBYE_OPTION, GlooBackend.TORCH_HALF_OPTION,
            GlooBackend.CHECK_ARGS_OPTION, GlooBackend.LOOP_NICE_OPTION);

    private static final String PREFIX = GlooBackend.NAME + ".";
    private static final int LOOP_NICE_MAX = 19;

    private final Integer devices;
    private final String ifname;
    private final String hostname;
    private final Boolean goodbye;
    private final Boolean torchHalf;
    private final Boolean checkArgs;
    private final Integer loopNice;
    private final Map<String, String> map;

    private GlooOptions(Builder b) {
        devices = checkRange(GlooBackend.DEVICES_OPTION, b.devices, 1, GlooBackend.DEVICES_MAX);
        ifname = b.ifname;
        hostname = b.hostname;
        goodbye = b.goodbye;
        torchHalf = b.torchHalf;
        checkArgs = b.checkArgs;
        loopNice = checkRange(GlooBackend.LOOP_NICE_OPTION, b.loopNice, 0, LOOP_NICE_MAX);
        Map<String, String> m = new LinkedHashMap<>();
        put(m, GlooBackend.DEVICES_OPTION, devices);
        put(m, GlooBackend.IFNAME_OPTION, ifname);
        put(m, GlooBackend.HOSTNAME_OPTION, hostname);
        put(m, GlooBackend.GOODBYE_OPTION, goodbye);
        put(m, GlooBackend.TORCH_HALF_OPTION, torchHalf);
        put(m, GlooBackend.CHECK_ARGS_OPTION, checkArgs);
        put(m, GlooBackend.LOOP_NICE_OPTION, loopNice);
        map = Collections.unmodifiableMap(m);
    }

    /** A builder with nothing set (every option at its default). */
    public static Builder builder() {
        return new Builder();
    }

    /**
     * Parses and validates the {@code gloo.*} options of {@code options} (text: surrounding blanks and the
     * case of {@code true}/{@code false} ignored; a blank value is unset). Keys outside {@code gloo.} are left
     * alone, as are {@code null} values.
     *
     * @throws IllegalArgumentException naming the key, if a value is malformed or out of range, or if a key
     *                                  under {@code gloo.} is unknown (the message lists the known ones)
     */
    public static GlooOptions fromMap(Map<String, String> options) {
        Builder b = builder();
        for (Map.Entry<String, String> e : options.entrySet()) {
            String key = e.getKey();
            String v = e.getValue();
            if (!key.toLowerCase(Locale.ROOT).startsWith(PREFIX)) {
                continue;
            }
            if (!KEYS.contains(key)) {
                throw new IllegalArgumentException("unknown option '" + key + "' of CPU backend " + GlooBackend.NAME
                        + "; known: " + new TreeSet<>(KEYS));
            }
            if (v == null || v.isBlank()) {
                continue;
            }
            switch (key) {
                case GlooBackend.DEVICES_OPTION -> b.devices(parseInt(key, v));
                case GlooBackend.IFNAME_OPTION -> b.ifname(v);
                case GlooBackend.HOSTNAME_OPTION -> b.hostname(v);
                case GlooBackend.GOODBYE_OPTION -> b.goodbye(parseBoolean(key, v));
                case GlooBackend.TORCH_HALF_OPTION -> b.torchHalf(parseBoolean(key, v));
                case GlooBackend.CHECK_ARGS_OPTION -> b.checkArgs(parseBoolean(key, v));
                case GlooBackend.LOOP_NICE_OPTION -> b.loopNice(parseInt(key, v));
                default -> throw new IllegalStateException(key);
            }
        }
        return b.build();
    }

    /** {@code gloo}. */
    @Override
    public String backend() {
        return GlooBackend.NAME;
    }

    /** The options that were set (unmodifiable). */
    @Override
    public Map<String, String> asMap() {
        return map;
    }

    /** {@value GlooBackend#DEVICES_OPTION}. */
    public int devices() {
        return devices != null ? devices : GlooBackend.DEVICES_DEFAULT;
    }

    /** {@value GlooBackend#IFNAME_OPTION}; empty: none. */
    public Optional<String> ifname() {
        return Optional.ofNullable(ifname);
    }

    /** {@value GlooBackend#HOSTNAME_OPTION}; empty: the group's hostname. */
    public Optional<String> hostname() {
        return Optional.ofNullable(hostname);
    }

    /** {@value GlooBackend#GOODBYE_OPTION}. */
    public boolean goodbye() {
        return goodbye != null ? goodbye : GlooBackend.GOODBYE_DEFAULT;
    }

    /** {@value GlooBackend#TORCH_HALF_OPTION}. */
    public boolean torchHalf() {
        return torchHalf != null && torchHalf;
    }

    /** {@value GlooBackend#CHECK_ARGS_OPTION}. */
    public boolean checkArgs() {
        return checkArgs != null ? checkArgs : GlooBackend.CHECK_ARGS_DEFAULT;
    }

    /** {@value GlooBackend#LOOP_NICE_OPTION}. */
    public int loopNice() {
        return loopNice != null ? loopNice : GlooBackend.LOOP_NICE_DEFAULT;
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof GlooOptions other && map.equals(other.map);
    }

    @Override
    public int hashCode() {
        return map.hashCode();
    }

    @Override
    public String toString() {
        return "GlooOptions" + map;
    }

    private static void put(Map<String, String> m, String key, Object value) {
        if (value != null) {
            m.put(key, value.toString());
        }
    }

    private static Integer checkRange(String key, Integer v, int min, int max) {
        if (v != null && (v < min || v > max)) {
            throw new IllegalArgumentException(key + "=" + v + " is not in [" + min + ", " + max + "]");
        }
        return v;
    }

    private static int parseInt(String key, String v) {
        try {
            return Integer.parseInt(v.trim());
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(key + "=" + v + " is not an integer", e);
        }
    }

    private static boolean parseBoolean(String key, String v) {
        switch (v.trim().toLowerCase(Locale.ROOT)) {
            case "true": return true;
            case "false": return false;
            default: throw new IllegalArgumentException(key + "=" + v + " is not true or false");
        }
    }

    private static String blankToNull(String s) {
        return s == null || s.isBlank() ? null : s.trim();
    }

    /** Mutable builder; {@link #build()} validates and returns immutable options. Every option starts unset. */
    public static final class Builder {
        private Integer devices;
        private String ifname;
        private String hostname;
        private Boolean goodbye;
        private Boolean torchHalf;
        private Boolean checkArgs;
        private Integer loopNice;

        private Builder() {
        }

        /** {@value GlooBackend#DEVICES_OPTION}: 1 to {@value GlooBackend#DEVICES_MAX}. */
        public Builder devices(int v) { this.devices = v; return this; }
        /** {@value GlooBackend#IFNAME_OPTION} (trimmed); {@code null} or blank: unset. */
        public Builder ifname(String v) { this.ifname = blankToNull(v); return this; }
        /** {@value GlooBackend#HOSTNAME_OPTION} (trimmed); {@code null} or blank: unset. */
        public Builder hostname(String v) { this.hostname = blankToNull(v); return this; }
        /** {@value GlooBackend#GOODBYE_OPTION}. */
        public Builder goodbye(boolean v) { this.goodbye = v; return this; }
        /** {@value GlooBackend#TORCH_HALF_OPTION}. */
        public Builder torchHalf(boolean v) { this.torchHalf = v; return this; }
        /** {@value GlooBackend#CHECK_ARGS_OPTION}. */
        public Builder checkArgs(boolean v) { this.checkArgs = v; return this; }
        /** {@value GlooBackend#LOOP_NICE_OPTION}: 0 to 19. */
        public Builder loopNice(int v) { this.loopNice = v; return this; }

        /**
         * Validated options.
         *
         * @throws IllegalArgumentException naming the key, if a value is out of range
         */
        public GlooOptions build() {
            return new GlooOptions(this);
        }
    }
}
