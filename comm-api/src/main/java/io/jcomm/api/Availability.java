package io.jcomm.api;

import java.util.Objects;

/**
 * Whether a provider can run in this process, and why (not).
 *
 * @param available true when the provider or backend can be created can succeed
 * @param reason    a human-readable explanation, e.g. {@code "libnccl.so.2 not found (set
 *                  LD_LIBRARY_PATH or -Djcomm.nccl.libdir)"}, or a description of what was found
 */
public record Availability(boolean available, String reason) {

    public Availability {
        Objects.requireNonNull(reason, "reason");
    }

    public static Availability available(String detail) {
        return new Availability(true, detail);
    }

    public static Availability unavailable(String reason) {
        return new Availability(false, reason);
    }

    @Override
    public String toString() {
        return (available ? "available: " : "unavailable: ") + reason;
    }
}
