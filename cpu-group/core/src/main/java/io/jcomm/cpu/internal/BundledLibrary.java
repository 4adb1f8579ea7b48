package io.jcomm.cpu.internal;

import io.jcomm.api.config.Setting;
import java.io.IOException;
import java.io.InputStream;
import java.net.URISyntaxException;
import java.net.URL;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Locale;
import java.util.Optional;

/**
 * Loads a JNI library that the build put on the class path under {@code /native/linux-x86_64/}: the one
 * mechanism behind every native library of the CPU backends (the gloo glue, the shared-memory copy).
 *
 * <p>Where the library comes from, in order:
 * <ol>
 *   <li>a system property naming the {@code .so} to load instead;</li>
 *   <li>the class path resource: loaded in place when it is a file (tests run from {@code target/classes}),
 *       otherwise (inside a jar) copied to a private temporary directory (0700), loaded, and deleted again
 *       (a loaded library stays mapped).</li>
 * </ol>
 */
public final class BundledLibrary {

    private BundledLibrary() {
    }

    /** Thrown when the library is not there to load (not built for this platform, or not bundled). */
    public static final class Missing extends Exception {
        private static final long serialVersionUID = 1L;

        Missing(String message) {
            super(message);
        }
    }

    /** Whether this JVM runs on linux-x86_64, the only platform the build makes native libraries for. */
    public static boolean supportedPlatform() {
        return platform().equals("linux-x86_64");
    }

    /** This JVM's platform as {@code os-arch}, e.g. {@code linux-x86_64}. */
    public static String platform() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String arch = System.getProperty("os.arch", "").toLowerCase(Locale.ROOT);
        if (arch.equals("amd64")) {
            arch = "x86_64";
        }
        return (os.contains("linux") ? "linux" : os) + "-" + arch;
    }

    /**
     * Loads {@code lib<name>.so}.
     *
     * @param anchor       the class whose loader finds the resource
     * @param name         the library's name without {@code lib} and {@code .so}
     * @param override     the system property that names a file to load instead
     * @return where it was loaded from (for availability messages)
     * @throws Missing              if the platform is unsupported, the resource is absent or the override
     *                              names no file
     * @throws IOException          if copying the library out of its jar failed
     * @throws UnsatisfiedLinkError if the library does not load
     */
    public static String load(Class<?> anchor, String name, Setting override) throws Missing, IOException {
        if (!supportedPlatform()) {
            throw new Missing("the native library " + name + " is built for linux-x86_64 only, this is " + platform());
        }
        Optional<String> configured = override.fromProcess();
        if (configured.isPresent()) {
            Path p = Path.of(configured.get()).toAbsolutePath();
            if (!Files.isRegularFile(p)) {
                throw new Missing("-D" + override.name() + "=" + p + " does not exist");
            }
            System.load(p.toString());
            return p.toString();
        }
        String file = "lib" + name + ".so";
        URL url = anchor.getResource("/native/linux-x86_64/" + file);
        if (url == null) {
            throw new Missing(file + " is not on the class path (the build skipped it)");
        }
        if ("file".equals(url.getProtocol())) {
            Path p;
            try {
                p = Path.of(url.toURI());
            } catch (URISyntaxException e) {
                throw new IOException("bad resource location " + url, e);
            }
            System.load(p.toString());
            return p.toString();
        }
        Path dir = Files.createTempDirectory("jcomm-" + name + "-",
                PosixFilePermissions.asFileAttribute(PosixFilePermissions.fromString("rwx------")));
        Path lib = dir.resolve(file);
        try {
            try (InputStream in = url.openStream()) {
                Files.copy(in, lib, StandardCopyOption.REPLACE_EXISTING);
            }
            System.load(lib.toString());
            return url.toString();
        } finally {
            Files.deleteIfExists(lib);
            Files.deleteIfExists(dir);
        }
    }
}
