package io.jcomm.api.store;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * A view of another store in which every key is prefixed with {@code prefix + "/"}, like c10d's
 * {@code PrefixStore}. Closing a prefix store does not close the underlying store.
 */
public final class PrefixStore implements Store {

    private final String prefix;
    private final Store base;

    public PrefixStore(String prefix, Store base) {
        this.prefix = Objects.requireNonNull(prefix, "prefix");
        this.base = Objects.requireNonNull(base, "base");
    }

    public String prefix() {
        return prefix;
    }

    public Store base() {
        return base;
    }

    private String k(String key) {
        return prefix + "/" + key;
    }

    private List<String> ks(List<String> keys) {
        List<String> out = new ArrayList<>(keys.size());
        for (String key : keys) {
            out.add(k(key));
        }
        return out;
    }

    @Override
    public Duration timeout() {
        return base.timeout();
    }

    @Override
    public void set(String key, byte[] value) {
        base.set(k(key), value);
    }

    @Override
    public byte[] get(String key, Duration timeout) {
        return base.get(k(key), timeout);
    }

    @Override
    public long add(String key, long delta) {
        return base.add(k(key), delta);
    }

    @Override
    public byte[] compareSet(String key, byte[] expected, byte[] desired) {
        return base.compareSet(k(key), expected, desired);
    }

    @Override
    public boolean check(List<String> keys) {
        return base.check(ks(keys));
    }

    @Override
    public void wait(List<String> keys, Duration timeout) {
        base.wait(ks(keys), timeout);
    }

    @Override
    public boolean deleteKey(String key) {
        return base.deleteKey(k(key));
    }

    @Override
    public long numKeys() {
        return base.numKeys();
    }

    @Override
    public List<byte[]> multiGet(List<String> keys, Duration timeout) {
        return base.multiGet(ks(keys), timeout);
    }

    @Override
    public void multiSet(List<String> keys, List<byte[]> values) {
        base.multiSet(ks(keys), values);
    }

    @Override
    public void append(String key, byte[] value) {
        base.append(k(key), value);
    }

    @Override
    public int[] deadMembers() {
        return base.deadMembers();
    }

    @Override
    public void close() {
        // the base store is owned by whoever created it
    }

    @Override
    public String toString() {
        return "PrefixStore(" + prefix + ", " + base + ")";
    }
}
