package io.jcomm.cpu.store.internal;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The store's state: the key-value map, the waiters and (torch 1.13) the watchers. Not thread safe
 * by design: it is owned by the server's single event-loop thread, so no operation takes a lock.
 *
 * <p>Keys passed in are usually the server's reusable probe ({@link Key#load}); the engine copies a
 * key only when it retains it (a new map entry, a waiter, a watcher).
 */
public final class StoreEngine {

    /** Told when every key of a wait exists. */
    public interface WaitListener {
        void waitCompleted(WaitRecord record);
    }

    /** Told about changes to a watched key (torch 1.13 watch_key). */
    public interface WatchListener {
        void keyChanged(int type, Key key, byte[] oldValue, byte[] newValue);
    }

    /** One pending WAIT of one connection. */
    public static final class WaitRecord {
        final WaitListener listener;
        final List<Key> missing = new ArrayList<>(2);
        /** Where this record sits in the waiter list of {@code missing.get(i)}: cancel removes it without a scan. */
        int[] slots = new int[2];
        int remaining;
        boolean finished;

        WaitRecord(WaitListener listener) {
            this.listener = listener;
        }

        /** The keys still missing when the wait was registered (for messages). */
        public List<Key> missingKeys() {
            return missing;
        }
    }

    private static final byte[] EMPTY = new byte[0];

    private final HashMap<Key, byte[]> data = new HashMap<>();
    private final HashMap<Key, ArrayList<WaitRecord>> waiters = new HashMap<>();
    private final HashMap<Key, ArrayList<WatchListener>> watchers = new HashMap<>();
    /**
     * Clients whose last tagged request is remembered (see {@link #beginRequest}); the oldest is
     * forgotten beyond this.
     */
    public static final int MAX_TRACKED_CLIENTS = 1 << 17;

    private final long maxStoreBytes;
    private long storedBytes;
    private long pendingWaits;
    private StoreLog log;
    private final Snapshot snapshot = new Snapshot();

    /** Last tagged request per client: {seq, result}, oldest first. */
    private final LinkedHashMap<ClientId, long[]> requests = new LinkedHashMap<>(16, 0.75f, false);
    private boolean tagged;
    private long tagHi;
    private long tagLo;
    private long tagSeq;
    private long tagResult;

    /** A client of tagged requests. */
    private record ClientId(long hi, long lo) {
    }

    public StoreEngine(long maxStoreBytes) {
        this.maxStoreBytes = maxStoreBytes;
    }

    /**
     * Makes this (empty) engine durable: loads the image of {@code dir} and from then on writes every
     * change through to it before the change is made. {@code probe}: a key of the seed the server's
     * keys are hashed with (its lookup probe; used before the server serves).
     */
    public void openLog(java.nio.file.Path dir, long maxDataBytes, boolean fsync, Key probe) {
        if (log != null || !data.isEmpty()) {
            throw new IllegalStateException("openLog on a used engine");
        }
        log = StoreLog.open(dir, maxDataBytes, fsync, new StoreLog.Loader() {
            @Override
            public void put(byte[] key, byte[] value) {
                Key k = probe.load(key);
                byte[] old = data.get(k);
                if (old != null) {
                    data.put(k, value);
                    storedBytes += (long) value.length - old.length;
                } else {
                    data.put(k.copy(), value);
                    storedBytes += (long) key.length + value.length;
                }
            }

            @Override
            public void delete(byte[] key) {
                byte[] old = data.remove(probe.load(key));
                if (old != null) {
                    storedBytes -= (long) key.length + old.length;
                }
            }

            @Override
            public void request(long hi, long lo, long seq, long result) {
                remember(new ClientId(hi, lo), seq, result);
            }
        });
    }

    /** The durable image, or {@code null} for a store held in memory only. */
    public StoreLog log() {
        return log;
    }

    /** Closes the durable image (the server stopped). */
    public void closeLog() {
        if (log != null) {
            log.close();
        }
    }

    // ---- request ids (exactly-once retries of a reconnecting client) ----

    /**
     * The result of client {@code (hi, lo)}'s request {@code seq} if that request changed the store
     * already (a retry: it must not be applied again), else {@code null}.
     */
    public long[] appliedRequest(long hi, long lo, long seq) {
        long[] r = requests.get(new ClientId(hi, lo));
        return r != null && r[0] == seq ? r : null;
    }

    /**
     * The next change belongs to client {@code (hi, lo)}'s request {@code seq}: the change and the
     * request id are made (and written) together, and the request is remembered with its result.
     * Cleared by {@link #endRequest}.
     */
    public void beginRequest(long hi, long lo, long seq) {
        tagged = true;
        tagHi = hi;
        tagLo = lo;
        tagSeq = seq;
        tagResult = 0;
    }

    public void endRequest() {
        tagged = false;
    }

    /** Requests remembered now. */
    public int trackedRequests() {
        return requests.size();
    }

    private void remember(ClientId id, long seq, long result) {
        long[] r = requests.remove(id);
        if (r == null) {
            r = new long[2];
        }
        r[0] = seq;
        r[1] = result;
        requests.put(id, r);
        if (requests.size() > MAX_TRACKED_CLIENTS) {
            var it = requests.entrySet().iterator();
            it.next();
            it.remove();
        }
    }

    /** Writes one record and, when tagged, remembers the request. Before the change is made. */
    private void journalPut(Key key, byte[] value) {
        if (log != null) {
            log.begin(tagged, tagHi, tagLo, tagSeq, tagResult);
            log.put(key, value);
            log.commit(snapshot);
        }
        noteRequest();
    }

    private void noteRequest() {
        if (tagged) {
            remember(new ClientId(tagHi, tagLo), tagSeq, tagResult);
            tagged = false; // one change per request
        }
    }

    /** The live state for a rewrite of the image. */
    private final class Snapshot implements StoreLog.Snapshot {
        @Override
        public long estimatedBytes() {
            return StoreLog.HEADER_BYTES + (long) (StoreLog.RECORD_OVERHEAD + StoreLog.PUT_OVERHEAD) * data.size()
                    + storedBytes + (long) (StoreLog.RECORD_OVERHEAD + StoreLog.TAG_BYTES) * requests.size();
        }

        @Override
        public void writeTo(StoreLog.SnapshotWriter w) throws java.io.IOException {
            for (Map.Entry<Key, byte[]> e : data.entrySet()) {
                w.put(e.getKey(), e.getValue());
            }
            for (Map.Entry<ClientId, long[]> e : requests.entrySet()) {
                w.request(e.getKey().hi(), e.getKey().lo(), e.getValue()[0], e.getValue()[1]);
            }
        }
    }

    public int size() {
        return data.size();
    }

    /** Bytes of all keys and values held. */
    public long storedBytes() {
        return storedBytes;
    }

    public long pendingWaits() {
        return pendingWaits;
    }

    public boolean contains(Key key) {
        return data.containsKey(key);
    }

    /** The value or {@code null}; the caller must not modify it. */
    public byte[] get(Key key) {
        return data.get(key);
    }

    private void reserve(long delta) {
        if (delta > 0 && storedBytes + delta > maxStoreBytes) {
            throw new StoreFault("store full: " + storedBytes + " + " + delta + " bytes exceeds maxStoreBytes "
                    + maxStoreBytes);
        }
    }

    /** Stores {@code value} (taken over, not copied); wakes waiters and notifies watchers. */
    public void set(Key key, byte[] value) {
        byte[] old = data.get(key);
        reserve(old != null ? (long) value.length - old.length : (long) key.length() + value.length);
        journalPut(key, value);
        put(key, old, value);
        changed(key, old, value);
    }

    private void put(Key key, byte[] old, byte[] value) {
        if (old != null) {
            data.put(key, value); // keeps the existing key object
            storedBytes += (long) value.length - old.length;
        } else {
            data.put(key.copy(), value);
            storedBytes += (long) key.length() + value.length;
        }
    }

    /**
     * Sets every pair as one change: all or nothing (one record of the image), then wakes waiters and
     * notifies watchers pair by pair. The keys are retained copies or probes; values are taken over.
     */
    public void multiSet(List<Key> keys, List<byte[]> values) {
        long delta = 0;
        HashMap<Key, byte[]> after = new HashMap<>();
        for (int i = 0; i < keys.size(); i++) {
            Key k = keys.get(i);
            byte[] before = after.containsKey(k) ? after.get(k) : data.get(k);
            byte[] v = values.get(i);
            delta += before != null ? (long) v.length - before.length : (long) k.length() + v.length;
            after.put(k, v);
        }
        reserve(delta);
        if (log != null) {
            log.begin(tagged, tagHi, tagLo, tagSeq, tagResult);
            for (int i = 0; i < keys.size(); i++) {
                log.put(keys.get(i), values.get(i));
            }
            log.commit(snapshot);
        }
        noteRequest();
        for (int i = 0; i < keys.size(); i++) {
            Key k = keys.get(i);
            byte[] old = data.get(k);
            put(k, old, values.get(i));
            changed(k, old, values.get(i));
        }
    }

    private void changed(Key key, byte[] old, byte[] value) {
        if (!watchers.isEmpty()) {
            ArrayList<WatchListener> ws = watchers.get(key);
            if (ws != null) {
                int type = old == null ? Wire.WATCH_KEY_CREATED : Wire.WATCH_KEY_UPDATED;
                for (WatchListener w : new ArrayList<>(ws)) {
                    w.keyChanged(type, key, old == null ? EMPTY : old, value);
                }
            }
        }
        if (!waiters.isEmpty()) {
            ArrayList<WaitRecord> ws = waiters.remove(key);
            if (ws != null) {
                for (WaitRecord r : ws) {
                    if (!r.finished && --r.remaining == 0) {
                        finish(r);
                        r.listener.waitCompleted(r);
                    }
                }
            }
        }
    }

    /**
     * Torch's ADD: parses the current value as a decimal integer like {@code std::stoll} (leading
     * blanks, optional sign, digits; trailing bytes ignored), adds with 64-bit wrap-around, stores
     * the decimal result.
     */
    public long add(Key key, long delta) {
        byte[] old = data.get(key);
        long v = delta;
        if (old != null) {
            v += parseLong(old);
        }
        tagResult = v;
        set(key, decimal(v));
        return v;
    }

    static long parseLong(byte[] b) {
        int i = 0;
        int n = b.length;
        while (i < n && (b[i] == ' ' || (b[i] >= '\t' && b[i] <= '\r'))) {
            i++;
        }
        boolean neg = false;
        if (i < n && (b[i] == '+' || b[i] == '-')) {
            neg = b[i] == '-';
            i++;
        }
        int start = i;
        long acc = 0;
        while (i < n && b[i] >= '0' && b[i] <= '9') {
            int d = b[i] - '0';
            // accumulate negatively so that Long.MIN_VALUE parses
            if (acc < (Long.MIN_VALUE + d) / 10) {
                throw new StoreFault("ADD on a value out of the int64 range");
            }
            acc = acc * 10 - d;
            i++;
        }
        if (i == start) {
            throw new StoreFault("ADD on a value that is not an integer");
        }
        if (!neg) {
            if (acc == Long.MIN_VALUE) {
                throw new StoreFault("ADD on a value out of the int64 range");
            }
            return -acc;
        }
        return acc;
    }

    static byte[] decimal(long v) {
        if (v >= 0 && v < 10) {
            return new byte[] {(byte) ('0' + v)};
        }
        String s = Long.toString(v);
        byte[] out = new byte[s.length()];
        for (int i = 0; i < out.length; i++) {
            out[i] = (byte) s.charAt(i);
        }
        return out;
    }

    /** Torch's compare-and-set; returns the bytes to send back (not to be modified). */
    public byte[] compareSet(Key key, byte[] expected, byte[] desired) {
        byte[] cur = data.get(key);
        if (cur == null) {
            if (expected.length == 0) {
                tagResult = 1;
                set(key, desired);
                return desired;
            }
            return expected;
        }
        if (Arrays.equals(cur, expected)) {
            tagResult = 1;
            set(key, desired);
            return desired;
        }
        return cur;
    }

    public void append(Key key, byte[] value) {
        byte[] cur = data.get(key);
        if (cur == null) {
            set(key, value);
            return;
        }
        byte[] nv = Arrays.copyOf(cur, cur.length + value.length);
        System.arraycopy(value, 0, nv, cur.length, value.length);
        set(key, nv);
    }

    public boolean delete(Key key) {
        if (!data.containsKey(key)) {
            return false;
        }
        tagResult = 1;
        if (log != null) {
            log.begin(tagged, tagHi, tagLo, tagSeq, 1);
            log.delete(key);
            log.commit(snapshot);
        }
        noteRequest();
        byte[] old = data.remove(key);
        storedBytes -= (long) key.length() + old.length;
        if (!watchers.isEmpty()) {
            ArrayList<WatchListener> ws = watchers.get(key);
            if (ws != null) {
                for (WatchListener w : new ArrayList<>(ws)) {
                    w.keyChanged(Wire.WATCH_KEY_DELETED, key, old, EMPTY);
                }
            }
        }
        return true;
    }

    // ---- waits ----

    public WaitRecord beginWait(WaitListener listener) {
        return new WaitRecord(listener);
    }

    /** Adds one key of a WAIT; registers the record on it when the key is missing. */
    public void waitFor(WaitRecord r, Key key) {
        if (data.containsKey(key)) {
            return;
        }
        ArrayList<WaitRecord> ws = waiters.get(key);
        Key owned;
        if (ws == null) {
            owned = key.copy();
            ws = new ArrayList<>(2);
            waiters.put(owned, ws);
        } else {
            owned = key.copy();
        }
        if (r.missing.size() == r.slots.length) {
            r.slots = Arrays.copyOf(r.slots, r.slots.length * 2);
        }
        r.slots[r.missing.size()] = ws.size();
        ws.add(r);
        r.missing.add(owned);
        r.remaining++;
    }

    /**
     * Ends registration: true if no key was missing (the wait is complete now and nothing stays
     * registered), false if the record waits for a set.
     */
    public boolean endWaitRegistration(WaitRecord r) {
        if (r.remaining == 0) {
            r.finished = true;
            return true;
        }
        pendingWaits++;
        return false;
    }

    private void finish(WaitRecord r) {
        r.finished = true;
        pendingWaits--;
    }

    /** Cancels a pending wait (client gave up, CANCEL_WAIT, or connection closed). Idempotent. */
    public void cancelWait(WaitRecord r) {
        if (r == null || r.finished) {
            return;
        }
        finish(r);
        for (int i = 0; i < r.missing.size(); i++) {
            Key k = r.missing.get(i);
            ArrayList<WaitRecord> ws = waiters.get(k);
            if (ws != null) {
                removeSlot(ws, r, r.slots[i], k);
                if (ws.isEmpty()) {
                    waiters.remove(k);
                }
            }
        }
    }

    /**
     * Removes {@code r} from the waiter list {@code ws} of {@code key} at {@code slot} by moving the last
     * record into its place (no scan over the key's waiters: a crowd leaving one key costs O(1) each). A
     * slot that no longer holds {@code r} (the key was set and its list replaced) is left alone.
     */
    private static void removeSlot(ArrayList<WaitRecord> ws, WaitRecord r, int slot, Key key) {
        if (slot >= ws.size() || ws.get(slot) != r) {
            return;
        }
        int lastIndex = ws.size() - 1;
        WaitRecord moved = ws.remove(lastIndex);
        if (slot == lastIndex) {
            return;
        }
        ws.set(slot, moved);
        for (int j = 0; j < moved.missing.size(); j++) {
            if (moved.slots[j] == lastIndex && moved.missing.get(j).equals(key)) {
                moved.slots[j] = slot;
                return;
            }
        }
        throw new IllegalStateException("waiter list of a key out of step with its records");
    }

    // ---- watches (torch 1.13 callback connections) ----

    /** Registers {@code w} on {@code key}; returns the retained key (for {@link #unwatch}). */
    public Key watch(Key key, WatchListener w) {
        Key owned = key.copy();
        watchers.computeIfAbsent(owned, k -> new ArrayList<>(1)).add(w);
        return owned;
    }

    public void unwatch(Key key, WatchListener w) {
        ArrayList<WatchListener> ws = watchers.get(key);
        if (ws != null) {
            ws.remove(w);
            if (ws.isEmpty()) {
                watchers.remove(key);
            }
        }
    }
}
