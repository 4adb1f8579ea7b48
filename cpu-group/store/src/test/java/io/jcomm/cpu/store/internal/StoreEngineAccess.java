package io.jcomm.cpu.store.internal;

/** Test access to package-private helpers of {@link StoreEngine}. */
public final class StoreEngineAccess {

    private StoreEngineAccess() {
    }

    public static long parseLong(byte[] b) {
        return StoreEngine.parseLong(b);
    }

    public static byte[] decimal(long v) {
        return StoreEngine.decimal(v);
    }
}
