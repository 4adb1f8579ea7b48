package io.jcomm.cpu.gloo;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import io.jcomm.api.Availability;
import io.jcomm.cpu.testkit.CpuGroupConformanceKit;
import org.junit.jupiter.api.BeforeAll;

/**
 * The CPU group conformance kit on the gloo backend with its defaults (argument check and goodbye
 * on): every case with ranks as threads (2, 3, 4) and as JVMs (2, 3, 4), bad input, mismatches,
 * timeouts, close, and kill -9 of a rank. Skipped, with the reason, where libgloo is missing.
 */
class GlooConformanceTest extends CpuGroupConformanceKit {

    @BeforeAll
    static void requireGloo() {
        Availability a = GlooBackend.availability();
        assumeTrue(a.available(), a.toString());
    }

    @Override
    protected String backend() {
        return GlooBackend.NAME;
    }
}
