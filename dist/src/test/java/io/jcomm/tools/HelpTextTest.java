package io.jcomm.tools;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.jcomm.tools.bench.CommBench;
import io.jcomm.tools.demo.DemoCommand;
import io.jcomm.tools.run.CommRun;
import io.jcomm.tools.store.CommStoreCommand;
import io.jcomm.tools.top.CommTop;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import picocli.CommandLine;

/**
 * Every command's help renders without picocli's warnings: picocli formats descriptions, and a bare
 * {@code %} (as in "in % of one core") made it print a warning three times above {@code commbench allreduce
 * --help} and the text unformatted.
 */
class HelpTextTest {

    @Test
    void everyHelpRendersWithoutPicocliWarnings() {
        PrintStream saved = System.err;
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        List<String> bad = new ArrayList<>();
        System.setErr(new PrintStream(err, true, StandardCharsets.UTF_8));
        try {
            for (CommandLine cl : List.of(CommBench.commandLine(), CommRun.commandLine(new CommRun()),
                    new CommandLine(new CommStoreCommand()), CommTop.commandLine(new CommTop()),
                    DemoCommand.commandLine(System.out))) {
                render(cl, bad);
            }
        } finally {
            System.setErr(saved);
        }
        String printed = err.toString(StandardCharsets.UTF_8);
        assertTrue(bad.isEmpty(), "help texts with unformatted %n: " + bad);
        assertFalse(printed.contains("picocli WARN"), printed);
    }

    private static void render(CommandLine cl, List<String> bad) {
        String usage = cl.getUsageMessage(CommandLine.Help.Ansi.OFF);
        if (usage.contains("%n")) {
            bad.add(cl.getCommandSpec().qualifiedName());
        }
        for (CommandLine sub : cl.getSubcommands().values()) {
            render(sub, bad);
        }
    }
}
