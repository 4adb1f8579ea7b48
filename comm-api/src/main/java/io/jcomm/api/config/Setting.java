package io.jcomm.api.config;

import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.Properties;

/**
 * One setting of jcomm read from outside the program: an environment variable or a system property,
 * declared once in {@link Settings} with its type, default and meaning. Code reads a setting only through
 * its declaration ({@link #value(Map)}, {@link #fromProcess()}), never by spelling its name, so that the
 * table in {@code docs/CONFIGURATION.md}, which a test checks against {@link Settings#all()}, lists every
 * setting any module reads.
 *
 * <p>Instances are immutable.
 */
public final class Setting {

    /** Where a setting's value comes from. */
    public enum Source {
        /** An environment variable of the JVM. */
        ENVIRONMENT,
        /** A system property of the JVM ({@code -Dname=value}). */
        PROPERTY,
        /** An environment variable read by the shell scripts under {@code bin/} or {@code scripts/}, not by Java. */
        SCRIPT
    }

    private final String name;
    private final Source source;
    private final String type;
    private final String defaultText;
    private final String meaning;
    private final String readBy;

    Setting(String name, Source source, String type, String defaultText, String meaning, String readBy) {
        this.name = Objects.requireNonNull(name, "name");
        this.source = Objects.requireNonNull(source, "source");
        this.type = Objects.requireNonNull(type, "type");
        this.defaultText = Objects.requireNonNull(defaultText, "defaultText");
        this.meaning = Objects.requireNonNull(meaning, "meaning");
        this.readBy = Objects.requireNonNull(readBy, "readBy");
    }

    /** The variable's or property's name ({@code JCOMM_TIMEOUT_MS}, {@code jcomm.receivePool.mib}). */
    public String name() {
        return name;
    }

    /** Where the value comes from. */
    public Source source() {
        return source;
    }

    /** The values it takes, in words ({@code milliseconds}, {@code auto | tcp | gloo}, {@code path}). */
    public String type() {
        return type;
    }

    /** The default, in words (what applies when the setting is unset or blank). */
    public String defaultText() {
        return defaultText;
    }

    /** What the setting does (Markdown, one paragraph). */
    public String meaning() {
        return meaning;
    }

    /** Which part of jcomm reads it, and when. */
    public String readBy() {
        return readBy;
    }

    /**
     * The setting's value in {@code env} (an environment, or a map of system properties), trimmed; empty
     * when it is absent or blank.
     */
    public Optional<String> value(Map<String, String> env) {
        return nonBlank(env.get(name));
    }

    /** The setting's value in {@code properties}, trimmed; empty when it is absent or blank. */
    public Optional<String> value(Properties properties) {
        return nonBlank(properties.getProperty(name));
    }

    /** {@link #value(Map)}, or {@code fallback} when it is empty. */
    public String valueOr(Map<String, String> env, String fallback) {
        return value(env).orElse(fallback);
    }

    /**
     * {@link #value(Map)} as an integer.
     *
     * @throws IllegalArgumentException naming the setting when the value is not an integer
     */
    public OptionalInt intValue(Map<String, String> env) {
        Optional<String> v = value(env);
        if (v.isEmpty()) {
            return OptionalInt.empty();
        }
        try {
            return OptionalInt.of(Integer.parseInt(v.get()));
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + " is not an integer: '" + v.get() + "'", e);
        }
    }

    /**
     * {@link #value(Map)} as a flag: {@code 1}, {@code true}, {@code yes} or {@code 0}, {@code false},
     * {@code no} (any case).
     *
     * @throws IllegalArgumentException naming the setting for any other value
     */
    public Optional<Boolean> flag(Map<String, String> env) {
        Optional<String> v = value(env);
        if (v.isEmpty()) {
            return Optional.empty();
        }
        switch (v.get().toLowerCase(Locale.ROOT)) {
            case "1": case "true": case "yes": return Optional.of(Boolean.TRUE);
            case "0": case "false": case "no": return Optional.of(Boolean.FALSE);
            default: throw new IllegalArgumentException(name + " is not 0/1/true/false: '" + v.get() + "'");
        }
    }

    /**
     * {@link #value(Map)} as a constant of {@code type}, matched by name in any case.
     *
     * @throws IllegalArgumentException naming the setting and the accepted values for any other value
     */
    public <E extends Enum<E>> Optional<E> enumValue(Map<String, String> env, Class<E> type) {
        Optional<String> v = value(env);
        if (v.isEmpty()) {
            return Optional.empty();
        }
        StringBuilder known = new StringBuilder();
        for (E e : type.getEnumConstants()) {
            if (e.name().equalsIgnoreCase(v.get())) {
                return Optional.of(e);
            }
            known.append(known.length() == 0 ? "" : ", ").append(e.name().toLowerCase(Locale.ROOT));
        }
        throw new IllegalArgumentException(name + " is not one of " + known + ": '" + v.get() + "'");
    }

    /**
     * The value this process was given: its environment variable ({@link Source#ENVIRONMENT}) or its system
     * property ({@link Source#PROPERTY}), trimmed; empty when absent or blank.
     *
     * @throws IllegalStateException for a {@link Source#SCRIPT} setting, which no JVM reads
     */
    public Optional<String> fromProcess() {
        switch (source) {
            case ENVIRONMENT:
                return nonBlank(System.getenv(name));
            case PROPERTY:
                return nonBlank(System.getProperty(name));
            default:
                throw new IllegalStateException(name + " is read by the shell scripts, not by the JVM");
        }
    }

    /**
     * Whether {@code value} turns a feature off: {@code off}, {@code 0} or {@code false} (any case), the
     * spelling every on/off setting of jcomm accepts.
     */
    public static boolean isOff(String value) {
        String v = value.trim().toLowerCase(Locale.ROOT);
        return v.equals("off") || v.equals("0") || v.equals("false");
    }

    private static Optional<String> nonBlank(String v) {
        return v == null || v.isBlank() ? Optional.empty() : Optional.of(v.trim());
    }

    @Override
    public String toString() {
        return name;
    }
}
