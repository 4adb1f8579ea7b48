package io.jcomm.device.internal.nccl;

/**
 * The conformance kit for provider {@code cuda:nccl} over {@link FakeNccl} as NCCL 2.26.6, which lacks
 * {@code ncclCommShrink}: the shrink case aborts the communicator and bootstraps a fresh one over
 * the survivors' CPU group (a new unique id), and must never call {@code ncclCommShrink} (the fake
 * reports it as misuse).
 */
class FakeNcclWithoutShrinkConformanceTest extends FakeNcclConformanceTest {

    @Override
    protected int ncclVersion() {
        return 22606;
    }

    @Override
    protected int[] worldSizes() {
        return new int[] {1, 3};
    }
}
