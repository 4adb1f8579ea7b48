package io.jcomm.tools.demo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/** {@code demo}: one subcommand per program, each with its own options; the pipeline when none is named. */
class DemoCommandTest {

    private static final PrintStream OUT = new PrintStream(new ByteArrayOutputStream(), true, StandardCharsets.UTF_8);

    /** The program {@code args} select, with its options applied (nothing runs). */
    private static Object parse(String... args) {
        CommandLine cl = DemoCommand.commandLine(OUT);
        CommandLine.ParseResult r = cl.parseArgs(DemoCommand.withDefault(cl, args));
        assertTrue(r.hasSubcommand(), String.join(" ", args));
        return r.subcommand().commandSpec().userObject();
    }

    private static List<Object> pipeline(PipelineDemo d) {
        return List.of(d.tp, d.pp, d.steps, d.warmup, d.hidden, d.moe, d.device, d.phases);
    }

    @Test
    void withoutACommandTheArgumentsAreThePipelines() {
        assertEquals(List.of(2, 2, 300, 50, 1024, false, "auto", false), pipeline((PipelineDemo) parse()), "the defaults");
        assertEquals(List.of(4, 1, 40, 10, 256, true, "cpu", true), pipeline((PipelineDemo) parse("--tp=4", "--pp", "1",
                "--steps", "40", "--warmup=10", "--hidden", "256", "--moe", "--device", "cpu", "--phases")));
        assertEquals(List.of(2, 2, 40, 50, 1024, false, "auto", false), pipeline((PipelineDemo) parse("pipeline", "--tp",
                "2", "--pp", "2", "--steps", "40")));
    }

    @Test
    void eachProgramIsASubcommandWithItsOwnOptionsUnderItsNameAndItsFlag() {
        for (String pd : List.of("pd", "--pd")) {
            DemoCommand.Pd p = assertInstanceOf(DemoCommand.Pd.class, parse(pd, "prefill", "--store", "h:1", "--requests",
                    "5", "--window", "2"));
            assertEquals(List.of("prefill", "h:1", 5, 4, 16, 64 << 10, 2), List.of(p.role, p.store, p.requests, p.layers,
                    p.blocks, p.blockBytes, p.window));
        }
        for (String weights : List.of("weights", "--weights")) {
            DemoCommand.Weights w = assertInstanceOf(DemoCommand.Weights.class, parse(weights, "engine", "--weights-mib",
                    "64"));
            assertEquals(List.of("engine", 64, 64, 3, 1024), List.of(w.role, w.weightsMib, w.tensors, w.versions,
                    w.regionMib));
            assertNull(w.store);
        }
        for (String elastic : List.of("elastic", "--elastic")) {
            DemoCommand.Elastic e = assertInstanceOf(DemoCommand.Elastic.class, parse(elastic, "--moe", "--tp", "2",
                    "--steps", "8000", "--hidden", "256"));
            assertEquals(List.of(2, 8000, 256, true), List.of(e.tp, e.steps, e.hidden, e.moe));
        }
    }

    @Test
    void optionsOfAnotherProgramAndMissingRolesAreUsageErrors() {
        for (String[] args : List.of(new String[] {"--tp", "2", "--pd", "decode"}, new String[] {"pd"},
                new String[] {"pd", "decode", "--tp", "2"}, new String[] {"elastic", "--pp", "2"},
                new String[] {"weights", "engine", "--requests", "3"}, new String[] {"--device", "cpu", "--elastic"})) {
            assertThrows(CommandLine.ParameterException.class, () -> parse(args), String.join(" ", args));
        }
        StringWriter err = new StringWriter();
        CommandLine cl = DemoCommand.commandLine(OUT).setErr(new PrintWriter(err));
        assertEquals(2, cl.execute(DemoCommand.withDefault(cl, new String[] {"--tpp", "2"})));
        assertTrue(err.toString().contains("Unknown options: '--tpp'"), err.toString());
    }

    @Test
    void theHelpListsThePrograms() {
        String usage = DemoCommand.commandLine(OUT).getUsageMessage(CommandLine.Help.Ansi.OFF);
        for (String program : List.of("pipeline", "pd, --pd", "weights, --weights", "elastic, --elastic")) {
            assertTrue(usage.contains(program), usage);
        }
        CommandLine cl = DemoCommand.commandLine(OUT);
        assertEquals(List.of("--help"), List.of(DemoCommand.withDefault(cl, new String[] {"--help"})), "demo's own help");
        String pipelineUsage = cl.getSubcommands().get("pipeline").getUsageMessage(CommandLine.Help.Ansi.OFF);
        assertTrue(pipelineUsage.contains("measured steps (default 300)") && pipelineUsage.contains("(default auto)"),
                pipelineUsage);
    }
}
