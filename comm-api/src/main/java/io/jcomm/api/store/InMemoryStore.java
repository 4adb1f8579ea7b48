package io.jcomm.api.store;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.ProtocolException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A store in this process's memory, for ranks that are threads (unit tests) and for the server side
 * of network stores. Thread safe; waits block on a condition, never poll.
 */
public final class InMemoryStore implements Store {

    private final Duration timeout;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private final Map<String, byte[]> data = new HashMap<>();
    private boolean closed;

    public InMemoryStore(Duration timeout) {
        this.timeout = Objects.requireNonNull(timeout, "timeout");
    }

    public InMemoryStore() {
        this(Duration.ofSeconds(30));
    }

    private static void checkKey(String key) {
        if (key == null || key.isEmpty()) {
            throw OpContext.NONE.invalidArgument("store keys must be non-empty");
        }
    }

    private void checkOpen(String op) {
        if (closed) {
            throw new CommClosedException(OpContext.of("store", -1, op), "store is closed");
        }
    }

    @Override
    public Duration timeout() {
        return timeout;
    }

    @Override
    public void set(String key, byte[] value) {
        checkKey(key);
        Objects.requireNonNull(value, "value");
        lock.lock();
        try {
            checkOpen("set");
            data.put(key, value.clone());
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public byte[] get(String key, Duration timeout) {
        checkKey(key);
        lock.lock();
        try {
            awaitKeys(List.of(key), timeout, "get");
            return data.get(key).clone();
        } finally {
            lock.unlock();
        }
    }

    private void awaitKeys(List<String> keys, Duration timeout, String op) {
        Deadline d = Deadline.after(timeout);
        while (true) {
            checkOpen(op);
            List<String> missing = null;
            for (String k : keys) {
                if (!data.containsKey(k)) {
                    if (missing == null) {
                        missing = new ArrayList<>();
                    }
                    missing.add(k);
                }
            }
            if (missing == null) {
                return;
            }
            long left = d.remainingNanos();
            if (left <= 0) {
                throw new CommTimeoutException(OpContext.of("store", -1, op),
                        "timed out after " + timeout.toMillis() + " ms waiting for keys " + missing);
            }
            try {
                changed.await(left, TimeUnit.NANOSECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new CommTimeoutException(OpContext.of("store", -1, op), "interrupted while waiting for " + missing);
            }
        }
    }

    @Override
    public long add(String key, long delta) {
        checkKey(key);
        lock.lock();
        try {
            checkOpen("add");
            byte[] cur = data.get(key);
            long v;
            try {
                v = cur == null ? 0 : Long.parseLong(new String(cur, StandardCharsets.US_ASCII));
            } catch (NumberFormatException e) {
                throw new ProtocolException(OpContext.of("store", -1, "add"), "value of '" + key + "' is not an integer");
            }
            long nv = v + delta;
            data.put(key, Long.toString(nv).getBytes(StandardCharsets.US_ASCII));
            changed.signalAll();
            return nv;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public byte[] compareSet(String key, byte[] expected, byte[] desired) {
        checkKey(key);
        lock.lock();
        try {
            checkOpen("compareSet");
            byte[] cur = data.get(key);
            if (cur == null) {
                if (expected.length == 0) {
                    data.put(key, desired.clone());
                    changed.signalAll();
                    return desired.clone();
                }
                return expected.clone();
            }
            if (Arrays.equals(cur, expected)) {
                data.put(key, desired.clone());
                changed.signalAll();
                return desired.clone();
            }
            return cur.clone();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public boolean check(List<String> keys) {
        lock.lock();
        try {
            checkOpen("check");
            for (String k : keys) {
                if (!data.containsKey(k)) {
                    return false;
                }
            }
            return true;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void wait(List<String> keys, Duration timeout) {
        lock.lock();
        try {
            awaitKeys(keys, timeout, "wait");
        } finally {
            lock.unlock();
        }
    }

    @Override
    public boolean deleteKey(String key) {
        lock.lock();
        try {
            checkOpen("deleteKey");
            return data.remove(key) != null;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public long numKeys() {
        lock.lock();
        try {
            checkOpen("numKeys");
            return data.size();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public List<byte[]> multiGet(List<String> keys, Duration timeout) {
        lock.lock();
        try {
            awaitKeys(keys, timeout, "multiGet");
            List<byte[]> out = new ArrayList<>(keys.size());
            for (String k : keys) {
                out.add(data.get(k).clone());
            }
            return out;
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void multiSet(List<String> keys, List<byte[]> values) {
        if (keys.size() != values.size()) {
            throw OpContext.of("store", -1, "multiSet").invalidArgument(keys.size() + " keys but " + values.size() + " values");
        }
        keys.forEach(InMemoryStore::checkKey);
        lock.lock();
        try {
            checkOpen("multiSet");
            for (int i = 0; i < keys.size(); i++) {
                data.put(keys.get(i), values.get(i).clone());
            }
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    @Override
    public void append(String key, byte[] value) {
        checkKey(key);
        lock.lock();
        try {
            checkOpen("append");
            byte[] cur = data.get(key);
            if (cur == null) {
                data.put(key, value.clone());
            } else {
                byte[] nv = Arrays.copyOf(cur, cur.length + value.length);
                System.arraycopy(value, 0, nv, cur.length, value.length);
                data.put(key, nv);
            }
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** Closes the store; blocked waiters fail with {@link CommClosedException}. */
    @Override
    public void close() {
        lock.lock();
        try {
            closed = true;
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    /** Waits do not hold this store: any number of threads may use it at once. */
    @Override
    public boolean supportsConcurrentClients() {
        return true;
    }

    /** This store itself. */
    @Override
    public Store concurrentClient() {
        return this;
    }
}
