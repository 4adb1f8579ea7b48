package io.jcomm.cpu.gloo.internal;

import io.jcomm.api.Availability;
import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Locale;

/**
 * Loads {@code libjcommgloo.so} (the JNI glue, linked against Debian's {@code libgloo.so.0}) once
 * per class loader and remembers the verdict.
 *
 * <p>Where the library comes from, in order:
 * <ol>
 *   <li>the system property {@value #LIBRARY_PROP} (a path to the {@code .so});</li>
 *   <li>the class path resource {@value #RESOURCE}: loaded in place when it is a file (tests run
 *       from {@code target/classes}), otherwise (inside a jar) copied to a private temporary
 *       directory, loaded, and deleted again.</li>
 * </ol>
 * The build skips the native step when {@code libgloo-dev} is missing, so the resource is absent
 * and the verdict is {@value #NOT_FOUND}. Loading never throws and never runs native code other
 * than the library's {@code JNI_OnLoad} and a probe.
 */
public final class GlooLibrary {

    /** System property naming the library file to load instead of the bundled one. */
    public static final String LIBRARY_PROP = "jcomm.gloo.library";

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
            String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
            String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
            if (!os.contains("linux") || !(arch.equals("amd64") || arch.equals("x86_64"))) {
                return Availability.unavailable(NOT_FOUND + ": the gloo backend is built for linux-x86_64 only, this is "
                        + os + "-" + arch);
            }
            String where;
            String configured = System.getProperty(LIBRARY_PROP);
            if (configured != null && !configured.isBlank()) {
                Path p = Path.of(configured.trim()).toAbsolutePath();
                if (!Files.isRegularFile(p)) {
                    return Availability.unavailable(NOT_FOUND + ": -D" + LIBRARY_PROP + "=" + p + " does not exist");
                }
                System.load(p.toString());
                where = p.toString();
            } else {
                URL url = GlooLibrary.class.getResource(RESOURCE);
                if (url == null) {
                    return Availability.unavailable(NOT_FOUND);
                }
                where = loadResource(url);
            }
            String probe = GlooNative.probe();
            return Availability.available(probe + " via JNI (" + where + ")");
        } catch (UnsatisfiedLinkError e) {
            return Availability.unavailable(NOT_FOUND + ": " + e.getMessage());
        } catch (IOException | URISyntaxException | RuntimeException e) {
            return Availability.unavailable(NOT_FOUND + ": could not load the JNI library: " + e);
        }
    }

    private static String loadResource(URL url) throws IOException, URISyntaxException {
        if ("file".equals(url.getProtocol())) {
            Path p = Path.of(url.toURI());
            System.load(p.toString());
            return p.toString();
        }
        Path dir = Files.createTempDirectory("jcomm-gloo-",
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        Path lib = dir.resolve("libjcommgloo.so");
        try {
            try (InputStream in = url.openStream()) {
                Files.copy(in, lib, StandardCopyOption.REPLACE_EXISTING);
            }
            System.load(lib.toString());
            return url.toString();
        } finally {
            // A loaded library stays mapped after its file is deleted: leave nothing behind.
            Files.deleteIfExists(lib);
            Files.deleteIfExists(dir);
        }
    }
}
