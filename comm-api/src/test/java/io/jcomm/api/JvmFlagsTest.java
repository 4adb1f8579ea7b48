package io.jcomm.api;

import static org.junit.jupiter.api.Assertions.assertTrue;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The Maven build's argLine and {@link JvmFlags#REQUIRED} must not drift apart. */
class JvmFlagsTest {

    @Test
    void testJvmCarriesEveryRequiredFlag() {
        List<String> args = ManagementFactory.getRuntimeMXBean().getInputArguments();
        String joined = String.join(" ", args);
        for (int i = 0; i < JvmFlags.REQUIRED.size(); i++) {
            String f = JvmFlags.REQUIRED.get(i);
            if (f.startsWith("--add-")) {
                String value = JvmFlags.REQUIRED.get(++i);
                assertTrue(joined.contains(f + "=" + value) || joined.contains(f + " " + value),
                        "test JVM lacks " + f + " " + value + "; argLine is " + joined);
            } else {
                assertTrue(args.contains(f), "test JVM lacks " + f + "; argLine is " + joined);
            }
        }
    }

    @Test
    void launcherArgFileMatches() throws IOException {
        Path file = Path.of("..", "bin", "jvm.flags");
        List<String> lines = new ArrayList<>();
        for (String l : Files.readAllLines(file)) {
            if (!l.isBlank()) {
                lines.add(l.trim());
            }
        }
        assertEquals(JvmFlags.REQUIRED, lines, "bin/jvm.flags must list JvmFlags.REQUIRED, one per line");
    }
}
