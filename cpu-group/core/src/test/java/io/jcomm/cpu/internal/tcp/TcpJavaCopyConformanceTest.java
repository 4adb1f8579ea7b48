package io.jcomm.cpu.internal.tcp;

import java.util.Map;

/**
 * The conformance kit on the tcp backend with {@code tcp.shm.nativeCopy=false}: every copy into and out of
 * shared memory with Java's own copy, the path of machines without {@code libjcommcopy.so}
 * ({@link TcpConformanceTest} runs the same cases with the native copy).
 */
class TcpJavaCopyConformanceTest extends TcpVariantConformanceKit {

    @Override
    protected Map<String, String> options() {
        return Map.of("tcp.shm.nativeCopy", "false");
    }
}
