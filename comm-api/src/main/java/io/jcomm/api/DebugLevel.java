package io.jcomm.api;

import java.util.Locale;

/**
 * How much a job checks for programming errors across ranks ({@code JCOMM_DEBUG},
 * {@link DistributedConfig#debug()}).
 */
public enum DebugLevel {
    /** No checks beyond each backend's own (the default). */
    OFF,
    /**
     * Before each collective, ranks compare what they were asked to do: device collectives of a
     * group exchange a fingerprint (operation, dtype, shape, root, sequence number) over the group's
     * CPU group, and the gloo backend's argument check is on even where its options turned it off.
     * A disagreement is a {@link CollectiveMismatchException} on every rank instead of a hang or a
     * crash. Costs one small CPU-group all-gather per device collective.
     */
    DETAIL;

    /**
     * Parses {@code off} or {@code detail} (case and surrounding blanks ignored).
     *
     * @throws IllegalArgumentException for any other value
     */
    public static DebugLevel parse(String value) {
        switch (value.trim().toLowerCase(Locale.ROOT)) {
            case "off": return OFF;
            case "detail": return DETAIL;
            default: throw new IllegalArgumentException("not a debug level (off or detail): '" + value + "'");
        }
    }
}
