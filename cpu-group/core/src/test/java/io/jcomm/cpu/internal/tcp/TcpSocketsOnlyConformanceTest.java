package io.jcomm.cpu.internal.tcp;

import java.util.Map;

/** The conformance kit on the tcp backend with the shared-memory path off: every byte by socket. */
class TcpSocketsOnlyConformanceTest extends TcpVariantConformanceKit {

    @Override
    protected Map<String, String> options() {
        return Map.of("tcp.shm", "false");
    }
}
