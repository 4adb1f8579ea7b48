package io.jcomm.runtime;

import io.jcomm.api.store.Store;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.TreeSet;

/**
 * A list in a store that several processes append to at once: a counter ({@code countKey}) and one key per
 * entry ({@code entryPrefix} followed by its index, from 1).
 *
 * <p>An appender counts its entry before it writes it, so an entry can be counted and not written yet (an
 * appender between its two steps, or one stopped there, which writes it late) or never written (one killed
 * there). Readers therefore never wait on an unwritten entry: {@link #written} skips it, and a {@link Reader}
 * sets it aside once a later one is counted and looks at it again on every call, so an entry lost that way
 * hides nothing after it.
 *
 * <p>Entries are bounded: indexes above {@code maxEntries} are never read (a counter beyond it is the mark of
 * a faulty or hostile appender, and reading it must not loop for ever).
 */
public final class StoreList {

    /** Counted-but-unwritten entries a reader keeps looking at; the oldest are dropped beyond it. */
    public static final int MAX_SET_ASIDE = 64;

    private final Store store;
    private final String countKey;
    private final String entryPrefix;
    private final long maxEntries;

    /**
     * @param store       where the list is
     * @param countKey    the counter's key
     * @param entryPrefix entry {@code i}'s key is this followed by {@code i}
     * @param maxEntries  the highest index ever read
     */
    public StoreList(Store store, String countKey, String entryPrefix, long maxEntries) {
        if (maxEntries < 1) {
            throw new IllegalArgumentException("maxEntries " + maxEntries);
        }
        this.store = store;
        this.countKey = countKey;
        this.entryPrefix = entryPrefix;
        this.maxEntries = maxEntries;
    }

    /** The key of entry {@code index}. */
    public String key(long index) {
        return entryPrefix + index;
    }

    /** Counts an entry, then writes {@code value} as it; returns its index. */
    public long append(byte[] value) {
        long index = store.add(countKey, 1);
        store.set(key(index), value);
        return index;
    }

    /** Overwrites entry {@code index} (an entry withdrawn, say, with an agreed value). */
    public void overwrite(long index, byte[] value) {
        store.set(key(index), value);
    }

    /** Entry {@code index}, waiting for it up to {@code timeout}. */
    public byte[] get(long index, Duration timeout) {
        return store.get(key(index), timeout);
    }

    /** The entries counted so far, written or not (0 when none was). */
    public long count() {
        return store.check(List.of(countKey)) ? store.add(countKey, 0) : 0;
    }

    /** Every entry written now, in index order, skipping those counted but not written. */
    public List<byte[]> written(Duration timeout) {
        long n = Math.min(count(), maxEntries);
        List<byte[]> out = new ArrayList<>();
        for (long i = 1; i <= n; i++) {
            String k = key(i);
            if (store.check(List.of(k))) {
                out.add(store.get(k, timeout));
            }
        }
        return out;
    }

    /** A reader that hands out each written entry once, from the first on. */
    public Reader reader() {
        return new Reader();
    }

    /** Hands out each entry once it is written, never waiting on one that is not. Not thread safe. */
    public final class Reader {
        private final TreeSet<Long> setAside = new TreeSet<>();
        private long next = 1;

        private Reader() {
        }

        /**
         * The index of an entry written and not handed out before, or -1 when there is none now. Entries come in
         * index order, except one written late, which comes when it is written.
         */
        public long next() {
            for (Iterator<Long> it = setAside.iterator(); it.hasNext(); ) {
                long i = it.next();
                if (store.check(List.of(key(i)))) {
                    it.remove();
                    return i;
                }
            }
            long counted = -1; // read once per call, when first needed: it only grows, so a stale value is safe
            while (next <= maxEntries) {
                if (store.check(List.of(key(next)))) {
                    return next++;
                }
                if (counted < 0) {
                    counted = count();
                }
                if (counted <= next) {
                    return -1; // nothing counted after it: it is being written, or nothing was appended yet
                }
                setAside.add(next++);
                if (setAside.size() > MAX_SET_ASIDE) {
                    setAside.pollFirst();
                }
            }
            return -1;
        }

        /** Entries this reader set aside: counted, not written when it looked, and looked at again. */
        public int setAside() {
            return setAside.size();
        }
    }
}
