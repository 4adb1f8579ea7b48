package io.jcomm.testkit;

import java.util.Arrays;
import java.util.Locale;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Assertions;
import org.junit.jupiter.api.Assumptions;

/**
 * Optional test preconditions (a native library, a Python package) that a CI machine must not skip.
 *
 * <p>A test whose precondition is missing calls {@link #assume}: on a developer's machine it is
 * skipped with the reason, but where {@code -Djcomm.require} or the environment variable
 * {@code JCOMM_REQUIRE} names the precondition (comma-separated, e.g. {@code gloo,torch}; {@code .ci/run}
 * sets it for what it installs) it fails instead, so that a broken installation cannot turn a suite
 * green by skipping it. The environment variable reaches forked test JVMs and their workers without
 * any plugin configuration.
 */
public final class Requirements {

    /** The system property; the environment variable is {@value #ENV}. */
    public static final String PROPERTY = "jcomm.require";
    public static final String ENV = "JCOMM_REQUIRE";

    private Requirements() {
    }

    /** The preconditions this run requires (lower case), from the property and the environment variable. */
    public static Set<String> required() {
        return parse(System.getProperty(PROPERTY, "") + "," + System.getenv().getOrDefault(ENV, ""));
    }

    static Set<String> parse(String list) {
        return Arrays.stream(list.split(",")).map(s -> s.strip().toLowerCase(Locale.ROOT)).filter(s -> !s.isEmpty())
                .collect(Collectors.toUnmodifiableSet());
    }

    /**
     * Continues when {@code available}; otherwise fails the test if this run requires {@code what}, else
     * skips it with {@code reason}.
     */
    public static void assume(String what, boolean available, String reason) {
        check(what, available, reason, required());
    }

    static void check(String what, boolean available, String reason, Set<String> required) {
        if (available) {
            return;
        }
        if (required.contains(what.toLowerCase(Locale.ROOT))) {
            Assertions.fail(what + " is required here (" + PROPERTY + "/" + ENV + "=" + String.join(",", required)
                    + ") but unavailable: " + reason);
        }
        Assumptions.abort(what + " unavailable: " + reason);
    }
}
