package io.jcomm.cpu.internal.tcp;

import io.jcomm.cpu.testkit.CpuGroupConformanceKit;

/**
 * The conformance kit on the tcp backend with some option changed ({@link #options()} of the subclass):
 * thread worlds of 2 and 3 and a JVM world of 3, without the kill tests, which {@link TcpConformanceTest}
 * runs with the defaults.
 */
abstract class TcpVariantConformanceKit extends CpuGroupConformanceKit {

    @Override
    protected String backend() {
        return "tcp";
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
