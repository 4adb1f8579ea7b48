package io.jcomm.api;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
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
}
