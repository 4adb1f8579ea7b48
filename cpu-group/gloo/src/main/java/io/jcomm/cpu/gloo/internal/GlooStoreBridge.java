package io.jcomm.cpu.gloo.internal;

import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.store.Store;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;

/**
 * What the native {@code gloo::rendezvous::Store} calls back into during {@code connectFullMesh}:
 * a {@link Store} (already prefixed for one device of one group) and the deadline of the
 * connection set-up. Every wait is bounded by that deadline, also gloo's {@code get} and
 * {@code wait} without a timeout. Exceptions propagate unchanged to the Java caller of
 * {@link GlooNative#connect}.
 */
public final class GlooStoreBridge {

    private final Store store;
    private final Deadline deadline;
    private final OpContext context;

    public GlooStoreBridge(Store store, Deadline deadline, OpContext context) {
        this.store = Objects.requireNonNull(store, "store");
        this.deadline = Objects.requireNonNull(deadline, "deadline");
        this.context = Objects.requireNonNull(context, "context");
    }

    private Duration remaining(String what) {
        if (deadline.isExpired()) {
            throw new CommTimeoutException(context, "rendezvous deadline passed before " + what);
        }
        return deadline.remaining();
    }

    /** Called from native code. */
    void set(String key, byte[] value) {
        store.set(key, value);
    }

    /** Called from native code: gloo reads a key that another rank sets. */
    byte[] get(String key) {
        return store.get(key, remaining("get(" + key + ")"));
    }

    /** Called from native code; a negative timeout means "until the rendezvous deadline". */
    void await(String[] keys, long timeoutMillis) {
        Duration left = remaining("wait" + Arrays.toString(keys));
        Duration d = timeoutMillis < 0 ? left : min(left, Duration.ofMillis(timeoutMillis));
        store.wait(List.of(keys), d);
    }

    private static Duration min(Duration a, Duration b) {
        return a.compareTo(b) <= 0 ? a : b;
    }

    @Override
    public String toString() {
        return "GlooStoreBridge(" + store + ", " + deadline + ")";
    }
}
