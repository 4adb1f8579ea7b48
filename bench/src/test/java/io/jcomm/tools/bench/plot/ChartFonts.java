package io.jcomm.tools.bench.plot;

import java.awt.GraphicsEnvironment;
import org.junit.jupiter.api.Assumptions;

/** Whether charts can be drawn here: headless AWT needs a font (CI installs fonts-dejavu-core). */
public final class ChartFonts {

    private ChartFonts() {
    }

    /** True when headless AWT finds at least one font family. */
    public static boolean available() {
        try {
            System.setProperty("java.awt.headless", "true");
            return GraphicsEnvironment.getLocalGraphicsEnvironment().getAvailableFontFamilyNames().length > 0;
        } catch (Throwable t) {
            return false;
        }
    }

    /** Skips the calling test, saying why, where no chart can be drawn. */
    public static void assume() {
        Assumptions.assumeTrue(available(), "no fonts for headless AWT on this machine (install fonts-dejavu-core)");
    }
}
