package io.jcomm.device.internal.nccl;

import java.util.Map;

/** World size 1 through NCCL itself (what scripts/gpu-check.sh runs on one GPU), not the local shortcut. */
class FakeNcclWorldOfOneThroughNcclTest extends FakeNcclConformanceTest {

    @Override
    protected int[] worldSizes() {
        return new int[] {1};
    }

    @Override
    protected Map<String, String> options() {
        return Map.of(NcclSettings.LOCAL_WORLD_OF_ONE, "false");
    }
}
