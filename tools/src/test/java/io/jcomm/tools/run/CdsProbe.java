package io.jcomm.tools.run;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Set;
import java.util.TreeSet;

/**
 * Worker of {@link AppCdsTest}: prints the class-data archives this JVM has mapped (from
 * {@code /proc/self/maps}: the JVM keeps an archive it uses mapped for its whole life), the JDK's own
 * base archive aside, then its class path.
 */
public final class CdsProbe {

    /** Start of the line the probe prints; the mapped archives follow, as a set. */
    static final String MARK = "CDS-PROBE mapped=";
    /** Start of the second line: the JVM's class path follows. */
    static final String CLASS_PATH = "CDS-PROBE classpath=";

    private CdsProbe() {
    }

    public static void main(String[] args) throws IOException {
        Set<String> mapped = new TreeSet<>();
        for (String line : Files.readAllLines(Path.of("/proc/self/maps"))) {
            int i = line.indexOf('/');
            if (i >= 0 && line.endsWith(".jsa") && !line.startsWith(System.getProperty("java.home"), i)) {
                mapped.add(line.substring(i));
            }
        }
        System.out.println(MARK + mapped);
        System.out.println(CLASS_PATH + System.getProperty("java.class.path"));
    }
}
