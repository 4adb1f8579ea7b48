package io.jcomm.api.launch;

import java.util.Map;

/** Reading launcher variables: a blank value counts as absent, and a malformed one is an error naming it. */
final class Env {

    private final Map<String, String> env;

    Env(Map<String, String> env) {
        this.env = env;
    }

    /** The trimmed value of {@code name}, or {@code null} when it is absent or blank. */
    String get(String name) {
        String v = env.get(name);
        return v == null || v.isBlank() ? null : v.trim();
    }

    boolean has(String name) {
        return get(name) != null;
    }

    /** The first of {@code names} that is set, or {@code null}. */
    String firstSet(String... names) {
        for (String n : names) {
            if (has(n)) {
                return n;
            }
        }
        return null;
    }

    /** {@code name} as an int of at least {@code min}, or {@link LaunchInfo#UNKNOWN} when absent. */
    int intOf(String name, int min) {
        String v = get(name);
        if (v == null) {
            return LaunchInfo.UNKNOWN;
        }
        return parse(name, v, min);
    }

    static int parse(String name, String v, int min) {
        int n;
        try {
            n = Integer.parseInt(v);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException(name + " is not an integer: '" + v + "'", e);
        }
        if (n < min) {
            throw new IllegalArgumentException(name + " must be >= " + min + ", got " + n);
        }
        return n;
    }

    /** {@code name} as a non-negative long, or -1 when absent. */
    long longOf(String name) {
        String v = get(name);
        if (v == null) {
            return -1;
        }
        try {
            long n = Long.parseLong(v);
            if (n >= 0) {
                return n;
            }
        } catch (NumberFormatException e) {
            // reported below
        }
        throw new IllegalArgumentException(name + " is not a non-negative integer: '" + v + "'");
    }
}
