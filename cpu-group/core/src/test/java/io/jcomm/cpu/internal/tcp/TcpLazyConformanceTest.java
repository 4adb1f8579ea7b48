package io.jcomm.cpu.internal.tcp;

import io.jcomm.cpu.CpuGroupOptions;

/**
 * The conformance kit on groups that connect lazily: 17 thread ranks (more than
 * {@link MeshBootstrap#LARGE_ABOVE}, and not a power of two) that pretend to live on two hosts, so that
 * every link is made on first use and barrier and object all-gather take their O(log N) peers.
 */
class TcpLazyConformanceTest extends TcpVariantConformanceKit {

    @Override
    protected int[] threadWorldSizes() {
        return new int[] {MeshBootstrap.LARGE_ABOVE + 1};
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
