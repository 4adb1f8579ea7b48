package io.jcomm.cpu.internal.tcp;

import io.jcomm.cpu.testkit.CpuGroupConformanceKit;
import java.util.Map;

/**
 * The conformance kit on the tcp backend with {@code tcp.shm.nativeCopy=false}: every copy into and out of
 * shared memory with Java's own copy, the path of machines without {@code libjcommcopy.so}
 * ({@link TcpConformanceTest} runs the same cases with the native copy).
 */
class TcpJavaCopyConformanceTest extends CpuGroupConformanceKit {

    @Override
    protected String backend() {
        return "tcp";
    }

    @Override
    protected Map<String, String> options() {
        return Map.of("tcp.shm.nativeCopy", "false");
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
