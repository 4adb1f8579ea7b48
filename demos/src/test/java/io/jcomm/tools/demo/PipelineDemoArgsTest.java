package io.jcomm.tools.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** The demo's own parser of its common command lines agrees with picocli, and leaves the rest to it. */
class PipelineDemoArgsTest {

    private static List<Object> fields(PipelineDemo d) {
        return List.of(d.tp, d.pp, d.steps, d.warmup, d.hidden, d.moe, d.device, d.phases);
    }

    @Test
    void commonCommandLinesParseAsPicocliParsesThem() {
        List<String[]> lines = List.of(new String[0], new String[] {"--tp", "2", "--pp", "2"},
                new String[] {"--tp=4", "--pp", "1", "--steps", "40", "--warmup=10", "--hidden", "256", "--moe"},
                new String[] {"--device", "cpu", "--phases", "--steps", "-1"}, new String[] {"--device=AUTO"});
        for (String[] args : lines) {
            PipelineDemo simple = new PipelineDemo();
            assertTrue(simple.parseSimple(args), String.join(" ", args));
            PipelineDemo picocli = new PipelineDemo();
            new CommandLine(picocli).parseArgs(args);
            assertEquals(fields(picocli), fields(simple), String.join(" ", args));
        }
        assertEquals(List.of(2, 2, 300, 50, 1024, false, "auto", false), fields(new PipelineDemo()), "the defaults");
        String usage = new CommandLine(new PipelineDemo()).getUsageMessage();
        assertTrue(usage.contains("measured steps (default 300)") && usage.contains("(default auto)"), usage);
    }

    @Test
    void everythingElseIsLeftToPicocliUntouched() {
        for (String[] args : List.of(new String[] {"--help"}, new String[] {"-h"}, new String[] {"--tp"},
                new String[] {"--tp", "two"}, new String[] {"--tp", "0x2"}, new String[] {"--tp", "1", "--tp", "2"},
                new String[] {"--device", "gpu"}, new String[] {"--moe=true"}, new String[] {"--steps", "--moe"},
                new String[] {"--tp", "2", "extra"}, new String[] {"--tpp", "2"}, new String[] {"--hidden", "99999999999"})) {
            PipelineDemo d = new PipelineDemo();
            assertFalse(d.parseSimple(args), String.join(" ", args));
            assertEquals(fields(new PipelineDemo()), fields(d), "unchanged after " + String.join(" ", args));
        }
    }
}
