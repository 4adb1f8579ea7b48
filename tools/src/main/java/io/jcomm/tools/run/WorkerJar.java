package io.jcomm.tools.run;

import io.jcomm.api.config.Settings;
import io.jcomm.api.JvmFlags;
import io.jcomm.runtime.Fnv1a;
import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.LinkOption;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.jar.Attributes;
import java.util.jar.JarInputStream;
import java.util.jar.JarOutputStream;
import java.util.jar.Manifest;

/**
 * The jar commrun's workers start from ({@code java -jar}): a manifest and nothing else, whose
 * {@code Main-Class} is {@link RunWorker}, whose {@code Add-Exports} and {@code Add-Opens} are the
 * SDK's module flags ({@link JvmFlags#REQUIRED}) and whose {@code Class-Path} is the workers' class
 * path.
 *
 * <p>Why: on JDK 17 any {@code --add-exports} or {@code --add-opens} on the command line turns off the
 * class-data archive's optimized module handling. Every JVM then builds the boot layer's module graph
 * itself, reading the module descriptors out of the runtime image: ~15-20 ms of a lone cold JVM's CPU
 * (the JVM's {@code -Xlog:startuptime}, "Initialize module system": 19 against 3 ms), and the
 * compilations that work causes. The same grants in the main jar's manifest are applied by the Java
 * launcher after the graph was mapped from the archive, so the archived graph stays in use.
 *
 * <p>{@code Class-Path} entries are relative to the jar's directory: JDK 17's class-data sharing
 * resolves an absolute entry against that directory and then does not find it, which leaves every
 * class of it out of the archive. Directories end with {@code /}, as the attribute requires.
 *
 * <p>The jar is named after the hash of its manifest ({@code <cache>/jars/commrun-worker-<hash>.jar}):
 * the same class path and flags give the same file, which is written only when missing or different
 * (to a temporary name, then renamed), so that its size and time, which the workers' class-data
 * archive records, stay put; writing one removes the stale others ({@link #prune}). Never required: with a class path the attribute cannot express (a
 * wildcard, an entry that is not a path), module flags the manifest cannot carry, or when the cache
 * cannot be written or its directory is not the user's own or others may write it, {@link #prepare} gives null and the workers start as before ({@code -cp} and the
 * flags on the command line). The workers' {@code java.class.path} is the jar's path until
 * {@link RunWorker} sets it to the class path again ({@code jcomm.worker.class.path}).
 */
final class WorkerJar {

    /** The cache's subdirectory. */
    static final String DIRECTORY = "jars";

    private WorkerJar() {
    }

    /**
     * The workers' jar for {@code classPath}, written first when missing, or null when the workers
     * should start the classic way.
     */
    static Path prepare(Path cacheRoot, String classPath) {
        try {
            Path dir = cacheRoot.resolve(DIRECTORY);
            EpollLibraryCache.ownDirectory(cacheRoot);
            EpollLibraryCache.ownDirectory(dir, LinkOption.NOFOLLOW_LINKS);
            dir = dir.toRealPath();
            Manifest m = manifest(dir, classPath, JvmFlags.REQUIRED);
            if (m == null) {
                return null;
            }
            byte[] bytes = bytes(m);
            Path jar = dir.resolve("commrun-worker-" + Fnv1a.hex(Fnv1a.update(Fnv1a.EMPTY, bytes)) + ".jar");
            if (sameManifest(jar, m)) {
                return jar;
            }
            Path tmp = dir.resolve(jar.getFileName() + "." + ProcessHandle.current().pid() + ".tmp");
            try {
                try (OutputStream out = Files.newOutputStream(tmp); JarOutputStream j = new JarOutputStream(out, m)) {
                    j.flush();
                }
                Files.move(tmp, jar, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
            } finally {
                Files.deleteIfExists(tmp);
            }
            prune(dir, jar);
            return sameManifest(jar, m) ? jar : null;
        } catch (IOException | RuntimeException e) {
            return null; // never required
        }
    }

    /**
     * Removes the worker jars of {@code dir} but {@code kept} that are older than {@link AppCds#MAX_AGE}
     * and name a class path entry that is gone (a removed checkout or build): each class path makes a
     * jar, and a jar in use is never rewritten (the class-data archive records its time), so age alone
     * does not tell a stale one.
     */
    static void prune(Path dir, Path kept) {
        java.time.Instant oldest = java.time.Instant.now().minus(AppCds.MAX_AGE);
        try (java.nio.file.DirectoryStream<Path> ds = Files.newDirectoryStream(dir, "commrun-worker-*.jar")) {
            for (Path p : ds) {
                if (!p.equals(kept) && Files.getLastModifiedTime(p, LinkOption.NOFOLLOW_LINKS).toInstant().isBefore(oldest)
                        && namesAMissingEntry(p)) {
                    Files.deleteIfExists(p);
                }
            }
        } catch (IOException | RuntimeException ignored) {
            // best effort
        }
    }

    private static boolean namesAMissingEntry(Path jar) {
        try (InputStream in = Files.newInputStream(jar); JarInputStream j = new JarInputStream(in)) {
            Manifest m = j.getManifest();
            String cp = m == null ? null : m.getMainAttributes().getValue(Attributes.Name.CLASS_PATH);
            if (cp == null) {
                return true;
            }
            for (String e : cp.split(" ")) {
                if (!e.isEmpty() && !Files.exists(Path.of(jar.getParent().toUri().resolve(e)))) {
                    return true;
                }
            }
            return false;
        } catch (IOException | RuntimeException e) {
            return true; // unreadable: of no use to a launch
        }
    }

    /** The JVM flags of {@code flags} that stay on the command line (those the manifest does not carry). */
    static List<String> commandLineFlags(List<String> flags) {
        List<String> out = new ArrayList<>();
        for (int i = 0; i < flags.size(); i++) {
            String f = flags.get(i);
            if (f.equals("--add-exports") || f.equals("--add-opens")) {
                i++;
            } else if (!f.startsWith("--add-exports=") && !f.startsWith("--add-opens=")) {
                out.add(f);
            }
        }
        return out;
    }

    /**
     * The manifest of a jar in {@code jarDir} for {@code classPath} and {@code flags}, or null when the
     * flags hold a module flag other than {@code --add-exports}/{@code --add-opens} to {@code ALL-UNNAMED},
     * or the class path an entry the attribute cannot express.
     */
    static Manifest manifest(Path jarDir, String classPath, List<String> flags) {
        List<String> exports = new ArrayList<>();
        List<String> opens = new ArrayList<>();
        for (int i = 0; i < flags.size(); i++) {
            String f = flags.get(i);
            String value;
            List<String> to;
            if (f.equals("--add-exports") || f.equals("--add-opens")) {
                if (i + 1 >= flags.size()) {
                    return null;
                }
                value = flags.get(++i);
                to = f.equals("--add-exports") ? exports : opens;
            } else if (f.startsWith("--add-exports=") || f.startsWith("--add-opens=")) {
                value = f.substring(f.indexOf('=') + 1);
                to = f.startsWith("--add-exports=") ? exports : opens;
            } else if (f.startsWith("--")) {
                return null; // --add-reads, --add-modules, ...: the command line's
            } else {
                continue;
            }
            if (!value.endsWith("=ALL-UNNAMED") || value.indexOf('/') < 1) {
                return null;
            }
            to.add(value.substring(0, value.length() - "=ALL-UNNAMED".length()));
        }
        List<String> entries = new ArrayList<>();
        for (String e : classPath.split(File.pathSeparator)) {
            if (e.isEmpty()) {
                continue;
            }
            if (e.contains("*")) {
                return null; // the java launcher expands it; the attribute does not
            }
            String rel = relative(jarDir, e);
            if (rel == null) {
                return null;
            }
            entries.add(rel);
        }
        if (entries.isEmpty()) {
            return null;
        }
        Manifest m = new Manifest();
        Attributes a = m.getMainAttributes();
        a.put(Attributes.Name.MANIFEST_VERSION, "1.0");
        a.put(Attributes.Name.MAIN_CLASS, RunWorker.class.getName());
        if (!exports.isEmpty()) {
            a.putValue("Add-Exports", String.join(" ", exports));
        }
        if (!opens.isEmpty()) {
            a.putValue("Add-Opens", String.join(" ", opens));
        }
        a.put(Attributes.Name.CLASS_PATH, String.join(" ", entries));
        return m;
    }

    /** {@code entry} as a URL relative to {@code jarDir} (a directory ending with '/'), or null. */
    static String relative(Path jarDir, String entry) {
        try {
            Path p = Path.of(entry).toAbsolutePath().normalize();
            if (Files.exists(p)) {
                p = p.toRealPath();
            }
            String rel = jarDir.relativize(p).toString().replace(File.separatorChar, '/');
            if (rel.isEmpty()) {
                return null;
            }
            if (Files.isDirectory(p, LinkOption.NOFOLLOW_LINKS)) {
                rel += "/";
            }
            if (!rel.startsWith("../")) {
                rel = "./" + rel; // a first segment with a ':' would read as a URL scheme
            }
            // quotes spaces, '%' and the other characters a URL path cannot hold
            return new URI(null, null, rel, null).getRawPath();
        } catch (URISyntaxException | RuntimeException | IOException e) {
            return null;
        }
    }

    private static byte[] bytes(Manifest m) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        m.write(b);
        return b.toByteArray();
    }

    /** Whether {@code jar} is a regular file whose manifest is {@code m}. */
    private static boolean sameManifest(Path jar, Manifest m) {
        if (!Files.isRegularFile(jar, LinkOption.NOFOLLOW_LINKS)) {
            return false;
        }
        try (InputStream in = Files.newInputStream(jar); JarInputStream j = new JarInputStream(in)) {
            return Objects.equals(j.getManifest(), m) && j.getNextJarEntry() == null;
        } catch (IOException | RuntimeException e) {
            return false;
        }
    }
}
