package io.jcomm.api.store;

import java.time.Duration;
import java.util.List;

/**
 * A key-value store used for rendezvous, like c10d's {@code Store}: processes publish addresses and
 * ids, count arrivals with {@link #add}, and block until keys appear.
 *
 * <p>Keys are non-empty strings (UTF-8 on the wire); values are byte arrays. Every blocking method
 * is bounded: the overloads without a timeout use {@link #timeout()}, and a wait that runs out
 * throws {@link io.jcomm.api.CommTimeoutException} naming the missing keys. Failures of the store
 * itself (connection lost, server refused) throw {@link io.jcomm.api.StoreException}. A store that
 * knows the job's members may end a wait early with {@link io.jcomm.api.PeerFailureException} when
 * a member process died (the TCP store with a member identity does).
 *
 * <p>Implementations are thread safe.
 */
public interface Store extends AutoCloseable {

    /** Default timeout of the blocking methods. */
    Duration timeout();

    /** Sets {@code key} to {@code value}, replacing any value; wakes waiters on the key. */
    void set(String key, byte[] value);

    /** Returns the value of {@code key}, waiting up to {@link #timeout()} for it to be set. */
    default byte[] get(String key) {
        return get(key, timeout());
    }

    /** Returns the value of {@code key}, waiting up to {@code timeout} for it to be set. */
    byte[] get(String key, Duration timeout);

    /**
     * Atomically adds {@code delta} to the integer stored at {@code key} (a missing key counts as 0)
     * and returns the new value. The value is stored as decimal ASCII, as PyTorch does.
     */
    long add(String key, long delta);

    /**
     * PyTorch's compare-and-set: if the key is missing and {@code expected} is empty, or the current
     * value equals {@code expected}, stores {@code desired} and returns it; if the key is missing
     * and {@code expected} is non-empty, returns {@code expected}; otherwise returns the current
     * value unchanged.
     */
    byte[] compareSet(String key, byte[] expected, byte[] desired);

    /** True if every key exists right now. Never blocks. */
    boolean check(List<String> keys);

    /** Waits up to {@link #timeout()} until every key exists. */
    default void wait(List<String> keys) {
        wait(keys, timeout());
    }

    /** Waits up to {@code timeout} until every key exists. */
    void wait(List<String> keys, Duration timeout);

    /** Deletes {@code key}; true if it existed. */
    boolean deleteKey(String key);

    /** Number of keys in the store (the whole store, not only under a prefix, as in PyTorch). */
    long numKeys();

    /** Values of {@code keys} in order, waiting up to {@link #timeout()} for all of them to exist. */
    default List<byte[]> multiGet(List<String> keys) {
        return multiGet(keys, timeout());
    }

    /** Values of {@code keys} in order, waiting up to {@code timeout} for all of them to exist. */
    List<byte[]> multiGet(List<String> keys, Duration timeout);

    /** Sets {@code keys.get(i)} to {@code values.get(i)} for every i. */
    void multiSet(List<String> keys, List<byte[]> values);

    /** Appends {@code value} to the value of {@code key} (creating it when missing). */
    void append(String key, byte[] value);

    /**
     * Whether {@link #concurrentClient()} is supported: another thread may then use the store at the same
     * time as this one's blocked {@link #wait} (parallel group creation relies on it). False by default.
     */
    default boolean supportsConcurrentClients() {
        return false;
    }

    /**
     * A handle on the same store for one more thread, usable concurrently with this one: its own
     * connection for a network store, or {@code this} for a store whose waits do not hold it. The caller
     * closes what it gets unless it is {@code this}.
     *
     * @throws UnsupportedOperationException when {@link #supportsConcurrentClients()} is false
     */
    default Store concurrentClient() {
        throw new UnsupportedOperationException(getClass().getName() + " offers no concurrent client");
    }

    /**
     * The ranks of this client's job that left the store without a goodbye (their process died), sorted,
     * as far as the store tracks its clients' liveness (jcomm's {@code TcpStore} against a jcomm server,
     * for a client declared a member); empty where it does not.
     */
    default int[] deadMembers() {
        return new int[0];
    }

    /**
     * A handle on the same store for one more thread, declared rank {@code rank} of job {@code jobId}
     * where the store tracks members (a job that lost a rank re-forms under a new job id); elsewhere the
     * same as {@link #concurrentClient()}. The caller closes what it gets unless it is {@code this}.
     *
     * @throws UnsupportedOperationException when {@link #supportsConcurrentClients()} is false
     */
    default Store withMember(String jobId, int rank) {
        return concurrentClient();
    }

    /** Releases connections or resources. Idempotent. */
    @Override
    void close();
}
