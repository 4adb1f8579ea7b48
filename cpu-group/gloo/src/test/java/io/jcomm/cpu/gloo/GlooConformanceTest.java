package io.jcomm.cpu.gloo;

import io.jcomm.api.Availability;
import io.jcomm.cpu.testkit.CpuGroupConformanceKit;

/**
 * The CPU group conformance kit on the gloo backend with its defaults (argument check and goodbye
 * on): every case with ranks as threads (2, 3, 4) and as JVMs (2, 3, 4), bad input, mismatches,
 * timeouts, close, and kill -9 of a rank. Skipped, with the reason, where libgloo is missing (failed where {@code JCOMM_REQUIRE} names gloo).
 */
class GlooConformanceTest extends CpuGroupConformanceKit {

    @Override
    protected Availability availability() {
        return GlooBackend.availability();
    }

    @Override
    protected String backend() {
        return GlooBackend.NAME;
    }
}
