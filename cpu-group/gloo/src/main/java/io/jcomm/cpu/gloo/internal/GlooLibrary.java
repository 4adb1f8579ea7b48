package io.jcomm.cpu.gloo.internal;

import io.jcomm.api.config.Settings;
import io.jcomm.api.Availability;
import io.jcomm.cpu.internal.BundledLibrary;
import java.io.IOException;

/**
 * Loads {@code libjcommgloo.so} (the JNI glue, linked against Debian's {@code libgloo.so.0}) once
 * per class loader and remembers the verdict.
 *
 * <p>Where the library comes from, in order:
 * <ol>
 *   <li>the system property {@code jcomm.gloo.library} (a path to the {@code .so});</li>
 *   <li>the class path resource {@value #RESOURCE}: loaded in place when it is a file (tests run
 *       from {@code target/classes}), otherwise (inside a jar) copied to a private temporary
 *       directory, loaded, and deleted again.</li>
 * </ol>
 * ({@link BundledLibrary} does the loading.) The build skips the native step when {@code libgloo-dev}
 * is missing, so the resource is absent and the verdict starts with {@value #NOT_FOUND}. Loading never throws and never runs native code other
 * than the library's {@code JNI_OnLoad} and a probe.
 */
public final class GlooLibrary {

    /** Class path location of the bundled library. */
    public static final String RESOURCE = "/native/linux-x86_64/libjcommgloo.so";

    /** The reason reported when the glue or libgloo is missing. */
    public static final String NOT_FOUND = "libgloo not found (apt-get install libgloo-dev)";

    private GlooLibrary() {
    }

    private static final class Verdict {
        static final Availability VALUE = load();
    }

    /** Whether the gloo backend can run in this JVM, and why (not). Never throws. */
    public static Availability availability() {
        return Verdict.VALUE;
    }

    private static Availability load() {
        try {
            String where = BundledLibrary.load(GlooLibrary.class, "jcommgloo", Settings.GLOO_LIBRARY);
            String probe = GlooNative.probe();
            return Availability.available(probe + " via JNI (" + where + ")");
        } catch (BundledLibrary.Missing | UnsatisfiedLinkError e) {
            return Availability.unavailable(NOT_FOUND + ": " + e.getMessage());
        } catch (IOException | RuntimeException e) {
            return Availability.unavailable(NOT_FOUND + ": could not load the JNI library: " + e);
        }
    }
}
