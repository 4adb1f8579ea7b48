package io.jcomm.cpu.internal.tcp;

import io.jcomm.cpu.testkit.CpuGroupConformanceKit;

/** The conformance kit, threads as ranks, on the tcp backend with its defaults (shared memory on). */
class TcpConformanceTest extends CpuGroupConformanceKit {

    @Override
    protected String backend() {
        return "tcp";
    }
}
