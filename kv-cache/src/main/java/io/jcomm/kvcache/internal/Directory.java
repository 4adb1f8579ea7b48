package io.jcomm.kvcache.internal;

import io.jcomm.api.store.Store;
import io.jcomm.runtime.StoreList;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * A list of names in a store ({@code <prefix>/count} and {@code <prefix>/<i>}, a {@link StoreList}), appended
 * to by several processes at once: the publishers and subscribers of KV events. A name withdrawn is
 * overwritten with an empty value. A name counted but never written (its appender killed in between) hides
 * none after it.
 */
public final class Directory {

    /** Most entries read. */
    public static final int MAX_ENTRIES = 1 << 16;
    private static final int MAX_NAME = 256;

    private final StoreList list;

    public Directory(Store store, String prefix) {
        this.list = new StoreList(store, prefix + "/count", prefix + "/", MAX_ENTRIES);
    }

    /** Appends {@code name}; returns its index. */
    public long add(String name) {
        return list.append(name.getBytes(StandardCharsets.UTF_8));
    }

    /** Withdraws entry {@code i}. */
    public void withdraw(long i) {
        list.overwrite(i, new byte[0]);
    }

    /** Every name listed now, withdrawn ones left out. */
    public List<String> names(Duration timeout) {
        List<String> out = new ArrayList<>();
        for (byte[] v : list.written(timeout)) {
            String name = name(v);
            if (!name.isEmpty()) {
                out.add(name);
            }
        }
        return out;
    }

    /** Hands out each name once it is listed (withdrawn ones as empty strings). Not thread safe. */
    public final class Reader {
        private final StoreList.Reader entries = list.reader();

        private Reader() {
        }

        /** The names listed since the last call. */
        public List<String> added(Duration timeout) {
            List<String> out = new ArrayList<>();
            for (long i; (i = entries.next()) >= 0; ) {
                out.add(name(list.get(i, timeout)));
            }
            return out;
        }
    }

    /** A reader from the first name on. */
    public Reader reader() {
        return new Reader();
    }

    private static String name(byte[] v) {
        return v == null || v.length > MAX_NAME ? "" : new String(v, StandardCharsets.UTF_8);
    }
}
