package io.jcomm.cpu.internal.tcp;

/**
 * The conformance kit on small groups that connect lazily: 3 thread ranks on the two pretend hosts of
 * {@link TcpLazyConformanceTest}, so that every link is made on first use while the operations keep their
 * small-group (direct) algorithms.
 */
class TcpLazySmallConformanceTest extends TcpLazyConformanceTest {

    @Override
    protected int[] threadWorldSizes() {
        return new int[] {3};
    }
}
