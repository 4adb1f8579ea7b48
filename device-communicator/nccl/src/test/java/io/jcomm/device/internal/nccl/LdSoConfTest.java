package io.jcomm.device.internal.nccl;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The NCCL probe's reading of the dynamic linker's configuration. */
class LdSoConfTest {

    @Test
    void starGlobsMatchAsTheShellDoes() {
        assertTrue(LibrarySearch.starMatch("*.conf", "libc.conf"));
        assertTrue(LibrarySearch.starMatch("*.conf", ".conf"));
        assertFalse(LibrarySearch.starMatch("*.conf", "libc.conf.bak"));
        assertTrue(LibrarySearch.starMatch("zz-*-*.conf", "zz-cuda-13-0.conf"));
        assertFalse(LibrarySearch.starMatch("zz-*-*.conf", "zz-cuda.conf"));
        assertTrue(LibrarySearch.starMatch("*", "anything"));
        assertTrue(LibrarySearch.starMatch("**a*", "xxa"));
        assertTrue(LibrarySearch.starMatch("exact.conf", "exact.conf"));
        assertFalse(LibrarySearch.starMatch("exact.conf", "exact.confx"));
        assertFalse(LibrarySearch.starMatch("a*b", "acbd"));
        assertTrue(LibrarySearch.starMatch("a*b", "acbdb"));
    }

    @Test
    void includesAreFollowedInSortedOrderWithEitherKindOfGlob(@TempDir Path tmp) throws Exception {
        Path d = Files.createDirectories(tmp.resolve("ld.so.conf.d"));
        Files.writeString(d.resolve("b.conf"), "/opt/b\n# a comment\n/opt/b2 # trailing\n");
        Files.writeString(d.resolve("a.conf"), "/opt/a\ninclude " + tmp.resolve("more") + "/[xy].conf\n");
        Files.writeString(d.resolve("c.conf.disabled"), "/opt/never\n");
        Path more = Files.createDirectories(tmp.resolve("more"));
        Files.writeString(more.resolve("x.conf"), "/opt/x\n");
        Files.writeString(more.resolve("z.conf"), "/opt/z\n");
        Path conf = Files.writeString(tmp.resolve("ld.so.conf"), "include ld.so.conf.d/*.conf\n/opt/top\nnot-a-path\n");
        assertEquals(List.of(Path.of("/opt/a"), Path.of("/opt/x"), Path.of("/opt/b"), Path.of("/opt/b2"), Path.of("/opt/top")),
                List.copyOf(LibrarySearch.ldSoConfDirs(conf)));
        assertEquals(List.of(), List.copyOf(LibrarySearch.ldSoConfDirs(tmp.resolve("missing.conf"))));
    }
}
