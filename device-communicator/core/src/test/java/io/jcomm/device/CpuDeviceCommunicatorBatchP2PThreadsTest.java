package io.jcomm.device;

import io.jcomm.device.testkit.ThreadRanksGroup;
import java.util.List;

/**
 * The conformance kit for provider {@code cpu} over a stand-in CPU group whose backend refuses
 * allToAll and allToAllV: the communicator falls back to the batchP2P form of
 * {@link AbstractDeviceCommunicator} and stays usable.
 */
class CpuDeviceCommunicatorBatchP2PThreadsTest extends CpuDeviceCommunicatorThreadsTest {

    @Override
    protected List<ThreadRanksGroup> cpuGroups(String name, int worldSize) {
        return ThreadRanksGroup.create(name, worldSize, timeout(), false);
    }
}
