package io.jcomm.testkit;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Set;
import org.junit.jupiter.api.Test;
import org.opentest4j.AssertionFailedError;
import org.opentest4j.TestAbortedException;

class RequirementsTest {

    @Test
    void theListIsCommaSeparatedTrimmedAndCaseBlind() {
        assertEquals(Set.of("gloo", "torch"), Requirements.parse(" Gloo, ,torch ,"));
        assertEquals(Set.of(), Requirements.parse(","));
    }

    @Test
    void missingAndNotRequiredSkipsMissingAndRequiredFailsAvailablePasses() {
        TestAbortedException skipped = assertThrows(TestAbortedException.class,
                () -> Requirements.check("gloo", false, "libgloo not found", Set.of("torch")));
        assertTrue(skipped.getMessage().contains("gloo unavailable: libgloo not found"), skipped.getMessage());
        AssertionFailedError failed = assertThrows(AssertionFailedError.class,
                () -> Requirements.check("GLOO", false, "libgloo not found", Set.of("gloo", "torch")));
        assertTrue(failed.getMessage().contains("GLOO is required here") && failed.getMessage().contains("libgloo not found"),
                failed.getMessage());
        Requirements.check("gloo", true, "unused", Set.of("gloo"));
    }
}
