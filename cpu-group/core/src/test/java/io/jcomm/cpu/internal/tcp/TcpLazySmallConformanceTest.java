package io.jcomm.cpu.internal.tcp;

import io.jcomm.cpu.CpuGroupOptions;

/**
 * The conformance kit on small groups that connect lazily: 3 thread ranks that pretend to live on two
 * hosts, so that every link is made on first use while the operations keep their small-group (direct)
 * algorithms.
 */
class TcpLazySmallConformanceTest extends TcpVariantConformanceKit {

    @Override
    protected int[] threadWorldSizes() {
        return new int[] {3};
    }

    @Override
    protected int[] jvmWorldSizes() {
        return new int[0];
    }

    @Override
    protected CpuGroupOptions.Builder optionsFor(int rank) {
        return super.optionsFor(rank).option("tcp.hostId", "host-" + (rank % 2));
    }
}
