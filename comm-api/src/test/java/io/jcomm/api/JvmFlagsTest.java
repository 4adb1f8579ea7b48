package io.jcomm.api;

import static org.junit.jupiter.api.Assertions.assertTrue;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
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

    @Test
    void workerEnvironmentTurnsMallocHugePagesOnUnlessTheUserChose() {
        Map<String, String> none = Map.of("A", "1");
        Map<String, String> on = JvmFlags.workerEnvironment(none);
        assertEquals("glibc.malloc.hugetlb=1", on.get("GLIBC_TUNABLES"));
        assertEquals("1", on.get("A"));
        assertEquals(Map.of("A", "1"), none, "the base map is not modified");
        assertEquals("glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1",
                JvmFlags.workerEnvironment(Map.of("GLIBC_TUNABLES", "glibc.malloc.arena_max=2")).get("GLIBC_TUNABLES"),
                "appended to the tunables already set");
        assertEquals("glibc.malloc.hugetlb=0",
                JvmFlags.workerEnvironment(Map.of("GLIBC_TUNABLES", "glibc.malloc.hugetlb=0")).get("GLIBC_TUNABLES"),
                "the user's own setting wins");
        assertEquals("glibc.malloc.hugetlb=1",
                JvmFlags.workerEnvironment(Map.of("GLIBC_TUNABLES", " ")).get("GLIBC_TUNABLES"));
    }
}
