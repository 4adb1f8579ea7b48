package io.jcomm.cpu.internal.tcp;

import io.jcomm.cpu.testkit.CpuGroupConformanceKit;
import java.util.Map;

/** The conformance kit on the tcp backend with the shared-memory path off: every byte by socket. */
class TcpSocketsOnlyConformanceTest extends CpuGroupConformanceKit {

    @Override
    protected String backend() {
        return "tcp";
    }

    @Override
    protected Map<String, String> options() {
        return Map.of("tcp.shm", "false");
    }

    @Override
    protected int[] threadWorldSizes() {
        return new int[] {2, 3};
    }

    @Override
    protected boolean failureTests() {
        return false;
    }

    @Override
    protected int[] jvmWorldSizes() {
        return new int[] {3};
    }
}
