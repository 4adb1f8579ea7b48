package io.jcomm.api.store;

import io.jcomm.api.CommClosedException;
import io.jcomm.api.CommTimeoutException;
import io.jcomm.api.Deadline;
import io.jcomm.api.OpContext;
import io.jcomm.api.PeerFailureException;
import io.jcomm.api.ProtocolException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A store in this process's memory, for ranks that are threads (unit tests) and for the server side
 * of network stores. Thread safe; waits block on a condition, never poll.
 *
 * <p>It tracks members as a jcomm store server does: {@link #withMember} declares a rank of a job and returns
 * its handle; the handle's {@link Store#close()} is the member's goodbye, and {@link #killMember} is its death
 * (its connection ending without one): from then on the dead member's handle fails, the other members of its job
 * see it in {@link Store#deadMembers()}, and their waits for keys not there yet fail with a
 * {@link PeerFailureException} naming it. So a job of thread ranks can lose a rank in-process, as recovery
 * tests need.
 */
public final class InMemoryStore implements Store {

    private final Duration timeout;
    private final ReentrantLock lock = new ReentrantLock();
    private final Condition changed = lock.newCondition();
    private final Map<String, byte[]> data = new HashMap<>();
    /** Declared members: job id -> rank -> alive (false: died without a goodbye). Guarded by {@link #lock}. */
    private final Map<String, TreeMap<Integer, Boolean>> members = new HashMap<>();
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
        awaitKeys(keys, timeout, op, null);
    }

    /** Waits for {@code keys}; for a member's wait, fails once a member of its job died (as a jcomm server does). */
    private void awaitKeys(List<String> keys, Duration timeout, String op, Member member) {
        Deadline d = Deadline.after(timeout);
        while (true) {
            checkOpen(op);
            if (member != null) {
                member.checkAlive(op);
            }
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
            if (member != null) {
                // a member's wait that would block fails once a member of its job died (a jcomm server's rule)
                int dead = firstDead(member.jobId);
                if (dead >= 0) {
                    throw new PeerFailureException(OpContext.of("store", member.rank, op), dead,
                            "rank " + dead + " of job " + member.jobId + " left the store without a goodbye");
                }
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
        return multiGet(keys, timeout, null);
    }

    /** The values of {@code keys} once all exist; {@code member}'s wait (or null) as {@link #awaitKeys} says. */
    private List<byte[]> multiGet(List<String> keys, Duration timeout, Member member) {
        lock.lock();
        try {
            awaitKeys(keys, timeout, "multiGet", member);
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

    // ------------------------------------------------------------------ members

    /**
     * Declares rank {@code rank} of job {@code jobId} and returns its handle on this store (see the class
     * documentation); a rank declared again (a replacement) is alive again.
     */
    @Override
    public Store withMember(String jobId, int rank) {
        Objects.requireNonNull(jobId, "jobId");
        lock.lock();
        try {
            checkOpen("withMember");
            members.computeIfAbsent(jobId, j -> new TreeMap<>()).put(rank, Boolean.TRUE);
            return new Member(jobId, rank);
        } finally {
            lock.unlock();
        }
    }

    /**
     * The death of member {@code rank} of job {@code jobId} (its connection ending without a goodbye): its handle
     * fails from now on, and the other members see it dead. For tests that lose a rank in-process.
     *
     * @throws IllegalArgumentException when no such member was declared
     */
    public void killMember(String jobId, int rank) {
        lock.lock();
        try {
            Map<Integer, Boolean> job = members.get(jobId);
            if (job == null || !job.containsKey(rank)) {
                throw new IllegalArgumentException("rank " + rank + " of job " + jobId + " is not a member");
            }
            job.put(rank, Boolean.FALSE);
            changed.signalAll();
        } finally {
            lock.unlock();
        }
    }

    private int firstDead(String jobId) {
        TreeMap<Integer, Boolean> job = members.get(jobId);
        if (job != null) {
            for (Map.Entry<Integer, Boolean> e : job.entrySet()) {
                if (!e.getValue()) {
                    return e.getKey();
                }
            }
        }
        return -1;
    }

    /** A member's handle: the store's operations, failing once the member died; its close is its goodbye. */
    private final class Member implements Store {
        final String jobId;
        final int rank;
        private boolean left;

        Member(String jobId, int rank) {
            this.jobId = jobId;
            this.rank = rank;
        }

        /** Lock held. */
        void checkAlive(String op) {
            Boolean alive = members.getOrDefault(jobId, new TreeMap<>()).get(rank);
            if (left || alive == null || !alive) {
                throw new CommClosedException(OpContext.of("store", rank, op), left ? "this member said goodbye"
                        : "rank " + rank + " of job " + jobId + " is dead");
            }
        }

        private void check(String op) {
            lock.lock();
            try {
                checkOpen(op);
                checkAlive(op);
            } finally {
                lock.unlock();
            }
        }

        @Override
        public Duration timeout() {
            return timeout;
        }

        @Override
        public void set(String key, byte[] value) {
            check("set");
            InMemoryStore.this.set(key, value);
        }

        @Override
        public byte[] get(String key, Duration t) {
            checkKey(key);
            lock.lock();
            try {
                awaitKeys(List.of(key), t, "get", this);
                return data.get(key).clone();
            } finally {
                lock.unlock();
            }
        }

        @Override
        public long add(String key, long delta) {
            check("add");
            return InMemoryStore.this.add(key, delta);
        }

        @Override
        public byte[] compareSet(String key, byte[] expected, byte[] desired) {
            check("compareSet");
            return InMemoryStore.this.compareSet(key, expected, desired);
        }

        @Override
        public boolean check(List<String> keys) {
            check("check");
            return InMemoryStore.this.check(keys);
        }

        @Override
        public void wait(List<String> keys, Duration t) {
            lock.lock();
            try {
                awaitKeys(keys, t, "wait", this);
            } finally {
                lock.unlock();
            }
        }

        @Override
        public boolean deleteKey(String key) {
            check("deleteKey");
            return InMemoryStore.this.deleteKey(key);
        }

        @Override
        public long numKeys() {
            check("numKeys");
            return InMemoryStore.this.numKeys();
        }

        @Override
        public List<byte[]> multiGet(List<String> keys, Duration t) {
            return InMemoryStore.this.multiGet(keys, t, this);
        }

        @Override
        public void multiSet(List<String> keys, List<byte[]> values) {
            check("multiSet");
            InMemoryStore.this.multiSet(keys, values);
        }

        @Override
        public void append(String key, byte[] value) {
            check("append");
            InMemoryStore.this.append(key, value);
        }

        @Override
        public boolean supportsConcurrentClients() {
            return true;
        }

        @Override
        public Store concurrentClient() {
            return this;
        }

        @Override
        public Store withMember(String otherJob, int otherRank) {
            return InMemoryStore.this.withMember(otherJob, otherRank);
        }

        @Override
        public int[] deadMembers() {
            lock.lock();
            try {
                TreeMap<Integer, Boolean> job = members.get(jobId);
                return job == null ? new int[0] : job.entrySet().stream().filter(e -> !e.getValue())
                        .mapToInt(Map.Entry::getKey).toArray();
            } finally {
                lock.unlock();
            }
        }

        /** The member's goodbye (a dead member's handle just stops). Idempotent. */
        @Override
        public void close() {
            lock.lock();
            try {
                if (!left) {
                    left = true;
                    TreeMap<Integer, Boolean> job = members.get(jobId);
                    if (job != null && Boolean.TRUE.equals(job.get(rank))) {
                        job.remove(rank);
                    }
                    changed.signalAll();
                }
            } finally {
                lock.unlock();
            }
        }

        @Override
        public String toString() {
            return "InMemoryStore member " + rank + " of " + jobId;
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
