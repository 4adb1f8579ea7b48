package io.jcomm.tools.run;

import java.io.IOException;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Comparator;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import javax.tools.JavaCompiler;
import javax.tools.ToolProvider;

/**
 * Compiles a single {@code .java} file given to {@code commrun} (like {@code java File.java}) once, in
 * the launcher, into a temporary directory that the workers get on their class path. The main class is
 * the file's public class: its package plus the file name.
 */
final class SourceCompiler {

    private static final Pattern PACKAGE = Pattern.compile("(?m)^\\s*package\\s+([\\w.]+)\\s*;");

    private SourceCompiler() {
    }

    /** The main class name {@code source} declares. */
    static String mainClassOf(Path source, String text) {
        String file = source.getFileName().toString();
        String simple = file.substring(0, file.length() - ".java".length());
        Matcher m = PACKAGE.matcher(stripComments(text));
        return m.find() ? m.group(1) + "." + simple : simple;
    }

    private static String stripComments(String s) {
        return s.replaceAll("(?s)/\\*.*?\\*/", "").replaceAll("//[^\n]*", "");
    }

    /**
     * Compiles {@code source} against {@code classPath} into {@code outDir}.
     *
     * @return the main class name
     * @throws IllegalArgumentException with the compiler's messages when it does not compile
     */
    static String compile(Path source, String classPath, Path outDir) {
        JavaCompiler javac = ToolProvider.getSystemJavaCompiler();
        if (javac == null) {
            throw new IllegalArgumentException("this Java runtime has no compiler; compile " + source
                    + " yourself and pass -cp DIR and the class name");
        }
        String text;
        try {
            text = Files.readString(source, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalArgumentException("cannot read " + source + ": " + e.getMessage(), e);
        }
        StringWriter msgs = new StringWriter();
        Boolean ok = javac.getTask(msgs, null, null,
                List.of("-proc:none", "-d", outDir.toString(), "-cp", classPath, "--release",
                        Integer.toString(Runtime.version().feature()), "-encoding", "UTF-8"),
                null, javac.getStandardFileManager(null, null, StandardCharsets.UTF_8).getJavaFileObjects(source.toFile()))
                .call();
        if (!Boolean.TRUE.equals(ok)) {
            throw new IllegalArgumentException(source + " does not compile:\n" + msgs.toString().strip());
        }
        return mainClassOf(source, text);
    }

    static void deleteQuietly(Path dir) {
        if (dir == null) {
            return;
        }
        try (Stream<Path> s = Files.walk(dir)) {
            s.sorted(Comparator.reverseOrder()).forEach(p -> {
                try {
                    Files.deleteIfExists(p);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            });
        } catch (IOException | UncheckedIOException ignored) {
            // a temporary directory: best effort
        }
    }
}
