package io.jcomm.device.internal.nccl;

import java.io.IOException;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Finds shared libraries and reads NCCL's version <em>without loading anything</em>: the probe must
 * decide before the first {@code dlopen}, because loading bindings against a missing or too old
 * library either leaves a class broken for the JVM's life or kills the JVM on the first missing
 * symbol.
 */
final class LibrarySearch {

    /** {@code VERSION_STRING} that every libnccl embeds ({@code "NCCL version 2.29.3+cuda13.0"}). */
    private static final byte[] MARKER = "NCCL version ".getBytes(StandardCharsets.US_ASCII);
    private static final Pattern EMBEDDED = Pattern.compile("(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})");
    private static final Pattern FILE_NAME = Pattern.compile("libnccl\\.so\\.(\\d{1,3})\\.(\\d{1,3})\\.(\\d{1,3})");
    /** Larger files are not scanned (libnccl is a few hundred MiB). */
    private static final long MAX_SCAN_BYTES = 2L << 30;

    private LibrarySearch() {
    }

    /** The first {@code dir/name} that is a readable regular file (symbolic links followed). */
    static Optional<Path> find(String name, List<Path> dirs) {
        for (Path d : dirs) {
            Path p = d.resolve(name);
            if (Files.isRegularFile(p) && Files.isReadable(p)) {
                return Optional.of(p);
            }
        }
        return Optional.empty();
    }

    /**
     * The directories the dynamic linker would search on this host: the {@code ld.so.conf}
     * directories (the source of {@code ld.so.cache}) and the usual system and NVIDIA locations.
     */
    static List<Path> systemDirs() {
        Set<Path> dirs = ldSoConfDirs(Path.of("/etc/ld.so.conf"));
        for (String d : new String[] {"/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64",
                "/lib", "/usr/lib", "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/wsl/lib",
                "/usr/local/cuda/lib64", "/usr/local/cuda/lib", "/usr/local/cuda/targets/x86_64-linux/lib"}) {
            dirs.add(Path.of(d));
        }
        return new ArrayList<>(dirs);
    }

    /** The directories {@code conf} names, its includes followed (sorted, as ldconfig does). */
    static Set<Path> ldSoConfDirs(Path conf) {
        Set<Path> dirs = new LinkedHashSet<>();
        readLdSoConf(conf, dirs, 0);
        return dirs;
    }

    private static void readLdSoConf(Path file, Set<Path> out, int depth) {
        if (depth > 4 || !Files.isReadable(file)) {
            return;
        }
        List<String> lines;
        try {
            lines = Files.readAllLines(file, StandardCharsets.UTF_8);
        } catch (IOException | RuntimeException e) {
            return;
        }
        for (String raw : lines) {
            String line = raw.strip();
            int hash = line.indexOf('#');
            if (hash >= 0) {
                line = line.substring(0, hash).strip();
            }
            if (line.isEmpty()) {
                continue;
            }
            if (line.startsWith("include ")) {
                includeGlob(file.getParent(), line.substring(8).strip(), out, depth);
            } else if (line.startsWith("/")) {
                out.add(Path.of(line));
            }
        }
    }

    private static void includeGlob(Path base, String pattern, Set<Path> out, int depth) {
        Path p = base.resolve(pattern);
        Path dir = p.getParent();
        String glob = p.getFileName().toString();
        if (dir == null || !Files.isDirectory(dir)) {
            return;
        }
        // ld.so.conf's includes are '*' globs ("*.conf"); those are matched here, any other glob by a
        // PathMatcher (which compiles a regex: a few ms of every cold JVM's start, every rank's)
        boolean starsOnly = true;
        for (int i = 0; i < glob.length(); i++) {
            char c = glob.charAt(i);
            starsOnly &= c != '?' && c != '[' && c != '{' && c != '\\';
        }
        var matcher = starsOnly ? null : dir.getFileSystem().getPathMatcher("glob:" + glob);
        List<Path> matched = new ArrayList<>();
        try (DirectoryStream<Path> files = Files.newDirectoryStream(dir)) {
            for (Path f : files) {
                if (starsOnly ? starMatch(glob, f.getFileName().toString()) : matcher.matches(f.getFileName())) {
                    matched.add(f);
                }
            }
        } catch (IOException | RuntimeException e) {
            return; // unreadable configuration: search the defaults only
        }
        matched.sort(null);
        for (Path f : matched) {
            readLdSoConf(f, out, depth + 1);
        }
    }

    /** Whether {@code name} matches {@code glob}, in which only {@code *} (any run of characters) is special. */
    static boolean starMatch(String glob, String name) {
        int g = 0;
        int n = 0;
        int star = -1;
        int mark = 0;
        while (n < name.length()) {
            if (g < glob.length() && glob.charAt(g) == '*') {
                star = g++;
                mark = n;
            } else if (g < glob.length() && glob.charAt(g) == name.charAt(n)) {
                g++;
                n++;
            } else if (star >= 0) {
                g = star + 1;
                n = ++mark;
            } else {
                return false;
            }
        }
        while (g < glob.length() && glob.charAt(g) == '*') {
            g++;
        }
        return g == glob.length();
    }

    /** Splits a {@code :}-separated path list, skipping empty entries. */
    static List<Path> splitPath(String value) {
        List<Path> out = new ArrayList<>();
        if (value == null) {
            return out;
        }
        for (String s : value.split(":")) {
            if (!s.isBlank()) {
                try {
                    out.add(Path.of(s.strip()));
                } catch (RuntimeException e) {
                    // not a valid path: ignore
                }
            }
        }
        return out;
    }

    /**
     * NCCL's version code for the library file at {@code lib}, read without loading it: from the
     * real file name ({@code libnccl.so.2.29.3}) when the link points at one, else from the
     * {@code "NCCL version X.Y.Z"} string the library embeds.
     */
    static Optional<Integer> ncclVersion(Path lib) {
        try {
            Path real = lib.toRealPath();
            Matcher m = FILE_NAME.matcher(real.getFileName().toString());
            if (m.matches()) {
                return Optional.of(code(m));
            }
            return embeddedVersion(real);
        } catch (IOException | RuntimeException e) {
            return Optional.empty();
        }
    }

    /** Scans the file for {@code "NCCL version X.Y.Z"} (memory-mapped, bounded). */
    static Optional<Integer> embeddedVersion(Path file) throws IOException {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            long size = Math.min(ch.size(), MAX_SCAN_BYTES);
            long pos = 0;
            final long window = 256L << 20;
            while (pos < size) {
                long len = Math.min(window + 64, size - pos);
                MappedByteBuffer buf = ch.map(FileChannel.MapMode.READ_ONLY, pos, len);
                int at = indexOf(buf, MARKER);
                if (at >= 0) {
                    byte[] tail = new byte[(int) Math.min(24, len - at - MARKER.length)];
                    buf.get(at + MARKER.length, tail);
                    Matcher m = EMBEDDED.matcher(new String(tail, StandardCharsets.US_ASCII));
                    if (m.lookingAt()) {
                        return Optional.of(code(m));
                    }
                }
                pos += window;
            }
        }
        return Optional.empty();
    }

    private static int indexOf(MappedByteBuffer buf, byte[] needle) {
        int limit = buf.limit() - needle.length;
        byte first = needle[0];
        outer:
        for (int i = 0; i <= limit; i++) {
            if (buf.get(i) != first) {
                continue;
            }
            for (int j = 1; j < needle.length; j++) {
                if (buf.get(i + j) != needle[j]) {
                    continue outer;
                }
            }
            return i;
        }
        return -1;
    }

    private static int code(Matcher m) {
        return NcclConstants.versionCode(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)),
                Integer.parseInt(m.group(3)));
    }
}
