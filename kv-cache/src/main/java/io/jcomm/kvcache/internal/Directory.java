package io.jcomm.kvcache.internal;

import io.jcomm.api.store.Store;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * A list of names in a store ({@code <prefix>/count} and {@code <prefix>/<i>}), appended to by
 * several processes at once: the publishers and subscribers of KV events. A name withdrawn is
 * overwritten with an empty value. Reading is incremental ({@link #readFrom}).
 */
public final class Directory {

    /** Most entries read. */
    public static final int MAX_ENTRIES = 1 << 16;
    private static final int MAX_NAME = 256;

    private final Store store;
    private final String prefix;

    public Directory(Store store, String prefix) {
        this.store = store;
        this.prefix = prefix;
    }

    /** Appends {@code name}; returns its index. */
    public long add(String name) {
        long i = store.add(prefix + "/count", 1) - 1;
        store.set(prefix + "/" + i, name.getBytes(StandardCharsets.UTF_8));
        return i;
    }

    /** Withdraws entry {@code i}. */
    public void withdraw(long i) {
        store.set(prefix + "/" + i, new byte[0]);
    }

    /**
     * The entries from index {@code from} on, stopping at the first not written yet (an appender
     * between its two steps): {@code names.size()} entries were read, empty strings for withdrawn ones.
     */
    public List<String> readFrom(long from, Duration timeout) {
        long n = Math.min(store.add(prefix + "/count", 0), MAX_ENTRIES);
        List<String> out = new ArrayList<>();
        for (long i = from; i < n; i++) {
            String k = prefix + "/" + i;
            if (!store.check(List.of(k))) {
                break;
            }
            byte[] v = store.get(k, timeout);
            out.add(v.length > MAX_NAME ? "" : new String(v, StandardCharsets.UTF_8));
        }
        return out;
    }
}
