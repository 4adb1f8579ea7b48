package io.jcomm.parallel.internal.moe;

import io.jcomm.parallel.All2AllManager;
import io.jcomm.parallel.All2AllManagerProvider;
import io.jcomm.parallel.All2AllManagers;

/** The providers of the built-in managers, listed in {@code META-INF/services}. */
public final class BuiltinAll2AllProviders {

    private BuiltinAll2AllProviders() {
    }

    /** {@code allgather-reducescatter}: {@link AllGatherReduceScatterManager}. */
    public static final class AllGatherReduceScatter implements All2AllManagerProvider {
        @Override
        public String name() {
            return All2AllManagers.ALLGATHER_REDUCESCATTER;
        }

        @Override
        public All2AllManager create() {
            return new AllGatherReduceScatterManager();
        }
    }

    /** {@code alltoall}: {@link AllToAllManager}. */
    public static final class AllToAll implements All2AllManagerProvider {
        @Override
        public String name() {
            return All2AllManagers.ALLTOALL;
        }

        @Override
        public All2AllManager create() {
            return new AllToAllManager();
        }
    }
}
